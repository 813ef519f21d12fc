/**
 * The durable outbox: one message per file, written so that a caller is told
 * "accepted" only once the message is on disk (temp file, fsync, rename,
 * fsync of the directory). Postfix's queue is the model: a message moves from
 * tmp/ to queue/ when it is whole, and to failed/ when it can no longer be
 * delivered; nothing is ever deleted except a delivered message or by a
 * person's `queue rm` / `queue purge`.
 *
 *   <dir>/tmp/      messages being written (a crash leaves them here, never in queue/)
 *   <dir>/queue/    <id>.msg: one JSON line of metadata, then the raw RFC 5322 message
 *                   <id>.state: attempts, next attempt, last error (rewritten atomically)
 *   <dir>/failed/   the same two files, for what will not be tried again
 *
 * The API key is never written here; the profile's name and the transport are.
 */
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { mkdir, open, opendir, readdir, readFile, rename, rm, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirAsync, writeFileAtomicAsync } from "../core/atomic.js";
import { localFileError, MailsendError } from "../core/errors.js";
import { mkdirOwned } from "../core/owned.js";
import { expandHome } from "../core/home.js";
import { otherStateDir, stateDir } from "../settings/state-dir.js";
import { PackedIds } from "./ids.js";
import type { Envelope } from "../core/envelope.js";
import type { OutboxMeta, OutboxState, QueuedMessage } from "./types.js";
import type { Env } from "../core/env.js";

export function outboxDir(env: Env): string {
  return env.MAILSEND_OUTBOX_DIR ? expandHome(env.MAILSEND_OUTBOX_DIR, env) : join(stateDir(env), "outbox");
}

/**
 * Mail in the outbox of the other default state dir (otherStateDir): queued while this user's home
 * could not be written or did not exist, or before that, where no runner of this user looks. One
 * line saying how many and how to deliver them (`mailsend queue`, `mailsend doctor`), or undefined.
 */
export function strandedMailNote(env: Env): string | undefined {
  if (env.MAILSEND_OUTBOX_DIR) return undefined;
  const other = otherStateDir(env);
  if (!other) return undefined;
  const queue = join(other, "outbox", "queue");
  let n = 0;
  try {
    n = readdirSync(queue).filter((f) => f.endsWith(".msg")).length;
  } catch {
    return undefined;
  }
  if (n === 0) return undefined;
  return `${n} message${n === 1 ? "" : "s"} also wait${n === 1 ? "s" : ""} in ${queue}, queued when this user's state dir was there (its home ${other.startsWith("/var/tmp/") ? "could not be written, or did not exist," : "could be written"} then); deliver ${n === 1 ? "it" : "them"} with: MAILSEND_STATE_DIR=${other} mailsend queue run`;
}

let seq = 0;
/** Sortable by time of arrival, unique across processes: 11 base-36 digits of ms, then pid-free randomness. */
export function newOutboxId(now = Date.now()): string {
  const t = now.toString(36).padStart(9, "0");
  seq = (seq + 1) % 1296;
  return `${t}${seq.toString(36).padStart(2, "0")}${randomBytes(4).toString("hex")}`;
}

const ID = /^[0-9a-z]{11}[0-9a-f]{8}$/;
export function isOutboxId(s: string): boolean {
  return ID.test(s);
}

/** A gate's refusal, passed through add() as it is (not as a write failure). */
class GateRefused extends Error {
  constructor(readonly reason: unknown) {
    super("refused");
  }
}

/**
 * One file of the outbox, durably, through tmp/ (a crash leaves it there, never in queue/); the
 * caller syncs the directory once for the files it wrote. On disk but not yet in the queue: what
 * the caller still checks (`gate`: the relay's parse) ran beside the write.
 */
function writeDurably(path: string, tmpDir: string, chunks: Buffer[], gate?: Promise<unknown>): Promise<void> {
  const gated = gate?.catch((e: unknown) => Promise.reject(new GateRefused(e)));
  return writeFileAtomicAsync(path, chunks, { tmpDir, syncDir: false, ...(gated ? { gate: gated } : {}) });
}

export interface AddInput {
  raw: Buffer;
  envelope: Envelope;
  idempotencyKey: string;
  source: OutboxMeta["source"];
  profile?: string;
  transport?: OutboxMeta["transport"];
  subject?: string;
  headerFrom?: string;
  /** Not before this time (ms): a caller that tries the message itself holds it this long. */
  holdUntil?: number;
  /** The Message-ID was added by mailsend, not written by the program. */
  stampedMessageId?: boolean;
  /**
   * Checked between the fsync and the rename into queue/: when it rejects, nothing is queued and
   * add() rejects with its reason as it is. Lets a check overlap the write.
   */
  gate?: Promise<unknown>;
}

