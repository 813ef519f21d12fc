/**
 * The batch journal: one JSON line per state change of an item: written
 * before the send it announces ("intended") and fsynced after the answer
 * ("done", "failed", "unknown"). After a crash it tells what was sent, what
 * was not, and what may have been: those are resent with the same
 * idempotency key.
 *
 * An "intended" line is in the file (the page cache: a process killed with
 * kill -9 leaves it there) before its send, and is fsynced with the next
 * group, but the send does not wait for that fsync (against a near service it
 * would be most of a batch item's time). Nothing rests on it being
 * durable: an item's key comes from the journal's batch id (fsynced with the
 * header before any send) and its index, and a re-run sends every item
 * without a "done" line the same way, with that key, whether an "intended"
 * line survived or not. A write that fails (a full disk) still stops the send.
 *
 * Concurrent items share fsyncs (group commit): every record waits for the
 * fsync that covers it, and one fsync covers all lines written before it.
 * The lines are appended with one plain write (a page-cache copy, not worth a
 * round trip through the thread pool) and made durable with fdatasync, off the
 * main thread; records made while one is running join the next.
 */
import { createHash, randomUUID } from "node:crypto";
import {
  close,
  closeSync,
  constants,
  createReadStream,
  existsSync,
  lstatSync,
  fdatasync,
  fstatSync,
  fsync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { stat } from "node:fs/promises";
import { localFileError, MailsendError } from "../core/errors.js";
import { tryLock } from "../core/lock.js";

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

/**
 * Identity of a file input: its size and a hash of its whole content. Not its mtime: a file
 * saved again unchanged (a spreadsheet's Ctrl-S, touch, a copy, a checkout) is the same batch,
 * and a re-run must skip what was sent rather than take it for a new batch that sends every row.
 * Stdin has none.
 */
export async function fingerprint(path: string | undefined): Promise<string | null> {
  if (!path || path === "-") return null;
  const st = await stat(path);
  const hash = createHash("sha256").update(`${st.size}:`);
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) hash.update(chunk as Buffer);
  return `c${hash.digest("hex").slice(0, 31)}`;
}

/** The identity earlier versions gave a file input (size, mtime, a hash of its first 64 KiB): their journals are still this input's. */
export async function legacyFingerprint(path: string | undefined): Promise<string | null> {
  if (!path || path === "-") return null;
  const st = await stat(path);
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(Math.min(st.size, 64 * 1024));
    const n = head.length ? readSync(fd, head, 0, head.length, 0) : 0;
    return createHash("sha256")
      .update(`${st.size}:${Math.floor(st.mtimeMs)}:`)
      .update(head.subarray(0, n))
      .digest("hex")
      .slice(0, 32);
  } finally {
    closeSync(fd);
  }
}

export interface OpenOptions {
  path: string;
  input: string | null;
  /** The input's identity as an earlier version wrote it (legacyFingerprint): a journal with it is this input's too. */
  legacyInput?: string | null;
  /** Start over even when the journal has unfinished items. */
  fresh: boolean;
  /** --resume: a journal must exist. */
  resume: boolean;
}

const FINISHED_JOURNAL_TTL_MS = 24 * 3600 * 1000;

/** An earlier run's journal that a new batch took the place of (kept, renamed). */
export interface Replaced {
  /** --fresh; --fresh over a damaged journal; a finished run older than 24 h; a finished run of another input. */
  reason: "fresh" | "damaged" | "stale" | "input_changed";
  /** Where the old journal is now. */
  path: string;
  /** When the old run last wrote its journal: when it finished, for a finished one. */
  finishedAt: Date;
  /** Items that run sent (as far as its journal could tell, for a damaged one). */
  sent: number;
  /** For "damaged": the first line that could not be read. */
  damagedLine?: number;
}

/** What read() found: the records, and whether a crash tore the last line or something damaged one before it. */
export interface ReadJournal {
  header: Header;
  states: Map<number, ItemState>;
  /** Bytes of whole lines: a torn last line (a crash mid-write) starts here, and is cut before appending. */
  wholeBytes: number;
  torn: boolean;
  /** The first line (1-based) that is not a record although a whole line: the journal cannot be trusted. */
  damagedLine?: number;
}

/** What open() does with the journal at `path`, decided without touching it. */
export type Plan =
  /** `over`: the file there is a journal cut short before its header line was whole (nothing in it). */
  | { action: "create"; over?: true }
  | { action: "resume"; header: Header; states: Map<number, ItemState> }
  | { action: "replace"; reason: Replaced["reason"]; finishedAt: Date; sent: number; damagedLine?: number }
  | { action: "refuse" };

