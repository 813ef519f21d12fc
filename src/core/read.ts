// Sync calls: a send reads a few small files, one at a time, and node:fs/promises would cost
// every send its load (with its streams, watchers and readline modules) for nothing.
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { accessSync, constants, readFileSync, statSync } = process.getBuiltinModule("node:fs");
import { MailsendError } from "./errors.js";

/** The process streams an input reader may use; injectable for tests. */
export interface InputStreams {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /**
   * Whether stdin is /dev/null, told without making the process's stdin stream (which costs a
   * one-shot send milliseconds): nothing can ever arrive on it, so there is nothing to watch for.
   * Absent, or false: ask stdin itself.
   */
  stdinIsNull?: () => boolean;
}

/** `o` with the streams' properties as they are defined: a getter for stdin stays one, so stdin is made only if read. */
export function withStreams<T extends object>(o: T, streams: InputStreams): T & InputStreams {
  return Object.defineProperties(o, Object.getOwnPropertyDescriptors(streams)) as T & InputStreams;
}

/** A path as it may be shown: quoted when it holds control characters (no terminal escapes from a file name). */
export function shownPath(path: string): string {
  return /[\u0000-\u001f\u007f-\u009f]/.test(path) ? JSON.stringify(path) : path;
}

export function fileError(e: unknown, rawPath: string, what: string): MailsendError {
  const path = shownPath(rawPath);
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT") {
    return new MailsendError("file_not_found", `${what} not found: ${path}`, { cause: e });
  }
  if (code === "EISDIR") {
    return new MailsendError("file_unreadable", `${what} is a directory, not a file: ${path}`, { cause: e });
  }
  if (code === "EACCES" || code === "EPERM") {
    return new MailsendError("file_unreadable", `${what} is not readable (permission denied): ${path}`, { cause: e });
  }
  return new MailsendError("file_unreadable", `${what} cannot be read: ${path} (${code ?? String(e)})`, { cause: e });
}

export async function readStdin(stdin: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}

/** Read a file, or stdin for "-". */
export async function readSource(path: string, what: string, io: InputStreams): Promise<Buffer> {
  if (path === "-") return readStdin(io.stdin);
  try {
    return readFileSync(path);
  } catch (e) {
    throw fileError(e, path, what);
  }
}

/** Size of a regular file, with the same errors as reading it. */
export async function regularFileSize(path: string, what: string): Promise<number> {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    throw fileError(e, path, what);
  }
  if (st.isDirectory()) throw fileError(Object.assign(new Error(), { code: "EISDIR" }), path, what);
  if (!st.isFile()) {
    throw new MailsendError("file_unreadable", `${what} is not a regular file: ${shownPath(path)}`);
  }
  try {
    accessSync(path, constants.R_OK);
  } catch (e) {
    throw fileError(e, path, what);
  }
  return st.size;
}

/** Decode as UTF-8, refusing bytes that are not (a body must not be silently mangled). */
export function utf8(buf: Buffer, what: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(buf);
  } catch {
    throw new MailsendError("invalid_message", `${what} is not valid UTF-8`, {
      hint: "Convert it first, e.g. iconv -f latin1 -t utf-8.",
    });
  }
}
