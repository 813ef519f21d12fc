/**
 * The batch's input, readable twice (validation, then sending). Stdin is spooled to a private
 * temp file; its hash names the journal, so re-running the same pipeline resumes it.
 */
import { createHash } from "node:crypto";
import { closeSync, createReadStream, createWriteStream, mkdirSync, openSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { localFileError } from "../core/errors.js";
import { regularFileSize, type InputStreams } from "../core/read.js";
import { fingerprint, legacyFingerprint } from "./journal.js";
import type { InputIds } from "./journal-place.js";
import { formatFromContent, formatFromName, type Format } from "./rows.js";
import type { BatchInput } from "./runner.js";

export interface OpenedInput {
  input: BatchInput;
  /** What names the journal: the file's path, or the hash of what came on stdin. */
  identity: string;
  fp: InputIds;
  /** Removes the spool of stdin (nothing for a file). */
  cleanup: () => void;
}

/** Stdin copied into a private temp dir (0700, the file 0600), and the hash of what it held. */
async function spoolStdin(stdin: NodeJS.ReadableStream): Promise<{ path: string; hash: string; cleanup: () => void }> {
  const dir = join(tmpdir(), `mailsend-batch-${process.pid}-${Date.now()}`);
  const path = join(dir, "stdin");
  const hash = createHash("sha256");
  let cleanup = () => {};
  try {
    mkdirSync(dir, { mode: 0o700 });
    cleanup = () => rmSync(dir, { recursive: true, force: true });
    const out = createWriteStream(path, { mode: 0o600 });
    let failed: Error | undefined;
    out.on("error", (e) => (failed ??= e));
    for await (const chunk of stdin) {
      if (failed) throw failed;
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
      hash.update(buf);
      if (!out.write(buf)) await new Promise<void>((r) => (out.once("drain", () => r()), out.once("error", () => r())));
    }
    await new Promise<void>((r, j) => out.end((e?: Error | null) => ((e ?? failed) ? j(e ?? failed) : r())));
  } catch (e) {
    cleanup();
    // The spool is a local file: a full or read-only temp dir is this machine's fault (73), said as such.
    throw (e as NodeJS.ErrnoException).code
      ? localFileError(e, path, "write", "copy of stdin (set TMPDIR to move it)")
      : e;
  }
  return { path, hash: hash.digest("hex"), cleanup };
}

/** The format given, else the file name's, else what the first bytes look like. */
function formatOf(path: string, file: string, format: Format | undefined): Format {
  const named = format ?? (file === "-" ? undefined : formatFromName(file));
  if (named) return named;
  const fd = openSync(path, "r");
  const head = Buffer.alloc(256);
  const n = readSync(fd, head, 0, 256, 0);
  closeSync(fd);
  return formatFromContent(head.subarray(0, n));
}

/** The input named `file` ("-": stdin), readable twice. */
export async function openBatchInput(
  file: string,
  streams: Pick<InputStreams, "stdin">,
  format: Format | undefined,
): Promise<OpenedInput> {
  let path = file;
  let cleanup = () => {};
  let identity: string;
  let fp: InputIds;
  if (file === "-") {
    // stdin is looked up only here: a batch from a file never makes the stream.
    const spooled = await spoolStdin(streams.stdin);
    path = spooled.path;
    cleanup = spooled.cleanup;
    identity = `stdin:${spooled.hash.slice(0, 32)}`;
    fp = { input: identity };
  } else {
    await regularFileSize(file, "batch input");
    identity = `file:${resolve(file)}`;
    fp = { input: await fingerprint(file), legacyInput: await legacyFingerprint(file) };
  }
  const input: BatchInput = {
    format: formatOf(path, file, format),
    open: () => createReadStream(path, { highWaterMark: 64 * 1024 }),
  };
  return { input, identity, fp, cleanup };
}
