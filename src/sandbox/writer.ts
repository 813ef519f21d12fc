/**
 * Writing one message file durably (open, write, fdatasync, close), after
 * building its bytes with MailComposer when it came over REST. Under load
 * these two are most of a send's cost, so by default a worker thread does
 * them and the main thread only parses, checks, commits the index and
 * answers. The worker is plain CommonJS evaluated from a string, requiring
 * nodemailer's CommonJS build by its resolved path, so it runs the same from
 * src/ (tests) and from the bundle in dist/. Without workers (one core, or
 * `workers: 0`) the same steps run inline.
 */
import fs from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { isSingleExecutable } from "../core/sea.js";
import { buildInline, composeBytes, type ComposerOptions } from "./compose.js";

/** The bytes, or the composer options to build them from. */
export type Payload = { raw: Buffer } | { compose: ComposerOptions };

export interface MessageWriter {
  /** Write `path` (which must not exist) durably; resolves to the byte count. */
  write(path: string, payload: Payload): Promise<number>;
  close(): Promise<void>;
}

/**
 * open, write, fdatasync, close with the callback API: per message it costs
 * markedly less CPU than fs/promises' FileHandle (no handle object, no abort
 * signal plumbing), which shows at thousands of messages a second.
 */
function writeDurably(fs: typeof import("node:fs"), path: string, raw: Uint8Array): Promise<void> {
  // Self-contained (fs comes in as an argument): the worker runs this very function's source.
  return new Promise((resolve, reject) => {
    fs.open(path, "wx", 0o600, (err, fd) => {
      if (err) return reject(err);
      const fail = (e: Error) => fs.close(fd, () => fs.unlink(path, () => reject(e)));
      const writeFrom = (off: number) => {
        if (off >= raw.length) {
          return fs.fdatasync(fd, (e) => (e ? fail(e) : fs.close(fd, (e2) => (e2 ? reject(e2) : resolve()))));
        }
        fs.write(fd, raw, off, raw.length - off, null, (e, n) => (e ? fail(e) : writeFrom(off + n)));
      };
      writeFrom(0);
    });
  });
}

export const inlineWriter: MessageWriter = {
  async write(path, payload) {
    const raw = "raw" in payload ? payload.raw : await buildInline(payload.compose);
    await writeDurably(fs, path, raw);
    return raw.length;
  },
  async close() {},
};

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
const { Writable } = require("node:stream");
const mod = require(workerData.composer);
const MailComposer = mod.default || mod;
${writeDurably.toString()}
${composeBytes.toString()}
parentPort.on("message", (job) => {
  const bytes = job.raw
    ? Promise.resolve(job.raw)
    : composeBytes(MailComposer, Writable, job.compose);
  bytes
    .then((raw) => writeDurably(fs, job.path, raw).then(() => raw.length))
    .then(
      (size) => parentPort.postMessage({ seq: job.seq, size }),
      (e) => parentPort.postMessage({ seq: job.seq, error: String((e && e.message) || e), code: e && e.code }),
    );
});
`;

interface Job {
  resolve: (n: number) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
  alive: boolean;
}

export class WorkerWriter implements MessageWriter {
  readonly #slots: Slot[] = [];
  #seq = 0;
  #next = 0;

  constructor(size: number) {
    const composer = createRequire(import.meta.url).resolve("nodemailer/lib/mail-composer");
    for (let i = 0; i < size; i++) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { composer } });
      const slot: Slot = { worker, jobs: new Map(), alive: true };
      worker.on("message", (m: { seq: number; size?: number; error?: string; code?: string }) => {
        const job = slot.jobs.get(m.seq);
        if (!job) return;
        slot.jobs.delete(m.seq);
        if (m.size !== undefined) job.resolve(m.size);
        else job.reject(Object.assign(new Error(m.error ?? "write failed"), m.code ? { code: m.code } : {}));
      });
      const die = (e?: Error) => {
        slot.alive = false;
        for (const job of slot.jobs.values()) job.reject(e ?? new Error("message writer thread exited"));
        slot.jobs.clear();
      };
      worker.on("error", die);
      worker.on("exit", () => die());
      worker.unref();
      this.#slots.push(slot);
    }
  }

  write(path: string, payload: Payload): Promise<number> {
    let best: Slot | undefined;
    for (let i = 0; i < this.#slots.length; i++) {
      const s = this.#slots[(this.#next + i) % this.#slots.length]!;
      if (s.alive && (!best || s.jobs.size < best.jobs.size)) best = s;
    }
    this.#next++;
    // A dead worker is a bug or an out-of-memory; the sandbox goes on inline.
    if (!best) return inlineWriter.write(path, payload);
    const slot = best;
    const seq = ++this.#seq;
    return new Promise<number>((resolve, reject) => {
      slot.jobs.set(seq, { resolve, reject });
      slot.worker.postMessage(
        "raw" in payload ? { seq, path, raw: payload.raw } : { seq, path, compose: payload.compose },
      );
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
  }
}

export function createWriter(workers: number): MessageWriter {
  // The single executable has nodemailer inside its one script, not as a file a worker can require.
  return workers > 0 && !isSingleExecutable() ? new WorkerWriter(workers) : inlineWriter;
}
