/**
 * A lock file beside what it guards: one process at a time (a batch per journal, a sandbox per
 * data dir, a rate-limit state's update). It holds the holder's pid and, on Linux, its start time
 * ("<pid> <start>\n"), so a lock whose pid now belongs to another process (pids are soon reused in
 * a container, where every run is pid 1, or after a reboot with the state dir kept) is not taken
 * for a live holder's: core/pid.ts processHolds. A lock whose holder is gone is taken over.
 *
 * It is written to a temp file and link()ed into place, so nobody sees it without its content. A
 * lock with no holder to read (empty or cut short: a file system without hard links, a crash
 * between its create and its write, an older version's) is judged by its mtime: being written
 * while young, stale once older than `writingMs`.
 *
 * This process's locks are kept in HELD: a second lock on the same path in this process (two
 * sandboxes of the library's with one dir) is refused, and a lock holding this process's pid that
 * it did not take is a dead process's (a container's pid 1 of an earlier run).
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { closeSync, linkSync, openSync, readFileSync, rmSync, statSync, unlinkSync, writeSync } =
  process.getBuiltinModule("node:fs");
import { resolve } from "node:path";
import { writeFileAtomic } from "./atomic.js";
import { localFileError } from "./errors.js";
import { processHolds, processStartTime } from "./pid.js";

const HELD = new Set<string>();

export interface LockOptions {
  /** What the lock is, in a write error's words ("journal lock"): cannot write the journal lock ... */
  what: string;
  /** A lock older than this is stale whoever holds it (one held for well under a millisecond). Unset: held while its holder runs. */
  staleMs?: number;
  /** A lock with no holder to read is being written while younger than this (10 s unless said). */
  writingMs?: number;
  /** Give it back as this process exits (a lock held for a whole run). */
  releaseOnExit?: boolean;
  /** Test-only: called once the temp file is made, before anything is written to it. */
  beforeWrite?: () => void;
}

/** Who holds a lock that could not be taken. */
export interface Holder {
  /** Undefined: the lock is being written (no holder to read yet). */
  pid?: number;
  /** This process holds it. */
  here: boolean;
}

/** One attempt: the lock (and what gives it back), its live holder, or "try again" (it went, or was stale and was removed). */
export type Attempt = { release: () => void } | { holder: Holder } | { retry: "gone" | "broken" };

let line: string | undefined;

/** The lock's content for this process (read once: the rate-limit lock is taken per send). */
export function holderLine(): string {
  if (line === undefined) {
    const start = processStartTime();
    line = `${process.pid}${start !== undefined ? ` ${start}` : ""}\n`;
  }
  return line;
}

/** A lock's content read: "<pid> <start>\n" (or an older version's "<pid>\n" / "<pid> <ms since 1970>"); undefined when none can be read. */
export function parseHolder(text: string): { pid: number; start?: string; at?: number } | undefined {
  const m = /^(\d+)(?: (\d+))?\n/.exec(text);
  if (m) return { pid: Number(m[1]), ...(m[2] !== undefined ? { start: m[2] } : {}) };
  // The rate-limit lock of earlier versions: its pid and when it was taken, no newline.
  const old = /^(\d+) (\d+)$/.exec(text);
  return old ? { pid: Number(old[1]), at: Number(old[2]) } : undefined;
}

/** Whether the process a lock names runs: this process only if it took the lock at `key`. */
function holderRuns(h: { pid: number; start?: string }, key: string): boolean {
  if (h.pid <= 0 || !Number.isSafeInteger(h.pid)) return false;
  return h.pid === process.pid ? HELD.has(key) : processHolds(h.pid, h.start);
}

const NO_LINKS = ["EPERM", "ENOTSUP", "ENOSYS", "EOPNOTSUPP"];

