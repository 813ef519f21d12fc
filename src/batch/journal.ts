/**
 * The batch journal: one JSON line per state change of an item, fsynced
 * before the send it announces ("intended") and after the answer ("done",
 * "failed", "unknown"). After a crash it tells what was sent, what was not,
 * and what may have been: those are resent with the same idempotency key.
 *
 * Concurrent items share fsyncs (group commit): every record waits for the
 * fsync that covers it, and one fsync covers all lines written before it.
 */
import { createHash, randomUUID } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, readSync, renameSync, statSync, writeSync } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import { MailsendError } from "../core/errors.js";

export type ItemState =
  | { s: "intended"; k: string }
  | { s: "done"; k: string; id: string }
  | { s: "failed"; k: string; code: string; exit: number }
  | { s: "unknown"; k: string; code: string };

type Line = { i: number } & ItemState;

export interface Header {
  mailsend_journal: 1;
  batch: string;
  input: string | null;
  created: string;
}

/** Identity of a file input: size, mtime and a hash of its start. Stdin has none. */
export async function fingerprint(path: string | undefined): Promise<string | null> {
  if (!path || path === "-") return null;
  const st = await stat(path);
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(Math.min(st.size, 64 * 1024));
    const n = head.length ? readSync(fd, head, 0, head.length, 0) : 0;
    return createHash("sha256").update(`${st.size}:${Math.floor(st.mtimeMs)}:`).update(head.subarray(0, n)).digest("hex").slice(0, 32);
  } finally {
    closeSync(fd);
  }
}

export interface OpenOptions {
  path: string;
  input: string | null;
  /** Start over even when the journal has unfinished items. */
  fresh: boolean;
  /** --resume: a journal must exist. */
  resume: boolean;
}

const FINISHED_JOURNAL_TTL_MS = 24 * 3600 * 1000;

/** An earlier run's journal that a new batch took the place of (kept, renamed). */
export interface Replaced {
  /** --fresh; a finished run older than 24 h; a finished run of another input. */
  reason: "fresh" | "stale" | "input_changed";
  /** Where the old journal is now. */
  path: string;
  /** When the old run last wrote its journal: when it finished, for a finished one. */
  finishedAt: Date;
  /** Items that run sent. */
  sent: number;
}

/** What open() does with the journal at `path`, decided without touching it. */
export type Plan =
  | { action: "create" }
  | { action: "resume"; header: Header; states: Map<number, ItemState> }
  | { action: "replace"; reason: Replaced["reason"]; finishedAt: Date; sent: number }
  | { action: "refuse" };

export class Journal {
  readonly path: string;
  readonly batchId: string;
  /** Last known state of each item, from the journal as found. */
  readonly previous: ReadonlyMap<number, ItemState>;
  /** The earlier run's journal this new batch replaced, if it did. */
  replaced: Replaced | undefined;
  #fh: FileHandle | undefined;
  #queue: string[] = [];
  #waiters: Array<() => void> = [];
  #failed: ((e: Error) => void)[] = [];
  #flushing: Promise<void> | undefined;

  private constructor(path: string, batchId: string, previous: Map<number, ItemState>) {
    this.path = path;
    this.batchId = batchId;
    this.previous = previous;
  }

  /**
   * What open() would do, without changing anything: --check uses it to say
   * what a run would do with the journal.
   */
  static plan(opts: OpenOptions): Plan {
    const { path } = opts;
    if (!existsSync(path)) {
      if (opts.resume) throw new MailsendError("usage", `--resume: there is no journal at ${path}`, { hint: "Give the --journal of the run to resume." });
      return { action: "create" };
    }
    const { header, states } = Journal.read(path);
    const unfinished = [...states.values()].some((s) => s.s !== "done");
    const sameInput = header.input === opts.input || opts.input === null;
    // A finished run older than the service's 24 h idempotency window is history, not
    // something to resume: the same input tomorrow (a nightly job) is a new batch.
    const stale = !unfinished && Date.now() - Date.parse(header.created) > FINISHED_JOURNAL_TTL_MS;
    if (opts.fresh || stale || (!sameInput && !unfinished)) {
      const reason = opts.fresh ? "fresh" : stale ? "stale" : "input_changed";
      const sent = [...states.values()].filter((s) => s.s === "done").length;
      return { action: "replace", reason, finishedAt: statSync(path).mtime, sent };
    }
    return sameInput ? { action: "resume", header, states } : { action: "refuse" };
  }

