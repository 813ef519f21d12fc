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
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const randomBytes = (n: number) => process.getBuiltinModule("node:crypto").randomBytes(n);
import { constants, readdirSync } from "node:fs";
import { lstat, open, opendir, readdir, rename, rm, stat, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirAsync, writeFileAtomicAsync } from "../core/atomic.js";
import { localFileError, MailsendError } from "../core/errors.js";
import { mkdirOwned } from "../core/owned.js";
import { checkDirChain, type ChainDir } from "../core/trusted-dir.js";
import { expandHome } from "../core/home.js";
import { otherStateDir, stateDir } from "../settings/state-dir.js";
import { PackedIds } from "./ids.js";
import { checkMeta, checkState, NotOutboxMeta } from "./schema.js";
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

const notQueued = new WeakSet<object>();

/** A full disk or a read-only outbox is a temporary failure for the caller (75; the relay and sendmail -bs say 452 4.3.1). */
function writeFailure(e: unknown, path: string): MailsendError {
  const local = localFileError(e, path, "write", "outbox file");
  const err = new MailsendError("temporary_failure", `${local.message}; the message was NOT queued`, {
    cause: e,
    hint: local.hint ?? "Check the outbox directory (mailsend queue --help), then send again.",
  });
  notQueued.add(err);
  return err;
}

/** Whether an error of add() says the outbox could not be written (a full disk, a read-only one). */
export function isOutboxWriteFailure(e: unknown): boolean {
  return typeof e === "object" && e !== null && notQueued.has(e);
}

/** Each damaged-file error, and what is wrong with the file. */
const damaged = new WeakMap<object, string>();

/** An outbox file that is not what mailsend wrote (a disk fault, a hand copy): it can never be delivered as it is. */
function damagedFile(path: string, id: string, why: string): MailsendError {
  const e = new MailsendError("local_io_failed", `the outbox file ${path} is damaged (${why})`, {
    hint: `Look at it, then delete it with mailsend queue rm ${id}; the rest of the outbox is unaffected.`,
  });
  damaged.set(e, why);
  return e;
}

/** Whether an error of load() or meta() says the file is damaged (not that it could not be read now). */
export function isDamagedFile(e: unknown): boolean {
  return typeof e === "object" && e !== null && damaged.has(e);
}

/** What is wrong with the file, for an error of load() or meta() that says it is damaged. */
export function damageOf(e: unknown): string | undefined {
  return typeof e === "object" && e !== null ? damaged.get(e) : undefined;
}

/** Read-only, never through a symbolic link, never waiting on a FIFO someone put there. */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/**
 * Opens a message file for reading, or undefined when it is not there. A link or anything but a
 * plain file is damaged, found so before a byte of it is read: what it points at is not the
 * outbox's to show.
 */
async function openOutboxFile(path: string, id: string): Promise<FileHandle | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, READ_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw damagedFile(path, id, "it is a symbolic link, not a message file");
    throw localFileError(e, path, "read", "outbox file");
  }
  const st = await fh.stat().catch(() => undefined);
  if (!st?.isFile()) {
    await fh.close();
    throw damagedFile(path, id, "it is not a plain file");
  }
  return fh;
}

/** A metadata line, checked (schema.ts), and the message after it of the length it was written with. */
function parseMeta(line: string, rawLength: number, path: string, id: string): OutboxMeta {
  let meta: OutboxMeta;
  try {
    meta = checkMeta(JSON.parse(line), id);
  } catch (e) {
    if (e instanceof SyntaxError || e instanceof NotOutboxMeta) throw damagedFile(path, id, e.message);
    throw e;
  }
  // Written whole (temp file, fsync, rename): a message of another length was cut or changed since.
  if (meta.size !== rawLength)
    throw damagedFile(path, id, `its message is ${rawLength} bytes, ${meta.size} were queued`);
  return meta;
}

export class Outbox {
  readonly queueDir: string;
  readonly failedDir: string;
  readonly tmpDir: string;

  /** `stateDir`: the state dir the outbox is in, checked with it (trust()). */
  constructor(
    readonly dir: string,
    private readonly stateDir?: string,
  ) {
    this.queueDir = join(dir, "queue");
    this.failedDir = join(dir, "failed");
    this.tmpDir = join(dir, "tmp");
  }

  static fromEnv(env: Env): Outbox {
    return new Outbox(outboxDir(env), env.MAILSEND_OUTBOX_DIR ? undefined : stateDir(env));
  }

  private dirsMade = false;
  /** The directories passed trust() and only this user or root can change them: no need to look again. */
  private trusted = false;

  ensureDirs(): void {
    if (!this.dirsMade) {
      // Checked before anything is made in them (a state dir others can write), and again once made.
      this.trust();
      try {
        for (const d of [this.dir, this.queueDir, this.failedDir, this.tmpDir]) mkdirOwned(d);
        this.dirsMade = true;
      } catch (e) {
        throw writeFailure(e, this.dir);
      }
    }
    this.trust();
  }

