/**
 * The sliding log in a file shared by every mailsend process of one key on
 * this machine, updated under a lock file.
 *
 * The lock is core/lock.ts's: its holder's pid and start time, link()ed into
 * place so it is never seen without its content. A holder that crashed leaves
 * its lock behind: it is broken when its process is gone or it is older than
 * `staleMs` (in either direction, so a wall-clock jump cannot pin it); one
 * with no holder to read is judged by its mtime. The state is a log of changes appended
 * under the lock (see #read), rewritten whole by rename when it has grown.
 *
 * Not proper-lockfile: it judges staleness by an mtime it refreshes on a
 * timer (a directory lock, its own retries). This lock is held only while a
 * small file is read and appended to, so refreshing is moot, and loading it
 * would cost every `mailsend send` start-up time; the link() above gives the
 * property a plain lock file lacks (no lock without its content).
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { closeSync, ftruncateSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } =
  process.getBuiltinModule("node:fs");
import { openOwned } from "../core/owned.js";
import { writeFileAtomic } from "../core/atomic.js";
import { processAlive } from "../core/pid.js";
import { tryLock } from "../core/lock.js";
import { join } from "node:path";
import { localFileError, MailsendError } from "../core/errors.js";
import { ensurePrivateDir } from "./private-dir.js";
import {
  answeredAt,
  block,
  complete,
  EMPTY,
  release,
  tryTake,
  used,
  type Limits,
  type LogState,
  type SlotClass,
} from "./sliding-log.js";
import type { SlotStore, TakeOutcome } from "./store.js";

export interface FileStoreOptions {
  dir: string;
  /** The state dir `dir` is in: checked with it (src/core/trusted-dir.ts). */
  within?: string;
  /** Hash of the key: the key itself is never written anywhere. */
  keyHash: string;
  staleMs?: number;
  /** Give up on the lock after this long (a lock is held for well under a millisecond). */
  lockTimeoutMs?: number;
  now?: () => number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Test-only: MAILSEND_TEST_PAUSE=lock-write stops this process (synchronously,
 * like a crash would find it) after the lock's temp file was created and
 * before anything was written, so a test can kill -9 it there.
 */