/** JSON.stringify({ i, ...state }) and a newline, written out: two records per item of a batch. */
function lineOf(i: number, state: ItemState): string {
  const k = JSON.stringify(state.k);
  switch (state.s) {
    case "intended":
      return `{"i":${i},"s":"intended","k":${k}}\n`;
    case "done":
      if (typeof state.id === "string") return `{"i":${i},"s":"done","k":${k},"id":${JSON.stringify(state.id)}}\n`;
      return `${JSON.stringify({ i, ...state })}\n`;
    default:
      return `${JSON.stringify({ i, ...state })}\n`;
  }
}

export class Journal {
  readonly path: string;
  readonly batchId: string;
  /** Last known state of each item, from the journal as found. */
  readonly previous: ReadonlyMap<number, ItemState>;
  /** The earlier run's journal this new batch replaced, if it did. */
  replaced: Replaced | undefined;
  #fd: number | undefined;
  /** Bytes of whole records: where a failed write is cut back to. */
  #size = 0;
  #queue: string[] = [];
  /** The records in #queue wait for this: one promise for all that the next write and fdatasync cover. */
  #group:
    | {
        promise: Promise<void>;
        resolve: () => void;
        reject: (e: Error) => void;
        written?: { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void };
      }
    | undefined;
  #flushing: Promise<void> | undefined;
  /** A new journal's header fsync, started by #create. */
  #headerSynced: Promise<void> | undefined;
  /** Gives up the run's lock on the journal. */
  #unlock: (() => void) | undefined;

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
      if (opts.resume)
        throw new MailsendError("usage", (s) => `${s.flag("resume")}: there is no journal at ${path}`, {
          hint: (s) => `Give the ${s.flag("journal")} of the run to resume.`,
        });
      return { action: "create" };
    }
    // A run that died (or hit a full disk) while writing the header left a file that records
    // nothing: no record is written before the header is whole. It is made again.
    if (Journal.#headerless(path)) return { action: "create", over: true };
    const { header, states, damagedLine } = Journal.read(path, { fresh: opts.fresh });
    if (damagedLine !== undefined) {
      const sent = [...states.values()].filter((s) => s.s === "done").length;
      if (opts.fresh)
        return { action: "replace", reason: "damaged", finishedAt: statSync(path).mtime, sent, damagedLine };
      throw new MailsendError(
        "local_io_failed",
        `the journal ${path} is damaged at line ${damagedLine}: it cannot tell which items were sent`,
        {
          hint: (s) =>
            `${s.flag("fresh")} starts over: it moves the damaged journal aside and sends EVERY item again, also those already sent (${sent} are recorded as sent before the damage). To see which went out, look at the earlier run's results file, or the lines with "s":"done" in ${path}. To send only the rest, make an input of the items not yet sent.`,
        },
      );
    }
    const unfinished = [...states.values()].some((s) => s.s !== "done");
    const sameInput =
      header.input === opts.input || opts.input === null || (!!opts.legacyInput && header.input === opts.legacyInput);
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

  /**
   * Open the journal for one run, which holds `<journal>.lock` (its pid) until close(): a second
   * batch with the same journal (two cron runs that overlap, two started at once) is refused
   * while the first runs. Without it, both could decide to start a new batch (changed input, a
   * day-old journal) with their own keys, and every row would be sent twice.
   */
  static async open(opts: OpenOptions): Promise<Journal> {
    const unlock = lockJournal(opts.path);
    try {
      const j = await Journal.#openLocked(opts);
      j.#unlock = unlock;
      return j;
    } catch (e) {
      unlock();
      throw e;
    }
  }

  static async #openLocked(opts: OpenOptions): Promise<Journal> {
    const { path } = opts;
    const plan = Journal.plan(opts);
    if (plan.action === "create") {
      if (plan.over) {
        try {
          unlinkSync(path);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw localFileError(e, path, "write", "journal");
        }
      }
      return Journal.#create(path, opts.input);
    }
    if (plan.action === "replace") {
      // Keep the old journal beside the new one rather than erase a record of sends.
      const old = `${path}.${Date.now()}.${plan.reason === "damaged" ? "damaged" : "old"}`;
      try {
        renameSync(path, old);
      } catch (e) {
        throw localFileError(e, path, "write", "journal");
      }
      const j = await Journal.#create(path, opts.input);
      j.replaced = {
        reason: plan.reason,
        path: old,
        finishedAt: plan.finishedAt,
        sent: plan.sent,
        ...(plan.damagedLine !== undefined ? { damagedLine: plan.damagedLine } : {}),
      };
      return j;
    }
    if (plan.action === "refuse") {
      throw new MailsendError(
        "usage",
        `the journal ${path} belongs to a different input, and some of its items are unfinished`,
        {
          hint: (s) =>
            `Resume with the original input, pass another ${s.flag("journal")}, or ${s.flag("fresh")} to start over (items in doubt may then be sent twice).`,
        },
      );
    }
    const j = new Journal(path, plan.header.batch, plan.states);
    try {
      // A line torn by a crash is cut off first: the next record must not be appended onto it.
      const { torn, wholeBytes } = Journal.read(path);
      if (torn) truncateSync(path, wholeBytes);
      j.#fd = openSync(path, "a");
      j.#size = fstatSync(j.#fd).size;
    } catch (e) {
      throw localFileError(e, path, "write", "journal");
    }
    return j;
  }

  static async #create(path: string, input: string | null): Promise<Journal> {
    const header: Header = { mailsend_journal: 1, batch: randomUUID(), input, created: new Date().toISOString() };
    const j = new Journal(path, header.batch, new Map());
    let fd: number | undefined;
    try {
      fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND, 0o600);
      const line = Buffer.from(`${JSON.stringify(header)}\n`);
      for (let off = 0; off < line.length; ) off += writeSync(fd, line, off);
      j.#size = line.length;
    } catch (e) {
      if (fd !== undefined) {
        closeSync(fd);
        // Ours (O_EXCL) and without a whole header: it records nothing, and must not stand in the
        // way of the next run (a full disk: "free space, then run again").
        try {
          unlinkSync(path);
        } catch {}
      }
      throw localFileError(e, path, "write", "journal");
    }
    j.#fd = fd;
    // The header's fsync (slow for a new file on a plain disk) runs while the batch validates its
    // input; no record is written before it has finished (#flush), and durable() says how it went.
    const synced = new Promise<void>((resolve, reject) =>
      fsync(fd, (e) => (e ? reject(localFileError(e, path, "sync", "journal")) : resolve())),
    );
    synced.catch(() => {});
    j.#headerSynced = synced;
    return j;
  }

  /**
   * Resolves once everything the journal holds so far is on disk (the header
   * of a new journal is synced in the background); rejects, as a local file
   * error, when that failed. The runner waits for it before the first send.
   */
  durable(): Promise<void> {
    return this.#headerSynced ?? Promise.resolve();
  }

  /** A file with no whole line that is the start of a journal's header (or empty): a header cut short. */
  static #headerless(path: string): boolean {
    let buf: Buffer;
    try {
      // Only a regular file of our own making is ever made again: never a device (--journal
      // /dev/null, run as root, must not replace /dev/null), a pipe, or a link to something else.
      if (!lstatSync(path).isFile()) return false;
      buf = readFileSync(path);
    } catch {
      return false;
    }
    if (buf.length > 64 * 1024 || buf.includes(0x0a)) return false;
    const text = buf.toString("latin1");
    const start = '{"mailsend_journal":';
    return start.startsWith(text) || text.startsWith(start);
  }

  /**
   * Parse a journal. A torn last line (a crash mid-write: no newline after
   * it) is not a record; a whole line before it that is not one is damage.
   * With `fresh`, a journal whose header was damaged is read as one with no
   * records (to be moved aside); a file that is not a journal at all never is.
   */
  static read(path: string, opts: { fresh?: boolean } = {}): ReadJournal {
    let buf: Buffer;
    try {
      buf = readFileSync(path);
    } catch (e) {
      throw localFileError(e, path, "read", "journal");
    }
    const wholeBytes = buf.lastIndexOf(0x0a) + 1;
    const torn = wholeBytes < buf.length;
    const lines = buf.subarray(0, wholeBytes).toString("utf8").split("\n");
    lines.pop(); // after the last newline
    let header: Header;
    try {
      header = JSON.parse(lines[0] ?? "") as Header;
      if (header.mailsend_journal !== 1 || typeof header.batch !== "string") throw new Error("not a journal");
    } catch {
      const ours = buf.subarray(0, 32).toString("latin1").startsWith('{"mailsend_journal"');
      if (ours && opts.fresh)
        return {
          header: { mailsend_journal: 1, batch: "", input: null, created: "" },
          states: new Map(),
          wholeBytes,
          torn,
          damagedLine: 1,
        };
      throw new MailsendError(
        ours ? "local_io_failed" : "usage",
        ours
          ? `the journal ${path} is damaged at line 1: it cannot tell which items were sent`
          : `${path} is not a mailsend batch journal`,
        {
          hint: ours
            ? (s) =>
                `${s.flag("fresh")} starts over: it moves the damaged journal aside and sends EVERY item again, also those already sent. To see which went out, look at the earlier run's results file.`
            : (s) => `Pass another ${s.flag("journal")} path.`,
        },
      );
    }
    const states = new Map<number, ItemState>();
    let damagedLine: number | undefined;
    lines.forEach((text, n) => {
      if (n === 0 || !text.trim()) return;
      let line: Line | undefined;
      try {
        line = JSON.parse(text) as Line;
      } catch {}
      if (!line || typeof line !== "object" || !Number.isInteger(line.i) || typeof line.s !== "string") {
        damagedLine ??= n + 1;
        return;
      }
      const { i, ...state } = line;
      states.set(i, state as ItemState);
    });
    return { header, states, wholeBytes, torn, ...(damagedLine !== undefined ? { damagedLine } : {}) };
  }

  /** The idempotency key of item i: stable across runs of this journal. */
  keyFor(index: number): string {
    return `${this.batchId}-${index}`;
  }

  /**
   * Append and wait until it is on disk; with `until: "written"`, until it is in the file (before
   * its fsync: see the top of this file for "intended").
   */
  record(index: number, state: ItemState, until: "durable" | "written" = "durable"): Promise<void> {
    this.#queue.push(lineOf(index, state));
    let group = this.#group;
    if (!group) {
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      // A group whose records all wait only for the write: its fsync's failure is nobody's to
      // handle there (the next record's group meets the disk's fault).
      promise.catch(() => {});
      group = this.#group = { promise, resolve, reject };
    }
    this.#flushing ??= this.#flush();
    if (until === "durable") return group.promise;
    if (!group.written) {
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      group.written = { promise, resolve, reject };
    }
    return group.written.promise;
  }

  async #flush(): Promise<void> {
    // Let concurrent records of this tick join the same write and fsync.
    await new Promise((r) => setImmediate(r));
    // No record before the header is on disk (a failed header sync fails the records too).
    if (this.#headerSynced) {
      try {
        await this.#headerSynced;
      } catch (e) {
        this.#flushing = undefined;
        const group = this.#group!;
        this.#group = undefined;
        this.#queue = [];
        group.reject(e as Error);
        group.written?.reject(e as Error);
        return;
      }
    }
    while (this.#queue.length > 0) {
      const lines = this.#queue;
      this.#queue = [];
      const group = this.#group!;
      this.#group = undefined;
      try {
        const data = Buffer.from(lines.join(""));
        const fd = this.#fd!;
        try {
          // A full disk takes part of a write before it refuses the rest: loop until the
          // error, then cut the part back, so no torn line is left for the next record to follow.
          for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off);
          group.written?.resolve();
          // The data and the file's new length: what a reader after a crash needs.
          await new Promise<void>((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
        } catch (e) {
          try {
            ftruncateSync(fd, this.#size);
          } catch {}
          throw e;
        }
        this.#size += data.length;
        group.resolve();
      } catch (e) {
        const err = localFileError(e, this.path, "write", "journal");
        group.reject(err);
        group.written?.reject(err);
      }
    }
    this.#flushing = undefined;
  }

  async close(): Promise<void> {
    try {
      await this.#flushing;
      const fd = this.#fd;
      this.#fd = undefined;
      if (fd !== undefined) await new Promise<void>((resolve, reject) => close(fd, (e) => (e ? reject(e) : resolve())));
    } finally {
      this.#unlock?.();
      this.#unlock = undefined;
    }
  }
}