  static async open(opts: OpenOptions): Promise<Journal> {
    const { path } = opts;
    const plan = Journal.plan(opts);
    if (plan.action === "create") return Journal.#create(path, opts.input);
    if (plan.action === "replace") {
      // Keep the old journal beside the new one rather than erase a record of sends.
      const old = `${path}.${Date.now()}.old`;
      renameSync(path, old);
      const j = await Journal.#create(path, opts.input);
      j.replaced = { reason: plan.reason, path: old, finishedAt: plan.finishedAt, sent: plan.sent };
      return j;
    }
    if (plan.action === "refuse") {
      throw new MailsendError("usage", `the journal ${path} belongs to a different input, and some of its items are unfinished`, {
        hint: "Resume with the original input, pass another --journal, or --fresh to start over (items in doubt may then be sent twice).",
      });
    }
    const j = new Journal(path, plan.header.batch, plan.states);
    j.#fh = await open(path, "a");
    return j;
  }

  static async #create(path: string, input: string | null): Promise<Journal> {
    const header: Header = { mailsend_journal: 1, batch: randomUUID(), input, created: new Date().toISOString() };
    const fd = openSync(path, "wx", 0o600);
    try {
      writeSync(fd, `${JSON.stringify(header)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const j = new Journal(path, header.batch, new Map());
    j.#fh = await open(path, "a");
    return j;
  }

  /** Parse a journal; a torn last line (a crash mid-write) is ignored. */
  static read(path: string): { header: Header; states: Map<number, ItemState> } {
    const lines = readFileSync(path, "utf8").split("\n");
    let header: Header;
    try {
      header = JSON.parse(lines[0] ?? "") as Header;
      if (header.mailsend_journal !== 1 || typeof header.batch !== "string") throw new Error("not a journal");
    } catch {
      throw new MailsendError("usage", `${path} is not a mailsend batch journal`, { hint: "Pass another --journal path." });
    }
    const states = new Map<number, ItemState>();
    for (const text of lines.slice(1)) {
      if (!text.trim()) continue;
      let line: Line;
      try {
        line = JSON.parse(text) as Line;
      } catch {
        continue;
      }
      const { i, ...state } = line;
      if (Number.isInteger(i)) states.set(i, state as ItemState);
    }
    return { header, states };
  }

  /** The idempotency key of item i: stable across runs of this journal. */
  keyFor(index: number): string {
    return `${this.batchId}-${index}`;
  }

  /** Append and wait until it is on disk. */
  record(index: number, state: ItemState): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push(`${JSON.stringify({ i: index, ...state })}\n`);
      this.#waiters.push(resolve);
      this.#failed.push(reject);
      this.#flushing ??= this.#flush();
    });
  }

  async #flush(): Promise<void> {
    // Let concurrent records of this tick join the same write and fsync.
    await new Promise((r) => setImmediate(r));
    while (this.#queue.length > 0) {
      const lines = this.#queue.splice(0);
      const waiters = this.#waiters.splice(0);
      const failed = this.#failed.splice(0);
      try {
        await this.#fh!.write(lines.join(""));
        await this.#fh!.sync();
        for (const w of waiters) w();
      } catch (e) {
        const err = new MailsendError("file_unreadable", `cannot write the journal ${this.path}: ${(e as Error).message}`, { cause: e });
        for (const f of failed) f(err);
      }
    }
    this.#flushing = undefined;
  }

  async close(): Promise<void> {
    await this.#flushing;
    await this.#fh?.close();
    this.#fh = undefined;
  }
}