/** A full disk or a read-only outbox is a temporary failure for the caller (75; the relay says 452). */
function writeFailure(e: unknown, path: string): MailsendError {
  const local = localFileError(e, path, "write", "outbox file");
  return new MailsendError("temporary_failure", `${local.message}; the message was NOT queued`, {
    cause: e,
    hint: local.hint ?? "Check the outbox directory (mailsend queue --help), then send again.",
  });
}

const damaged = new WeakSet<object>();

/** An outbox file that is not what mailsend wrote (a disk fault, a hand copy): it can never be delivered as it is. */
function damagedFile(path: string, id: string, why: string): MailsendError {
  const e = new MailsendError("local_io_failed", `the outbox file ${path} is damaged (${why})`, {
    hint: `Look at it, then delete it with mailsend queue rm ${id}; the rest of the outbox is unaffected.`,
  });
  damaged.add(e);
  return e;
}

/** Whether an error of load() or meta() says the file is damaged (not that it could not be read now). */
export function isDamagedFile(e: unknown): boolean {
  return typeof e === "object" && e !== null && damaged.has(e);
}

/** A message file whose length is not the one it was written with. */
class CutShort extends Error {}

export class Outbox {
  readonly queueDir: string;
  readonly failedDir: string;
  readonly tmpDir: string;

  constructor(readonly dir: string) {
    this.queueDir = join(dir, "queue");
    this.failedDir = join(dir, "failed");
    this.tmpDir = join(dir, "tmp");
  }

  static fromEnv(env: Env): Outbox {
    return new Outbox(outboxDir(env));
  }

  private dirsMade = false;

  ensureDirs(): void {
    if (this.dirsMade) return;
    try {
      for (const d of [this.dir, this.queueDir, this.failedDir, this.tmpDir]) mkdirOwned(d);
      this.dirsMade = true;
    } catch (e) {
      throw writeFailure(e, this.dir);
    }
  }

  /**
   * Put a message in the outbox. Resolves only once it is on disk; throws a
   * temporary_failure (75) when it cannot be written, leaving nothing behind.
   */
  async add(input: AddInput): Promise<string> {
    this.ensureDirs();
    const id = newOutboxId();
    const meta: OutboxMeta = {
      v: 1,
      id,
      createdAt: Date.now(),
      envelope: input.envelope,
      idempotencyKey: input.idempotencyKey,
      source: input.source,
      size: input.raw.length,
      ...(input.profile ? { profile: input.profile } : {}),
      ...(input.transport ? { transport: input.transport } : {}),
      ...(input.subject !== undefined ? { subject: input.subject } : {}),
      ...(input.headerFrom !== undefined ? { headerFrom: input.headerFrom } : {}),
      ...(input.stampedMessageId ? { stampedMessageId: true as const } : {}),
    };
    const target = join(this.queueDir, `${id}.msg`);
    try {
      if (input.holdUntil) {
        // The hold is written first: a runner that lists queue/ never sees the message without it.
        await writeDurably(join(this.queueDir, `${id}.state`), this.tmpDir, [Buffer.from(JSON.stringify({ attempts: 0, nextAttemptAt: input.holdUntil } satisfies OutboxState))]);
      }
      await writeDurably(target, this.tmpDir, [Buffer.from(`${JSON.stringify(meta)}\n`), input.raw], input.gate);
      await fsyncDirAsync(this.queueDir);
    } catch (e) {
      await unlink(target).catch(() => {});
      await unlink(join(this.queueDir, `${id}.state`)).catch(() => {});
      if (e instanceof GateRefused) throw e.reason;
      // Made again on the next add, should a person have removed them meanwhile.
      this.dirsMade = false;
      throw writeFailure(e, this.queueDir);
    }
    return id;
  }