/**
 * Takes `<journal>.lock` (core/lock.ts: this process's pid and start time) and returns what gives
 * it back (also done as the process exits). A lock whose process is gone (a run killed with -9, its
 * pid free or another process's now) is taken over; one still being written is honoured.
 */
function lockJournal(path: string): () => void {
  const lock = `${path}.lock`;
  let broken = 0;
  for (let attempt = 0; ; attempt++) {
    if (attempt > 20)
      throw new MailsendError(
        "temporary_failure",
        `the journal lock ${lock} keeps changing; another batch is starting with the journal ${path}`,
        { hint: "Run one batch at a time with one journal." },
      );
    const a = tryLock(lock, { what: "journal lock", releaseOnExit: true });
    if ("release" in a) return a.release;
    // A stale lock that keeps coming back: some other run keeps leaving it, and this one stops.
    if ("retry" in a && (a.retry === "gone" || ++broken <= 3)) continue;
    const pid = "holder" in a ? a.holder.pid : undefined;
    throw new MailsendError(
      "temporary_failure",
      `another batch${pid !== undefined ? ` (pid ${pid})` : ""} is running with the journal ${path}; nothing was sent by this one`,
      {
        hint: `Wait for it to finish, then run this again: it resumes or skips what the other sent. If no batch is running, remove ${lock}.`,
      },
    );
  }
}