function testPause(point: string): void {
  if (process.env.MAILSEND_TEST_PAUSE !== point) return;
  process.stderr.write(`mailsend-test: paused at ${point}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
}

/** The folded state, and how the file holding it looks (for the next write: append or rewrite). */
type Read = ({ damaged: false } | { damaged: true; why: string }) & {
  state: LogState;
  lines: number;
  bytes: number;
  clean: boolean;
};

function writeAll(fd: number, data: Buffer): void {
  for (let off = 0; off < data.length; ) off += writeSync(fd, data, off);
}

export class FileSlotStore implements SlotStore {
  readonly #file: string;
  readonly #lock: string;
  readonly #staleMs: number;
  readonly #lockTimeoutMs: number;
  readonly #now: () => number;
  #warnings: string[] = [];

  constructor(opts: FileStoreOptions) {
    ensurePrivateDir(opts.dir, "rate-limit state directory", opts.within);
    this.#file = join(opts.dir, `${opts.keyHash}.json`);
    this.#lock = `${this.#file}.lock`;
    this.#staleMs = opts.staleMs ?? 5_000;
    this.#lockTimeoutMs = opts.lockTimeoutMs ?? 15_000;
    this.#now = opts.now ?? Date.now;
    this.#sweep(opts.dir, `${opts.keyHash}.json.`);
  }

  /**
   * Temp files of a process killed mid-way (a lock attempt before its link,
   * a state write before its rename): small, but litter that would grow.
   */
  #sweep(dir: string, prefix: string): void {
    try {
      for (const name of readdirSync(dir)) {
        if (!name.startsWith(prefix)) continue;
        const m = /^(?:lock\.(\d+)\.\w+|(\d+)(?:\.\w+)?\.tmp)$/.exec(name.slice(prefix.length));
        const pid = Number(m?.[1] ?? m?.[2]);
        if (m && pid > 0 && pid !== process.pid && !processAlive(pid)) unlinkSync(join(dir, name));
      }
    } catch {}
  }

  get path(): string {
    return this.#file;
  }

  /** What the store found that the user should hear (a damaged state file), once each. */
  takeWarnings(): string[] {
    return this.#warnings.splice(0);
  }

  /** What gives the lock back, or undefined while another holds it (a stale one is broken here, for the next try). */
  #tryLock(): (() => void) | undefined {
    const a = tryLock(this.#lock, {
      what: "rate-limit lock",
      staleMs: this.#staleMs,
      writingMs: this.#staleMs,
      beforeWrite: () => testPause("lock-write"),
    });
    return "release" in a ? a.release : undefined;
  }

  /**
   * The state file is a log: a snapshot line, then one line per change
   * (appended under the lock, so a slot costs one small write rather than a
   * rewrite of the whole log), folded here in order. A last line without its
   * newline was torn by a crash: that change never happened (its process
   * died before it could send), and the next write rewrites the file without it.
   */
  #read(): Read {
    let text: string;
    try {
      text = readFileSync(this.#file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT")
        return { state: EMPTY, damaged: false, lines: 0, bytes: 0, clean: false };
      throw localFileError(e, this.#file, "read", "rate-limit state");
    }
    const bytes = Buffer.byteLength(text);
    const lines = text.split("\n");
    const last = lines.pop()!;
    // The single-object file of earlier versions (no newline): a snapshot to rewrite as a log.
    if (lines.length === 0 && last !== "") lines.push(last);
    const clean = last === "" && lines.length > 0;
    try {
      const head = JSON.parse(lines[0] ?? "") as Partial<LogState>;
      if (!head || typeof head !== "object" || !Array.isArray(head.entries)) throw new Error("not a rate-limit state");
      const byId = new Map<string, number>();
      for (const e of head.entries) if (e && typeof e.t === "number" && typeof e.id === "string") byId.set(e.id, e.t);
      let blockedUntil = typeof head.blockedUntil === "number" ? head.blockedUntil : 0;
      for (let n = 1; n < lines.length; n++) {
        const op = JSON.parse(lines[n]!) as { take?: string; done?: string; free?: string; t?: number; block?: number };
        if (typeof op.take === "string" && typeof op.t === "number") byId.set(op.take, op.t);
        else if (typeof op.done === "string" && typeof op.t === "number") {
          if (byId.has(op.done)) byId.set(op.done, op.t);
        } else if (typeof op.free === "string") byId.delete(op.free);
        else if (typeof op.block === "number") blockedUntil = op.block;
        else throw new Error(`line ${n + 1} is not a change of the log`);
      }
      const entries = [...byId].map(([id, t]) => ({ id, t }));
      return { state: { entries, blockedUntil }, damaged: false, lines: lines.length, bytes, clean };
    } catch (e) {
      return {
        state: EMPTY,
        damaged: true,
        why: text.length === 0 ? "it is empty" : (e as Error).message,
        lines: 0,
        bytes: 0,
        clean: false,
      };
    }
  }

  /** The whole state as a new file (temp + rename): the first write, a compaction, or after a torn line. */
  #rewrite(state: LogState): void {
    try {
      // Made anew, and given to the directory's owner when root writes in another user's state dir.
      writeFileAtomic(this.#file, `${JSON.stringify(state)}\n`, { durable: false });
    } catch (e) {
      throw localFileError(e, this.#file, "write", "rate-limit state");
    }
  }

  /** The changes from `before` to `after` as log lines. */
  static changes(before: LogState, after: LogState): string[] {
    const out: string[] = [];
    const old = new Map(before.entries.map((e) => [e.id, e.t]));
    const kept = new Set<string>();
    for (const e of after.entries) {
      kept.add(e.id);
      const t = old.get(e.id);
      if (t === undefined) out.push(JSON.stringify({ take: e.id, t: e.t }));
      else if (t !== e.t) out.push(JSON.stringify({ done: e.id, t: e.t }));
    }
    // Also those that left the window: a wall clock set back would bring them into it again.
    for (const id of old.keys()) if (!kept.has(id)) out.push(JSON.stringify({ free: id }));
    if (after.blockedUntil !== before.blockedUntil) out.push(JSON.stringify({ block: after.blockedUntil }));
    return out;
  }

  #write(read: Read, state: LogState): void {
    const lines = FileSlotStore.changes(read.state, state);
    if (read.clean && lines.length === 0) return;
    // Append while the log is short; rewrite it (pruned) once it has grown, or when it is not clean.
    // (The changes read back cost about what a snapshot of the state would, at most.)
    if (!read.clean || read.lines + lines.length > 32 + 2 * state.entries.length) {
      this.#rewrite(state);
      return;
    }
    let fd: number | undefined;
    try {
      fd = openOwned(this.#file, "append");
      writeAll(fd, Buffer.from(`${lines.join("\n")}\n`));
    } catch (e) {
      // A full disk that took part of the lines: cut them back, so no torn change is left.
      try {
        if (fd !== undefined) ftruncateSync(fd, read.bytes);
      } catch {}
      throw localFileError(e, this.#file, "write", "rate-limit state");
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  async #update<T>(limits: Limits, fn: (state: LogState, now: number) => { state: LogState; result: T }): Promise<T> {
    const deadline = this.#now() + this.#lockTimeoutMs;
    let spins = 0;
    let unlock: (() => void) | undefined;
    while (!(unlock = this.#tryLock())) {
      if (this.#now() > deadline || spins++ > 100_000) {
        throw new MailsendError(
          "temporary_failure",
          `the rate-limit state ${this.#file} stayed locked for ${this.#lockTimeoutMs / 1000} s`,
          {
            hint: `If no other mailsend is running, remove ${this.#lock}.`,
          },
        );
      }
      await sleep(1 + Math.random() * 4);
    }
    try {
      const now = this.#now();
      const read = this.#read();
      let state = read.state;
      if (read.damaged) {
        // What was sent in the last window is unknown: count it as full, so the
        // provider's limit is never exceeded, and write a good file (the damaged
        // one is kept beside it for a look).
        const kept = `${this.#file}.damaged-${now}`;
        try {
          renameSync(this.#file, kept);
        } catch {}
        state = block(EMPTY, now + limits.windowMs);
        this.#warnings.push(
          `the rate-limit state ${this.#file} was damaged (${read.why}); it is kept as ${kept} and the last ${Math.round(limits.windowMs / 1000)} s are counted as full, so sends wait until that window has passed. Nothing else to do; if it happens again, check the disk.`,
        );
      }
      const r = fn(state, now);
      if (read.damaged) this.#rewrite(r.state);
      else this.#write(read, r.state);
      return r.result;
    } finally {
      unlock();
    }
  }

  async tryTake(id: string, limits: Limits, cls: SlotClass = "urgent"): Promise<TakeOutcome> {
    let decided = 0;
    const r = await this.#update(limits, (s, now) => {
      decided = now;
      const r = tryTake(s, now, limits, id, cls);
      return { state: r.state, result: r.ok ? { ok: true as const } : { ok: false as const, waitMs: r.waitMs } };
    });
    // The wait counts from the decision, not from after the write and the unlock (a loaded machine
    // can take milliseconds over those): the waiter wakes as the slot frees, not that much later.
    return r.ok ? r : { ok: false, waitMs: Math.max(1, r.waitMs - Math.max(0, this.#now() - decided)) };
  }

  complete(id: string, limits: Limits, elapsedMs?: () => number): Promise<void> {
    return this.#update(limits, (s) => ({
      state: complete(s, answeredAt(this.#now, elapsedMs), id),
      result: undefined,
    }));
  }

  release(id: string, limits: Limits): Promise<void> {
    return this.#update(limits, (s) => ({ state: release(s, id), result: undefined }));
  }

  block(waitMs: number, limits: Limits): Promise<void> {
    return this.#update(limits, (s, now) => ({ state: block(s, now + waitMs), result: undefined }));
  }

  used(limits: Limits): Promise<number> {
    return this.#update(limits, (s, now) => ({ state: s, result: used(s, now, limits) }));
  }

  async close(): Promise<void> {}
}