  /** Ids of queued messages, oldest first. */
  async ids(where: "queue" | "failed" = "queue"): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(where === "queue" ? this.queueDir : this.failedDir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw localFileError(e, this.dir, "read", "outbox directory");
    }
    const ids: string[] = [];
    for (const n of names) {
      if (n.endsWith(".msg") && isOutboxId(n.slice(0, -4))) ids.push(n.slice(0, -4));
    }
    return ids.sort();
  }

  /**
   * queue/'s message ids in arrival order, and which of them have a state file: one listing of the
   * directory, read a few hundred names at a time and kept as numbers (ids.ts), so a listing of a
   * big outbox holds neither every name nor an array of them.
   */
  async listing(): Promise<{ ids: PackedIds; withState: PackedIds }> {
    const ids = new PackedIds();
    const withState = new PackedIds(64);
    await this.eachName("queue", (n) => {
      if (n.endsWith(".msg")) {
        const id = n.slice(0, -4);
        if (isOutboxId(id)) ids.push(id);
      } else if (n.endsWith(".state")) {
        const id = n.slice(0, -6);
        if (isOutboxId(id)) withState.push(id);
      }
    });
    ids.sort();
    withState.sort();
    return { ids, withState };
  }

  /** How many messages are in queue/ (or failed/), without a list of them. */
  async count(where: "queue" | "failed" = "queue"): Promise<number> {
    let n = 0;
    await this.eachName(where, (name) => {
      if (name.endsWith(".msg") && isOutboxId(name.slice(0, -4))) n++;
    });
    return n;
  }

  /** Each name in the directory, streamed (a missing directory has none). */
  private async eachName(where: "queue" | "failed", fn: (name: string) => void): Promise<void> {
    let dir;
    try {
      dir = await opendir(where === "queue" ? this.queueDir : this.failedDir, { bufferSize: 256 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
      throw localFileError(e, this.dir, "read", "outbox directory");
    }
    try {
      for await (const d of dir) fn(d.name);
    } catch (e) {
      throw localFileError(e, this.dir, "read", "outbox directory");
    }
  }

  private paths(id: string, where: "queue" | "failed") {
    const d = where === "queue" ? this.queueDir : this.failedDir;
    return { msg: join(d, `${id}.msg`), state: join(d, `${id}.state`) };
  }

  /** The metadata line alone (a list does not read whole messages). */
  /** Whether the message is (still) there. */
  async has(id: string, where: "queue" | "failed" = "queue"): Promise<boolean> {
    return (await stat(this.paths(id, where).msg).catch(() => undefined)) !== undefined;
  }

  async meta(id: string, where: "queue" | "failed" = "queue"): Promise<OutboxMeta | undefined> {
    const { msg } = this.paths(id, where);
    let fh;
    try {
      fh = await open(msg, "r");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw localFileError(e, msg, "read", "outbox file");
    }
    try {
      const buf = Buffer.alloc(16 * 1024);
      let text = "";
      for (let pos = 0; pos < 1024 * 1024; ) {
        const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
        if (bytesRead === 0) break;
        pos += bytesRead;
        text += buf.toString("utf8", 0, bytesRead);
        const nl = text.indexOf("\n");
        if (nl >= 0) {
          const line = text.slice(0, nl);
          const meta = JSON.parse(line) as OutboxMeta;
          // Written whole: a file of another length was cut or changed since (as load() finds it).
          const raw = (await fh.stat()).size - Buffer.byteLength(line) - 1;
          if (typeof meta.size === "number" && meta.size !== raw) throw new CutShort(`its message is ${raw} bytes, ${meta.size} were queued`);
          return meta;
        }
      }
      throw new Error("no metadata line");
    } catch (e) {
      if (e instanceof SyntaxError || e instanceof CutShort || (e as Error).message === "no metadata line") throw damagedFile(msg, id, (e as Error).message);
      throw localFileError(e, msg, "read", "outbox file");
    } finally {
      await fh.close();
    }
  }

  async load(id: string, where: "queue" | "failed" = "queue"): Promise<QueuedMessage | undefined> {
    const { msg } = this.paths(id, where);
    let data: Buffer;
    try {
      data = await readFile(msg);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw localFileError(e, msg, "read", "outbox file");
    }
    const nl = data.indexOf(0x0a);
    let meta: OutboxMeta;
    try {
      if (nl < 0) throw new SyntaxError("no metadata line");
      meta = JSON.parse(data.subarray(0, nl).toString("utf8")) as OutboxMeta;
    } catch (e) {
      throw damagedFile(msg, id, (e as Error).message);
    }
    const raw = data.subarray(nl + 1);
    // Written whole (temp file, fsync, rename): a message of another length was cut or changed since.
    if (typeof meta.size === "number" && meta.size !== raw.length) throw damagedFile(msg, id, `its message is ${raw.length} bytes, ${meta.size} were queued`);
    return { meta, raw, state: await this.state(id, where) };
  }

  async state(id: string, where: "queue" | "failed" = "queue"): Promise<OutboxState> {
    const { state } = this.paths(id, where);
    try {
      const s = JSON.parse(await readFile(state, "utf8")) as OutboxState;
      return { attempts: Number(s.attempts) || 0, nextAttemptAt: Number(s.nextAttemptAt) || 0, ...(s.lastError ? { lastError: s.lastError } : {}), ...(s.failedAt ? { failedAt: s.failedAt } : {}), ...(s.notices ? { notices: s.notices } : {}) };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // A missing state: never tried. A torn one (cannot be, it is renamed into place) reads as never tried too.
      if (code === "ENOENT" || e instanceof SyntaxError) return { attempts: 0, nextAttemptAt: 0 };
      throw localFileError(e, state, "read", "outbox state file");
    }
  }

  async setState(id: string, s: OutboxState, where: "queue" | "failed" = "queue"): Promise<void> {
    const { state } = this.paths(id, where);
    try {
      await writeDurably(state, this.tmpDir, [Buffer.from(JSON.stringify(s))]);
    } catch (e) {
      throw localFileError(e, state, "write", "outbox state file");
    }
  }

  /** A delivered message leaves the outbox (the .msg first: without it the rest is nothing). */
  async remove(id: string, where: "queue" | "failed" = "queue"): Promise<boolean> {
    const { msg, state } = this.paths(id, where);
    let existed = true;
    try {
      await unlink(msg);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw localFileError(e, msg, "write", "outbox file");
      existed = false;
    }
    await rm(state, { force: true });
    await fsyncDirAsync(where === "queue" ? this.queueDir : this.failedDir).catch(() => {});
    return existed;
  }

  /** Move to failed/ with the reason: it will not be tried again unless a person says so. */
  async fail(id: string, s: OutboxState): Promise<void> {
    this.ensureDirs();
    const from = this.paths(id, "queue");
    const to = this.paths(id, "failed");
    await this.setState(id, s, "failed");
    try {
      await rename(from.msg, to.msg);
    } catch (e) {
      throw localFileError(e, to.msg, "write", "outbox file");
    }
    await rm(from.state, { force: true });
    await fsyncDirAsync(this.failedDir).catch(() => {});
    await fsyncDirAsync(this.queueDir).catch(() => {});
  }

  /**
   * Touched by `queue retry`: a runner already delivering has its own schedule for the messages it
   * knows, and reads their states again when this changes. Best effort: without it they go when
   * the runner's schedule says.
   */
  async markRetried(): Promise<void> {
    // Made anew (not rewritten): a stamp another user left (root's, 0600) does not stop this one.
    await writeDurably(join(this.dir, "retry.stamp"), this.tmpDir, [Buffer.from(`${Date.now()}\n`)]).catch(() => {});
  }

  /** When `queue retry` last touched the stamp (0: never). */
  async retriedAt(): Promise<number> {
    return (await stat(join(this.dir, "retry.stamp")).catch(() => undefined))?.mtimeMs ?? 0;
  }

  /**
   * `sendmail -q`, as Postfix's (postqueue -f): every queued message deferred by an earlier attempt
   * is due now, and a runner delivering is told (the retry stamp). A message its sender holds while
   * it tries it itself (never attempted yet) is left to that sender. failed/ stays. Returns how many.
   */
  async flush(now = Date.now()): Promise<number> {
    let n = 0;
    for (const id of await this.ids("queue")) {
      const s = await this.state(id).catch(() => undefined);
      if (!s || s.attempts === 0 || s.nextAttemptAt <= now) continue;
      await this.setState(id, { ...s, nextAttemptAt: 0 });
      n++;
    }
    if (n > 0) await this.markRetried();
    return n;
  }

  /** Back from failed/ (or due now when queued): `queue retry`. */
  async retry(id: string): Promise<boolean> {
    this.ensureDirs();
    const failed = this.paths(id, "failed");
    const queued = this.paths(id, "queue");
    const s = (await stat(failed.msg).catch(() => undefined)) ? await this.state(id, "failed") : undefined;
    if (s) {
      await this.setState(id, { attempts: s.attempts, nextAttemptAt: 0, ...(s.lastError ? { lastError: s.lastError } : {}), ...(s.notices ? { notices: s.notices } : {}) }, "queue");
      await rename(failed.msg, queued.msg);
      await rm(failed.state, { force: true });
      await fsyncDirAsync(this.queueDir).catch(() => {});
      return true;
    }
    if (!(await stat(queued.msg).catch(() => undefined))) return false;
    const q = await this.state(id, "queue");
    await this.setState(id, { ...q, nextAttemptAt: 0 }, "queue");
    return true;
  }

  /** Leftovers of writers that died before their rename: never acknowledged, so never mail. */
  async sweepTmp(olderThanMs = 60 * 60_000): Promise<void> {
    let names: string[] = [];
    try {
      names = await readdir(this.tmpDir);
    } catch {
      return;
    }
    const now = Date.now();
    for (const n of names) {
      const p = join(this.tmpDir, n);
      const st = await stat(p).catch(() => undefined);
      if (st && now - st.mtimeMs > olderThanMs) await rm(p, { force: true }).catch(() => {});
    }
  }

  async mkdirs(): Promise<void> {
    for (const d of [this.queueDir, this.failedDir, this.tmpDir]) await mkdir(d, { recursive: true, mode: 0o700 });
  }
}
