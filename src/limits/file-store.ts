/**
 * The sliding log in a file shared by every mailsend process of one key on
 * this machine, updated under a lock file.
 *
 * The lock is a file created with O_EXCL holding "pid time". A holder that
 * crashed leaves it behind: it is broken when its process is gone or it is
 * older than `staleMs` (in either direction, so a wall-clock jump cannot pin
 * it). The state is replaced by rename, so a crash mid-write never leaves a
 * torn file.
 */
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { processAlive } from "../core/pid.js";
import { join } from "node:path";
import { MailsendError } from "../core/errors.js";
import { block, complete, EMPTY, release, tryTake, used, type Limits, type LogState } from "./sliding-log.js";
import type { SlotStore, TakeOutcome } from "./store.js";

export interface FileStoreOptions {
  dir: string;
  /** Hash of the key: the key itself is never written anywhere. */
  keyHash: string;
  staleMs?: number;
  /** Give up on the lock after this long (a lock is held for well under a millisecond). */
  lockTimeoutMs?: number;
  now?: () => number;
}


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FileSlotStore implements SlotStore {
  readonly #file: string;
  readonly #lock: string;
  readonly #staleMs: number;
  readonly #lockTimeoutMs: number;
  readonly #now: () => number;

  constructor(opts: FileStoreOptions) {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    this.#file = join(opts.dir, `${opts.keyHash}.json`);
    this.#lock = `${this.#file}.lock`;
    this.#staleMs = opts.staleMs ?? 5_000;
    this.#lockTimeoutMs = opts.lockTimeoutMs ?? 15_000;
    this.#now = opts.now ?? Date.now;
  }

  get path(): string {
    return this.#file;
  }

  #tryLock(): boolean {
    try {
      const fd = openSync(this.#lock, "wx", 0o600);
      writeSync(fd, `${process.pid} ${this.#now()}`);
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
        throw new MailsendError("config_invalid", `cannot create the rate-limit lock ${this.#lock}: ${(e as Error).message}`, {
          hint: "Check that MAILSEND_STATE_DIR (or the default state dir) is writable.",
        });
      }
      this.#breakIfStale();
      return false;
    }
  }

  #breakIfStale(): void {
    let text: string;
    try {
      text = readFileSync(this.#lock, "utf8");
    } catch {
      return; // released meanwhile
    }
    const [pidText, atText] = text.split(" ");
    const pid = Number(pidText);
    const at = Number(atText);
    // A lock written but not yet filled in reads as empty: give it time.
    const age = Number.isFinite(at) && at > 0 ? Math.abs(this.#now() - at) : 0;
    const dead = Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processAlive(pid);
    if (dead || age > this.#staleMs) {
      try {
        // Only break the lock we judged: if it changed meanwhile, leave it.
        if (readFileSync(this.#lock, "utf8") === text) unlinkSync(this.#lock);
      } catch {}
    }
  }

  #read(): LogState {
    try {
      const data = JSON.parse(readFileSync(this.#file, "utf8")) as Partial<LogState>;
      const entries = Array.isArray(data.entries)
        ? data.entries.filter((e) => e && typeof e.t === "number" && typeof e.id === "string")
        : [];
      return { entries, blockedUntil: typeof data.blockedUntil === "number" ? data.blockedUntil : 0 };
    } catch {
      return EMPTY;
    }
  }

  #write(state: LogState): void {
    const tmp = `${this.#file}.${process.pid}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, JSON.stringify(state));
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.#file);
  }

  async #update<T>(fn: (state: LogState, now: number) => { state: LogState; result: T }): Promise<T> {
    const deadline = this.#now() + this.#lockTimeoutMs;
    let spins = 0;
    while (!this.#tryLock()) {
      if (this.#now() > deadline || spins++ > 100_000) {
        throw new MailsendError("temporary_failure", `the rate-limit state ${this.#file} stayed locked for ${this.#lockTimeoutMs / 1000} s`, {
          hint: `If no other mailsend is running, remove ${this.#lock}.`,
        });
      }
      await sleep(1 + Math.random() * 4);
    }
    try {
      const { state, result } = fn(this.#read(), this.#now());
      this.#write(state);
      return result;
    } finally {
      try {
        unlinkSync(this.#lock);
      } catch {}
    }
  }

  tryTake(id: string, limits: Limits): Promise<TakeOutcome> {
    return this.#update((s, now) => {
      const r = tryTake(s, now, limits, id);
      return { state: r.state, result: r.ok ? { ok: true as const } : { ok: false as const, waitMs: r.waitMs } };
    });
  }

  complete(id: string): Promise<void> {
    return this.#update((s, now) => ({ state: complete(s, now, id), result: undefined }));
  }

  release(id: string): Promise<void> {
    return this.#update((s) => ({ state: release(s, id), result: undefined }));
  }

  block(waitMs: number): Promise<void> {
    return this.#update((s, now) => ({ state: block(s, now + waitMs), result: undefined }));
  }

  used(limits: Limits): Promise<number> {
    return this.#update((s, now) => ({ state: s, result: used(s, now, limits) }));
  }

  async close(): Promise<void> {}
}
