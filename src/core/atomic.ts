/**
 * Replacing a file whole: the data goes to a temp file beside it (or in `tmpDir`), which is then
 * renamed over it, so a reader sees the old file or the new one, never half of either. The temp
 * file is made anew (O_EXCL, no link followed) under a name nobody can guess, and given to the
 * directory's owner when root writes in another user's (src/core/owned.ts). A write that fails
 * removes its temp file and throws the file system's error, for the caller to word (localFileError).
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
// node:crypto only when a file is written: it is slow to load, and most commands write none.
const randomBytes = (n: number) => process.getBuiltinModule("node:crypto").randomBytes(n);
const { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } = process.getBuiltinModule("node:fs");
// fs/promises (and the streams behind it) only when an async write runs.
const fsp = () => process.getBuiltinModule("node:fs/promises");
import { basename, dirname, join } from "node:path";
import { dirOwner, openOwned } from "./owned.js";

export interface AtomicOptions {
  /** The new file's mode (0600 unless said). */
  mode?: number;
  /**
   * fsync the data before the rename and the directory after it, so the new file survives a
   * crash (the default). A cache or a hint that can be made again skips both.
   */
  durable?: boolean;
  /** Where the temp file goes (same file system as `path`); beside `path` unless said. */
  tmpDir?: string;
}

/** `<path>.<pid>.<random>.tmp` (in `tmpDir` when given): a crash's leftover names its process. */
export function tempName(path: string, tmpDir?: string): string {
  const name = `${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  return join(tmpDir ?? dirname(path), name);
}

/** What a platform that cannot fsync a directory says (the rename is atomic there all the same). */
const NO_DIR_SYNC = new Set(["EISDIR", "EPERM", "EACCES", "EINVAL", "ENOTSUP", "EOPNOTSUPP"]);

/** fsync a directory so that a file created or renamed in it survives a crash. */
export function fsyncDir(dir: string): void {
  let fd: number;
  try {
    fd = openSync(dir, "r");
  } catch (e) {
    if (NO_DIR_SYNC.has((e as NodeJS.ErrnoException).code ?? "")) return;
    throw e;
  }
  try {
    fsyncSync(fd);
  } catch (e) {
    if (!NO_DIR_SYNC.has((e as NodeJS.ErrnoException).code ?? "")) throw e;
  } finally {
    closeSync(fd);
  }
}

/** The async fsyncDir: for callers that sync one directory after several writes. */
export async function fsyncDirAsync(dir: string): Promise<void> {
  const fh = await fsp().open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function toBuffers(data: string | Buffer | readonly Buffer[]): readonly Buffer[] {
  return typeof data === "string" ? [Buffer.from(data)] : Buffer.isBuffer(data) ? [data] : data;
}

/** Replace `path` with `data` (see the top of this file); with `durable` (the default), on disk before it returns. */
export function writeFileAtomic(
  path: string,
  data: string | Buffer | readonly Buffer[],
  opts: AtomicOptions = {},
): void {
  const durable = opts.durable ?? true;
  const tmp = tempName(path, opts.tmpDir);
  try {
    const fd = openOwned(tmp, "new", opts.mode ?? 0o600);
    try {
      // A write may be short (the disk filling up): write the rest until it is all there or fails.
      for (const b of toBuffers(data)) for (let off = 0; off < b.length; ) off += writeSync(fd, b, off, b.length - off);
      if (durable) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {}
    throw e;
  }
  if (durable) fsyncDir(dirname(path));
}

export interface AtomicAsyncOptions extends AtomicOptions {
  /**
   * Waited for after the data is on disk and before the rename; its rejection is thrown as it is
   * (the temp file removed), so a check that ran beside the write can still keep the file out.
   */
  gate?: Promise<unknown>;
  /** Whether to fsync the directory after the rename (with `durable`); false where the caller syncs it once for several files. */
  syncDir?: boolean;
}

/** The async writeFileAtomic, off the main thread: for a server writing while it answers others. */
export async function writeFileAtomicAsync(
  path: string,
  data: string | Buffer | readonly Buffer[],
  opts: AtomicAsyncOptions = {},
): Promise<void> {
  const durable = opts.durable ?? true;
  const tmp = tempName(path, opts.tmpDir);
  // Awaited only once the data is written: a refusal before then is not left unhandled meanwhile.
  opts.gate?.catch(() => {});
  let fh;
  try {
    fh = await fsp().open(tmp, "wx", opts.mode ?? 0o600);
    const owner = dirOwner(dirname(path));
    if (owner) await fh.chown(owner.uid, owner.gid);
    for (const c of toBuffers(data)) {
      for (let off = 0; off < c.length; ) {
        const { bytesWritten } = await fh.write(c, off, c.length - off);
        if (bytesWritten <= 0) throw Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
        off += bytesWritten;
      }
    }
    if (durable) await fh.sync();
    await fh.close();
    fh = undefined;
    if (opts.gate) await opts.gate;
    await fsp().rename(tmp, path);
  } catch (e) {
    await fh?.close().catch(() => {});
    await fsp()
      .unlink(tmp)
      .catch(() => {});
    throw e;
  }
  if (durable && (opts.syncDir ?? true)) await fsyncDirAsync(dirname(path));
}
