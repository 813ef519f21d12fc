/**
 * The sandbox's mail store: each accepted message as messages/<id>.eml, and
 * index.jsonl with one line of metadata per message. The index line is the
 * commit record: a message exists once its line is on disk, and only then is
 * it acknowledged. An .eml without a line (a crash between the two) is an
 * orphan that the next start removes, and a torn last line is cut off.
 *
 * Group commit: while one batch is being made durable, new messages queue;
 * the next batch writes all their files in parallel, fsyncs each, fsyncs the
 * directory once, appends all their index lines in one write and fsyncs the
 * index once. So fsync costs are shared by concurrent requests, and still no
 * answer leaves before its message is on disk.
 */
import {
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
} from "node:fs";
import { open, readFile, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { MailsendError } from "../core/errors.js";
import { sandboxPaths, type SandboxPaths } from "./paths.js";
import { MESSAGE_ID_DOMAIN, type MessageStore, type StoredMessage } from "./types.js";
import { inlineWriter, type MessageWriter, type Payload } from "./writer.js";

/** What the index keeps beyond the public record: never shown to readers. */
interface IndexRecord extends StoredMessage {
  /** sha256 of the REST body, to tell an idempotent retry from a reused key. */
  requestHash?: string;
}

export type NewMessage = Omit<StoredMessage, "id" | "receivedAt" | "size"> &
  Payload & {
    id?: string;
    requestHash?: string;
  };

interface Pending {
  record: IndexRecord;
  payload: Payload;
  resolve: (m: StoredMessage) => void;
  reject: (e: unknown) => void;
}

const MAX_BATCH = 256;
const ID_RE = /^[0-9a-z]{18}$/;

function publicRecord(r: IndexRecord): StoredMessage {
  if (r.requestHash === undefined) return r;
  const { requestHash: _h, ...rest } = r;
  return rest;
}

let seq = 0;

/**
 * 9 base36 digits of milliseconds, 5 of a per-process counter, 4 random:
 * fixed width, so ids sort by arrival as strings; safe in URLs and file names.
 */
export function newMessageId(now = Date.now()): string {
  seq = (seq + 1) % 36 ** 5;
  // Not a secret: the time and the counter make it unique, this only keeps
  // two processes sharing a millisecond apart.
  const rand = Math.floor(Math.random() * 36 ** 4);
  return now.toString(36).padStart(9, "0") + seq.toString(36).padStart(5, "0") + rand.toString(36).padStart(4, "0");
}

export function isMessageId(id: string): boolean {
  return ID_RE.test(id);
}

/** A Message-ID as written in a header or printed by `mailsend send`, without its angle brackets. */
export function bareMessageId(s: string): string {
  const t = s.trim();
  return t.startsWith("<") && t.endsWith(">") ? t.slice(1, -1).trim() : t;
}

/**
 * Whether `dir` holds a sandbox's messages: every sandbox start makes the
 * index, so without one no sandbox ever ran there (or it is another dir).
 */
export function hasSandboxData(dir: string): boolean {
  return existsSync(sandboxPaths(dir).index);
}

export class FileMessageStore implements MessageStore {
  readonly paths: SandboxPaths;
  readonly readOnly: boolean;
  readonly #records: IndexRecord[] = [];
  readonly #byId = new Map<string, IndexRecord>();
  readonly #listeners = new Set<(m: StoredMessage) => void>();
  #queue: Pending[] = [];
  #committing: Promise<void> | undefined;
  #index: FileHandle | undefined;
  #dir: FileHandle | undefined;
  #indexSize = 0;
  #closed = false;
  readonly #writer: MessageWriter;

  private constructor(paths: SandboxPaths, readOnly: boolean, writer: MessageWriter) {
    this.paths = paths;
    this.readOnly = readOnly;
    this.#writer = writer;
  }

  /**
   * Open the store in `dir`. The writer (the running sandbox) repairs what a
   * crash may have left; a reader (`mailsend inbox`) only reads.
   */
  static async open(dir: string, opts: { readOnly?: boolean; writer?: MessageWriter } = {}): Promise<FileMessageStore> {
    const store = new FileMessageStore(sandboxPaths(dir), opts.readOnly ?? false, opts.writer ?? inlineWriter);
    store.#load();
    if (!store.readOnly) {
      mkdirSync(store.paths.messages, { recursive: true });
      store.#index = await open(store.paths.index, "a+", 0o600);
      store.#dir = await open(store.paths.messages, "r");
    }
    return store;
  }

  #load(): void {
    const { index, messages } = this.paths;
    let text: Buffer;
    try {
      text = readFileSync(index);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") text = Buffer.alloc(0);
      else
        throw new MailsendError("file_unreadable", `cannot read the sandbox index ${index}: ${(e as Error).message}`, {
          cause: e,
        });
    }
    let good = 0;
    let start = 0;
    while (start < text.length) {
      const nl = text.indexOf(0x0a, start);
      if (nl < 0) break; // a torn last line: never acknowledged
      const line = text.subarray(start, nl).toString("utf8");
      start = nl + 1;
      try {
        const r = JSON.parse(line) as IndexRecord;
        if (typeof r.id === "string" && isMessageId(r.id) && !this.#byId.has(r.id)) {
          this.#records.push(r);
          this.#byId.set(r.id, r);
        }
      } catch {
        // A damaged line in the middle: skip it, keep the rest.
      }
      good = start;
    }
    this.#indexSize = good;
    this.#records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    if (this.readOnly) return;
    if (good < text.length) {
      const fd = openSync(index, "r+");
      try {
        ftruncateSync(fd, good);
      } finally {
        closeSync(fd);
      }
    }
    if (existsSync(messages)) {
      for (const name of readdirSync(messages)) {
        const id = name.endsWith(".eml") ? name.slice(0, -4) : "";
        if (!this.#byId.has(id)) {
          try {
            unlinkSync(join(messages, name));
          } catch {}
        }
      }
    }
  }

  get count(): number {
    return this.#records.length;
  }

  async list(opts: { limit?: number } = {}): Promise<StoredMessage[]> {
    const n = Math.min(opts.limit ?? this.#records.length, this.#records.length);
    const out: StoredMessage[] = [];
    for (let i = this.#records.length - 1; i >= 0 && out.length < n; i--) out.push(publicRecord(this.#records[i]!));
    return out;
  }

  async get(id: string): Promise<StoredMessage | undefined> {
    const r = this.#byId.get(id);
    return r && publicRecord(r);
  }

  /**
   * The messages whose Message-ID header is `messageId` (with or without
   * its angle brackets), newest first: what `mailsend send` printed for an
   * SMTP send. A REST message answers to its <id@sandbox> header too.
   */
  findByMessageId(messageId: string): StoredMessage[] {
    const want = bareMessageId(messageId);
    if (want === "") return [];
    const out: StoredMessage[] = [];
    for (let i = this.#records.length - 1; i >= 0; i--) {
      const r = this.#records[i]!;
      if (bareMessageId(r.messageId) === want || (r.channel === "rest" && `${r.id}@${MESSAGE_ID_DOMAIN}` === want))
        out.push(publicRecord(r));
    }
    return out;
  }

  async raw(id: string): Promise<Buffer | undefined> {
    if (!this.#byId.has(id)) return undefined;
    try {
      return await readFile(join(this.paths.messages, `${id}.eml`));
    } catch {
      return undefined;
    }
  }

  subscribe(listener: (m: StoredMessage) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Records with an idempotency key, oldest first (to rebuild the replay cache). */
  *withIdempotencyKey(since: number): Iterable<IndexRecord> {
    for (const r of this.#records) if (r.idempotencyKey && Date.parse(r.receivedAt) >= since) yield r;
  }

  /** Resolves once the message is durably stored; rejects if it could not be. */
  add(m: NewMessage): Promise<StoredMessage> {
    if (this.readOnly || this.#closed) return Promise.reject(new Error("the message store is not open for writing"));
    const { id, ...rest } = m;
    const payload: Payload = "raw" in rest ? { raw: rest.raw } : { compose: rest.compose };
    const { raw: _raw, compose: _compose, ...meta } = rest as typeof rest & { raw?: Buffer; compose?: unknown };
    const record: IndexRecord = {
      id: id ?? newMessageId(),
      receivedAt: new Date().toISOString(),
      ...meta,
      size: 0,
    };
    return new Promise<StoredMessage>((resolve, reject) => {
      this.#queue.push({ record, payload, resolve, reject });
      this.#committing ??= this.#drain();
    });
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BATCH);
        try {
          await this.#commit(batch);
        } catch (e) {
          for (const p of batch) p.reject(e);
        }
      }
    } finally {
      this.#committing = undefined;
    }
  }

  async #commit(batch: Pending[]): Promise<void> {
    const paths = batch.map((p) => join(this.paths.messages, `${p.record.id}.eml`));
    const written: string[] = [];
    try {
      const sizes = await Promise.allSettled(batch.map((p, i) => this.#writer.write(paths[i]!, p.payload)));
      sizes.forEach((s, i) => {
        if (s.status === "fulfilled") {
          written.push(paths[i]!);
          batch[i]!.record.size = s.value;
        }
      });
      const failed = sizes.find((s) => s.status === "rejected");
      if (failed) throw (failed as PromiseRejectedResult).reason;
      await this.#dir!.sync();
      const lines = Buffer.from(batch.map((p) => `${JSON.stringify(p.record)}\n`).join(""));
      try {
        await this.#index!.write(lines, 0, lines.length, this.#indexSize);
        await this.#index!.datasync();
      } catch (e) {
        // Leave no torn line behind for the next append to follow.
        await this.#index!.truncate(this.#indexSize).catch(() => {});
        throw e;
      }
      this.#indexSize += lines.length;
    } catch (e) {
      // Files of a batch that did not commit are orphans: remove them now
      // (the next start would, too). A failed write cleaned up after itself.
      await Promise.all(written.map((p) => unlink(p).catch(() => {})));
      throw e;
    }
    for (const p of batch) this.#insert(p.record);
    for (const p of batch) {
      const m = publicRecord(p.record);
      p.resolve(m);
      for (const l of this.#listeners) {
        try {
          l(m);
        } catch {}
      }
    }
  }

  /**
   * Ids are made when a request arrives, and requests finish out of order, so
   * a record may belong a little before the end: walk back to its place.
   */
  #insert(r: IndexRecord): void {
    let i = this.#records.length;
    while (i > 0 && this.#records[i - 1]!.id > r.id) i--;
    this.#records.splice(i, 0, r);
    this.#byId.set(r.id, r);
  }

  /** Wait for queued messages, then release the files. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    while (this.#committing) await this.#committing;
    await this.#index?.close();
    await this.#dir?.close();
    this.#index = undefined;
    this.#dir = undefined;
  }
}
