/**
 * Local image references -> inline parts. A reference is a local file when
 * it is a relative path, an absolute path or a file: URL; anything with
 * another scheme (http:, https:, data:, cid:, ...) or a protocol-relative
 * //host is left alone.
 *
 * Safety: an HTML file piped into mailsend must never be able to mail
 * ~/.ssh/id_rsa to anyone. So a reference is embedded only when it resolves
 * inside the base directory, both as written (after percent-decoding, so
 * ..%2f is ..) and after following symlinks; and only when its bytes are an
 * image. Everything else is an error that names the reference.
 */
import { createHash } from "node:crypto";
import { open, realpath, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MailsendError } from "../core/errors.js";
import { formatSize } from "../core/size.js";
import { fileError, shownPath } from "../core/read.js";
import { describeBytes, sniffImage } from "./sniff.js";

/** Largest total of the images embedded in one message (bytes, before base64). */
export const MAX_INLINE_BYTES = 25 * 1024 * 1024;

export interface InlineImage {
  /** The Content-ID, without <>. */
  cid: string;
  /** A file name for clients that list inline parts (the file's own name). */
  filename: string;
  contentType: string;
  data: Buffer;
  /** The file it came from (after symlinks). */
  path: string;
}

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/** A file reference's path as the HTML means it, or undefined when it is not a local file. */
export function localPath(ref: string, what = "image"): string | undefined {
  if (ref === "" || ref.startsWith("#") || ref.startsWith("//")) return undefined;
  if (SCHEME.test(ref)) {
    if (!/^file:/i.test(ref)) return undefined;
    let url: URL;
    try {
      url = new URL(ref);
    } catch {
      throw refused(ref, "is not a valid file: URL", undefined, what);
    }
    if (url.hostname !== "" && url.hostname !== "localhost")
      throw refused(ref, `names another host (${url.hostname})`, undefined, what);
    try {
      return fileURLToPath(url);
    } catch (e) {
      throw refused(ref, `cannot be read as a file path (${(e as Error).message})`, undefined, what);
    }
  }
  // A relative URL: its query and fragment are not part of the file's name.
  const bare = ref.replace(/[?#].*$/s, "");
  let path: string;
  try {
    path = decodeURIComponent(bare);
  } catch {
    path = bare;
  }
  if (path.includes("\0")) throw refused(ref, "contains a NUL byte", undefined, what);
  return path;
}

/**
 * The document's `<base href>` (the first, as browsers take it), read against `dir`: a file: URL
 * or a relative path moves where relative references resolve; any other address makes them
 * addresses on that server, which a browser would fetch from there and a mail client too, so
 * they are no local files (`remote`), whatever exists here.
 */
export function documentBase(
  html: string,
  dir: string,
  findBase: (html: string) => string | undefined,
): { dir: string; remote: boolean } {
  if (!/<base[\s/>]/i.test(html)) return { dir, remote: false };
  const href = findBase(html)?.trim();
  if (!href) return { dir, remote: false };
  let url: URL;
  try {
    url = new URL(href, pathToFileURL(dir.endsWith(sep) ? dir : dir + sep));
  } catch {
    return { dir, remote: false };
  }
  // A data: or javascript: base is no base: the HTML standard falls back to the document's own address.
  if (url.protocol === "data:" || url.protocol === "javascript:") return { dir, remote: false };
  if (url.protocol !== "file:") return { dir, remote: true };
  if (url.hostname !== "" && url.hostname !== "localhost") return { dir, remote: true };
  const path = fileURLToPath(url);
  return { dir: url.pathname.endsWith("/") ? path : dirname(path), remote: false };
}

/** localPath, under a remote base: a reference without a scheme of its own is an address on that server. */
export function documentPath(ref: string, remoteBase: boolean, what = "image"): string | undefined {
  if (remoteBase && !SCHEME.test(ref)) return undefined;
  return localPath(ref, what);
}

function refused(ref: string, why: string, hint?: string, what = "image"): MailsendError {
  return new MailsendError("invalid_message", `${what} reference ${JSON.stringify(ref)} ${why}; nothing was sent`, {
    hint: hint ?? "Use a path inside the HTML file's directory, or --no-embed to leave the reference as it is.",
  });
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

const OUTSIDE_HINT = (baseDir: string) =>
  `Only files under ${shownPath(baseDir)} are embedded (the HTML file's directory, or the current directory for HTML from stdin or --html). Give --base-dir <dir> for a directory that covers it, or --no-embed to leave references as they are.`;

/**
 * Where a local reference points: relative to `fromDir` (the HTML file's
 * directory), checked to stay under baseDir (as written and through symlinks).
 */
export async function resolveInside(
  ref: string,
  path: string,
  baseDir: string,
  fromDir = baseDir,
  what = "image",
): Promise<string> {
  const base = resolve(baseDir);
  const target = resolve(fromDir, path);
  if (!inside(base, target)) {
    throw refused(
      ref,
      `resolves to ${shownPath(target)}, outside the base directory ${shownPath(base)}`,
      OUTSIDE_HINT(base),
      what,
    );
  }
  let real: string;
  try {
    real = await realpath(target);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") {
      throw new MailsendError(
        "file_not_found",
        `${what} ${JSON.stringify(ref)} not found: looked for ${shownPath(target)}; nothing was sent`,
        {
          cause: e,
          hint: "Check the path in the HTML (relative to the HTML file's directory, or to --base-dir), or give --no-embed to send the reference as it is.",
        },
      );
    }
    throw fileError(e, target, `${what} ${JSON.stringify(ref)}`);
  }
  let realBase: string;
  try {
    realBase = await realpath(base);
  } catch (e) {
    throw fileError(e, base, "base directory");
  }
  if (!inside(realBase, real)) {
    throw refused(
      ref,
      `is a symlink that leads outside the base directory ${shownPath(base)} (to ${shownPath(real)})`,
      OUTSIDE_HINT(base),
      what,
    );
  }
  // Before anything opens it: opening a FIFO waits for a writer that may never come; a directory is no file.
  let st;
  try {
    st = await stat(real);
  } catch (e) {
    throw fileError(e, real, `${what} ${JSON.stringify(ref)}`);
  }
  if (!st.isFile()) throw refused(ref, `is not a regular file (${shownPath(real)})`, undefined, what);
  return real;
}

/**
 * The Content-ID of an image: its name and a digest of its bytes, so the
 * same image gets the same id in every copy of a message (a retry, a batch
 * row) and two different images never share one.
 */
export function contentId(filename: string, data: Buffer): string {
  // No "%", "#" or "?": the src is a URL (RFC 2392), where cid:a%20b means "a b" and cid:a#b means "a": the part would not be found.
  const safe =
    filename
      .replace(/[^A-Za-z0-9!$&'*+\-/=^_`{|}~.]/g, "_")
      .replace(/\.{2,}/g, ".")
      .replace(/^\.+|\.+$/g, "") || "image";
  const digest = createHash("sha256").update(data).digest("hex").slice(0, 12);
  return `${safe.slice(0, 40)}.${digest}@mailsend`;
}

/**
 * Read an image file whole (it is base64-encoded into the message anyway),
 * refusing it before reading when it would take the message over `budget`.
 */
export async function readImage(
  ref: string,
  path: string,
  budget: number,
): Promise<{ data: Buffer; contentType: string }> {
  let data: Buffer;
  const handle = await open(path, "r").catch((e: unknown) => {
    throw fileError(e, path, `image ${JSON.stringify(ref)}`);
  });
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw refused(ref, `is not a regular file (${shownPath(path)})`);
    if (st.size > budget) {
      throw new MailsendError(
        "too_large",
        `image ${JSON.stringify(ref)} (${formatSize(st.size)}) takes the inline images over ${formatSize(MAX_INLINE_BYTES)}; nothing was sent`,
        {
          hint: "Link large images from a web server instead, attach them with --attach, or give --no-embed.",
        },
      );
    }
    data = await handle.readFile();
  } catch (e) {
    throw e instanceof MailsendError ? e : fileError(e, path, `image ${JSON.stringify(ref)}`);
  } finally {
    await handle.close();
  }
  const contentType = sniffImage(data);
  if (!contentType) {
    throw refused(
      ref,
      `is ${describeBytes(data)}, not an image (${shownPath(path)})`,
      "Only images are embedded (PNG, JPEG, GIF, WebP, BMP, AVIF, told by their bytes); give --no-embed to leave the reference as it is.",
    );
  }
  return { data, contentType };
}

/** For `--inline path[#cid]`: a path that exists as written wins, so a name with "#" still works. */
export function splitInlineSpec(spec: string, exists: (p: string) => boolean): { path: string; cid: string } {
  const hash = spec.lastIndexOf("#");
  if (hash > 0 && hash < spec.length - 1 && !exists(spec)) {
    return { path: spec.slice(0, hash), cid: spec.slice(hash + 1) };
  }
  return { path: spec, cid: basename(spec) };
}