  /**
   * Throws a config error (78) when another user could write in the state dir, the outbox or its
   * subdirectories, or one of those is a symbolic link (src/core/trusted-dir.ts): nothing is read
   * from or written there then. Looked at again before each change while the directories are a
   * daemon user's (root working in its state dir): that user could swap one for a link meanwhile.
   */
  trust(): void {
    if (this.trusted) return;
    const chain: ChainDir[] = [
      ...(this.stateDir ? [{ path: this.stateDir, what: "state directory" }] : []),
      { path: this.dir, what: "outbox directory" },
      { path: this.queueDir, what: "outbox directory", noLink: true },
      { path: this.tmpDir, what: "outbox directory", noLink: true },
      { path: this.failedDir, what: "outbox directory", noLink: true },
    ];
    this.trusted = checkDirChain(chain).ownOnly && this.dirsMade;
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
        await writeDurably(join(this.queueDir, `${id}.state`), this.tmpDir, [
          Buffer.from(JSON.stringify({ attempts: 0, nextAttemptAt: input.holdUntil } satisfies OutboxState)),
        ]);
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
    this.trust();
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
    this.trust();
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

  /** Whether the message is (still) there. */
  async has(id: string, where: "queue" | "failed" = "queue"): Promise<boolean> {
    return (await lstat(this.paths(id, where).msg).catch(() => undefined)) !== undefined;
  }

  /** The metadata line alone (a list does not read whole messages). */
  async meta(id: string, where: "queue" | "failed" = "queue"): Promise<OutboxMeta | undefined> {
    const { msg } = this.paths(id, where);
    const fh = await openOutboxFile(msg, id);
    if (!fh) return undefined;
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
          return parseMeta(line, (await fh.stat()).size - Buffer.byteLength(line) - 1, msg, id);
        }
      }
      throw damagedFile(msg, id, "no metadata line");
    } catch (e) {
      if (isDamagedFile(e)) throw e;
      throw localFileError(e, msg, "read", "outbox file");
    } finally {
      await fh.close();
    }
  }

  async load(id: string, where: "queue" | "failed" = "queue"): Promise<QueuedMessage | undefined> {
    this.trust();
    const { msg } = this.paths(id, where);
    const fh = await openOutboxFile(msg, id);
    if (!fh) return undefined;
    let data: Buffer;
    try {
      data = await fh.readFile();
    } catch (e) {
      throw localFileError(e, msg, "read", "outbox file");
    } finally {
      await fh.close();
    }
    const nl = data.indexOf(0x0a);
    if (nl < 0) throw damagedFile(msg, id, "no metadata line");
    const raw = data.subarray(nl + 1);
    const meta = parseMeta(data.subarray(0, nl).toString("utf8"), raw.length, msg, id);
    return { meta, raw, state: await this.state(id, where) };
  }

  async state(id: string, where: "queue" | "failed" = "queue"): Promise<OutboxState> {
    const { state } = this.paths(id, where);
    let text: string;
    try {
      // Not through a link: a state file is mailsend's own, never another file's bytes.
      const fh = await open(state, READ_FLAGS);
      try {
        if (!(await fh.stat()).isFile()) throw Object.assign(new Error("not a plain file"), { code: "EISDIR" });
        text = await fh.readFile("utf8");
      } finally {
        await fh.close();
      }
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // A missing state: never tried. One that cannot be read (a link, a directory) keeps its message waiting, said.
      if (code === "ENOENT") return { attempts: 0, nextAttemptAt: 0 };
      throw localFileError(e, state, "read", "outbox state file");
    }
    try {
      return checkState(JSON.parse(text));
    } catch {
      // A torn one (cannot be, it is renamed into place) reads as never tried too.
      return { attempts: 0, nextAttemptAt: 0 };
    }
  }

  async setState(id: string, s: OutboxState, where: "queue" | "failed" = "queue"): Promise<void> {
    this.trust();
    const { state } = this.paths(id, where);
    try {
      await writeDurably(state, this.tmpDir, [Buffer.from(JSON.stringify(s))]);
    } catch (e) {
      throw localFileError(e, state, "write", "outbox state file");
    }
  }

  /** A delivered message leaves the outbox (the .msg first: without it the rest is nothing). */
  async remove(id: string, where: "queue" | "failed" = "queue"): Promise<boolean> {
    this.trust();
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
    this.trust();
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
      await this.setState(
        id,
        {
          attempts: s.attempts,
          nextAttemptAt: 0,
          ...(s.lastError ? { lastError: s.lastError } : {}),
          ...(s.notices ? { notices: s.notices } : {}),
        },
        "queue",
      );
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
    this.trust();
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
}