/** Makes the lock with this process's content: throws EEXIST when one is there. */
function create(path: string, opts: LockOptions): void {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2, 8)}`;
  try {
    const fd = openSync(tmp, "wx", 0o600);
    try {
      opts.beforeWrite?.();
      writeSync(fd, holderLine());
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (e) {
      // A file system without hard links: an exclusive create, then the write (a crash between
      // the two leaves an empty lock, which its mtime lets the next process break).
      if (!NO_LINKS.includes((e as NodeJS.ErrnoException).code ?? "")) throw e;
      const fd = openSync(path, "wx", 0o600);
      try {
        writeSync(fd, holderLine());
      } finally {
        closeSync(fd);
      }
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {}
  }
}

/** Judges the lock that stands at `path`: its live holder, or removes it when stale. */
function judge(path: string, key: string, opts: LockOptions): Attempt {
  let text: string;
  let mtimeMs: number;
  try {
    text = readFileSync(path, "utf8");
    mtimeMs = statSync(path).mtimeMs;
  } catch {
    return { retry: "gone" };
  }
  const h = parseHolder(text);
  // In either direction, so a wall clock set back or forward cannot pin a lock.
  const age = Math.abs(Date.now() - (h?.at ?? mtimeMs));
  const tooOld = opts.staleMs !== undefined && age > opts.staleMs;
  if (!tooOld) {
    if (h && holderRuns(h, key)) return { holder: { pid: h.pid, here: h.pid === process.pid } };
    if (!h && age < (opts.writingMs ?? 10_000)) return { holder: { here: false } };
  }
  try {
    // Only the lock judged is removed: one another process took meanwhile is left to it.
    if (readFileSync(path, "utf8") === text && statSync(path).mtimeMs === mtimeMs) unlinkSync(path);
  } catch {}
  return { retry: "broken" };
}

/**
 * One attempt at the lock at `path`. A write error (a full disk, a read-only dir) is thrown as a
 * local file error naming `opts.what`.
 */
export function tryLock(path: string, opts: LockOptions): Attempt {
  const key = resolve(path);
  if (HELD.has(key)) return { holder: { pid: process.pid, here: true } };
  try {
    create(path, opts);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw localFileError(e, path, "write", opts.what);
    return judge(path, key, opts);
  }
  HELD.add(key);
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    HELD.delete(key);
    if (opts.releaseOnExit) process.off("exit", release);
    try {
      unlinkSync(path);
    } catch {}
  };
  if (opts.releaseOnExit) process.on("exit", release);
  return { release };
}

/**
 * The pid a holder file names (the outbox runner's runner.pid, beside a directory lock) and
 * whether that process runs: undefined when there is no readable pid. A pid alone (what a person's
 * `kill $(cat runner.pid)` needs) is judged by core/pid.ts processHolds's rule for it; this
 * process's own pid is taken to be its own.
 */
export function holderFileRuns(path: string): boolean | undefined {
  let h: ReturnType<typeof parseHolder>;
  try {
    h = parseHolder(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
  if (!h || !Number.isSafeInteger(h.pid) || h.pid <= 0) return undefined;
  return h.pid === process.pid || processHolds(h.pid, h.start);
}

/**
 * A lock held for a long time (the outbox runner's, for as long as it delivers): proper-lockfile's,
 * a directory made atomically whose mtime the holder refreshes every `updateMs`, so a holder killed
 * with -9 stops holding it within `staleMs`. The holder's pid goes in `holderFile` beside it (the
 * directory is removed with rmdir: nothing may go inside it), so that a fresh lock whose holder is
 * gone is not taken for a live one's (holderFileRuns).
 */
export interface RefreshedLockOptions {
  /** What it guards (proper-lockfile's file; with realpath off, only named). */
  guarded: string;
  lock: string;
  holderFile: string;
  staleMs: number;
  updateMs: number;
  /** The lock was taken from this holder (its refresh failed for longer than staleMs). */
  onCompromised: () => void;
}

/** One attempt: the lock and what gives it back, or whether the holder of the one in the way runs (undefined: no pid to read). */
export async function tryRefreshedLock(
  o: RefreshedLockOptions,
): Promise<{ release: () => Promise<void> } | { holderRuns: boolean | undefined }> {
  const { default: lockfile } = await import("proper-lockfile");
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(o.guarded, {
      lockfilePath: o.lock,
      realpath: false,
      stale: o.staleMs,
      update: o.updateMs,
      retries: 0,
      onCompromised: o.onCompromised,
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ELOCKED") throw e;
    return { holderRuns: holderFileRuns(o.holderFile) };
  }
  try {
    // The pid alone, one line: a person's `kill $(cat runner.pid)` too.
    writeFileAtomic(o.holderFile, `${process.pid}\n`, { durable: false });
  } catch {
    // Without it the lock counts as held (its holder unknown): still one holder.
  }
  return {
    release: async () => {
      // The pid goes first (if still ours): once the lock is released another holder may write its own.
      try {
        if (Number.parseInt(readFileSync(o.holderFile, "utf8"), 10) === process.pid)
          rmSync(o.holderFile, { force: true });
      } catch {}
      await release();
    },
  };
}

/**
 * Whether a refreshed lock is fresh: there, and refreshed within `staleMs` of `now`. One stat, by
 * proper-lockfile's own rule (its check()), so asking does not load the library.
 */
export function refreshedLockFresh(lock: string, staleMs: number, now = Date.now()): boolean {
  try {
    // proper-lockfile compares the mtime as a Date: whole milliseconds.
    return Math.trunc(statSync(lock).mtimeMs) >= now - staleMs;
  } catch {
    return false;
  }
}

/**
 * Removes a refreshed lock whose mtime is further ahead of the clock than a live holder's refresh
 * could put it (a dead holder's, the clock set back since: by the library's rule it would not be
 * stale until the clock passed it again); true when it did.
 */
export function removeFutureLock(lock: string, staleMs: number): boolean {
  try {
    if (statSync(lock).mtimeMs <= Date.now() + staleMs) return false;
    rmSync(lock, { recursive: true, force: true });
    return true;
  } catch {
    return false;
  }
}
