/**
 * The one runner that delivers from the outbox: due messages, in order of
 * arrival, a few at a time, through the shared budget. One runner at a time
 * holds the outbox (a lock whose mtime it refreshes, so a runner killed with
 * -9 stops holding it within seconds); any number of processes add to it.
 */
import { join } from "node:path";
import { randomInt } from "node:crypto";
import { MailsendError, exitCodeFor, toMailsendError } from "../core/errors.js";
import type { Env } from "../limits/budget.js";
import { OutboxSender, isTemporary } from "./deliver.js";
import { prepareMessage } from "./message.js";
import { Outbox } from "./store.js";
import type { OutboxState } from "./types.js";

export const DEFAULT_MAX_AGE_MS = 5 * 24 * 3600_000;
const DEFAULT_CONCURRENCY = 4;
/** How often a watching runner looks for mail added by other processes. */
const POLL_MS = 1000;

export type RunnerEvent =
  | { type: "sent"; id: string; transport: string; reason: string; messageId: string; recipients: string[]; attempts: number }
  | { type: "deferred"; id: string; error: MailsendError; nextAttemptAt: number; attempts: number }
  | { type: "failed"; id: string; error: MailsendError; attempts: number }
  | { type: "warning"; id?: string; message: string };

export interface RunnerOptions {
  env: Env;
  /**
   * due: deliver what is due now, then exit (cron, a timer, `queue run`).
   * drain: stay until the outbox is empty, sleeping until the next retry (the background runner).
   * watch: keep running and deliver as mail arrives (the relay, a service), until stop().
   */
  mode: "due" | "drain" | "watch";
  concurrency?: number;
  maxAgeMs?: number;
  onEvent?: (e: RunnerEvent) => void;
  trace?: (line: string) => void;
  /** The outbox directory (default: from env). */
  outbox?: Outbox;
}

export interface RunSummary {
  /** false: another runner holds the outbox; nothing was done. */
  ran: boolean;
  sent: number;
  deferred: number;
  failed: number;
  left: number;
}

/** Exponential with jitter, from 30 s to an hour; a server's Retry-After wins when it asks for longer. */
export function retryDelayMs(attempts: number, retryAfterS?: number): number {
  const base = Math.min(3600_000, 30_000 * 2 ** Math.max(0, attempts - 1));
  const jittered = Math.round(base / 2 + randomInt(0, Math.max(1, Math.floor(base / 2))));
  return Math.max(jittered, (retryAfterS ?? 0) * 1000);
}

function errorRecord(e: MailsendError) {
  return { code: e.code, message: e.message, exit: exitCodeFor(e.code), at: Date.now() };
}

type Release = () => Promise<void>;

async function lockOutbox(outbox: Outbox, onCompromised: () => void): Promise<Release | undefined> {
  const { default: lockfile } = await import("proper-lockfile");
  outbox.ensureDirs();
  try {
    return await lockfile.lock(outbox.dir, {
      lockfilePath: join(outbox.dir, "runner.lock"),
      realpath: false,
      stale: 10_000,
      update: 2_000,
      retries: 0,
      onCompromised,
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOCKED") return undefined;
    throw e;
  }
}

/** Whether a live runner holds the outbox now. */
export async function runnerHoldsOutbox(outbox: Outbox): Promise<boolean> {
  const { default: lockfile } = await import("proper-lockfile");
  try {
    return await lockfile.check(outbox.dir, { lockfilePath: join(outbox.dir, "runner.lock"), realpath: false, stale: 10_000 });
  } catch {
    return false;
  }
}

export class QueueRunner {
  readonly outbox: Outbox;
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private senders = new Map<string, Promise<OutboxSender>>();
  /** When each known message is next due (ms); the outbox's state files say the same on disk. */
  private due = new Map<string, number>();
  private inFlight = new Set<string>();
  private readonly summary: RunSummary = { ran: true, sent: 0, deferred: 0, failed: 0, left: 0 };
  private stopController = new AbortController();

  constructor(private readonly opts: RunnerOptions) {
    this.outbox = opts.outbox ?? Outbox.fromEnv(opts.env);
  }

  /** Mail was added: look now rather than at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Take no new message; the ones in flight finish; run() then resolves. */
  stop(): void {
    this.stopping = true;
    this.wake();
  }

  /** Stop at once, cutting deliveries in flight (they stay in the outbox, with their idempotency keys). */
  abort(): void {
    this.stopController.abort(new MailsendError("temporary_failure", "the runner was stopped"));
    this.stop();
  }

  async run(): Promise<RunSummary> {
    let compromised = false;
    const release = await lockOutbox(this.outbox, () => {
      compromised = true;
      this.opts.onEvent?.({ type: "warning", message: "the outbox lock was taken over by another runner; stopping" });
      this.stop();
    });
    if (!release) return { ran: false, sent: 0, deferred: 0, failed: 0, left: (await this.outbox.ids()).length };
    try {
      await this.outbox.sweepTmp();
      await this.loop();
    } finally {
      for (const s of this.senders.values()) await (await s.catch(() => undefined))?.close();
      if (!compromised) await release().catch(() => {});
    }
    this.summary.left = (await this.outbox.ids()).length;
    return this.summary;
  }

  private async scan(): Promise<void> {
    const ids = await this.outbox.ids();
    const present = new Set(ids);
    for (const id of this.due.keys()) if (!present.has(id) && !this.inFlight.has(id)) this.due.delete(id);
    for (const id of ids) {
      if (this.due.has(id)) continue;
      this.due.set(id, (await this.outbox.state(id)).nextAttemptAt);
    }
  }

  private nextDue(now: number): string | undefined {
    for (const [id, at] of this.due) if (at <= now && !this.inFlight.has(id)) return id;
    return undefined;
  }

  private earliest(): number | undefined {
    let min: number | undefined;
    for (const [id, at] of this.due) if (!this.inFlight.has(id) && (min === undefined || at < min)) min = at;
    return min;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, Math.max(0, ms));
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }

  private async loop(): Promise<void> {
    const lanes = Math.max(1, this.opts.concurrency ?? DEFAULT_CONCURRENCY);
    const running = new Set<Promise<void>>();
    // Ids are in arrival order (a Map keeps insertion order, the scan inserts sorted ids).
    await this.scan();
    for (let round = 0; ; round++) {
      if (this.stopping) break;
      const now = Date.now();
      let id: string | undefined;
      while (running.size < lanes && (id = this.nextDue(now)) !== undefined) {
        this.inFlight.add(id);
        const p: Promise<void> = this.attempt(id).finally(() => {
          this.inFlight.delete(id!);
          running.delete(p);
          this.wake();
        });
        running.add(p);
      }
      const pending = this.earliest();
      if (running.size === 0 && this.opts.mode === "due" && (pending === undefined || pending > Date.now())) break;
      if (running.size === 0 && this.opts.mode === "drain" && pending === undefined) {
        // Look once more: a writer that saw this runner's lock counted on it.
        await this.scan();
        if (this.earliest() === undefined) break;
        continue;
      }
      const wait = pending === undefined ? POLL_MS : Math.min(POLL_MS, pending - Date.now());
      await this.sleep(running.size >= lanes ? 60_000 : wait);
      if (round % 1 === 0 && running.size < lanes) await this.scan();
    }
    await Promise.allSettled([...running]);
  }

  private sender(profile: string | undefined): Promise<OutboxSender> {
    const k = profile ?? "";
    let s = this.senders.get(k);
    if (!s) {
      s = OutboxSender.open(this.opts.env, profile, {
        pool: Math.max(1, this.opts.concurrency ?? DEFAULT_CONCURRENCY),
        retries: 0,
        // The runner is the one that waits for the budget: as long as it takes.
        maxWaitMs: 3600_000,
        deadlineMs: 60_000,
        ...(this.opts.trace ? { trace: this.opts.trace } : {}),
      });
      // A failed open (no key yet) is tried again for the next message.
      s.catch(() => this.senders.delete(k));
      this.senders.set(k, s);
    }
    return s;
  }

  private async attempt(id: string): Promise<void> {
    const { onEvent } = this.opts;
    let queued;
    try {
      queued = await this.outbox.load(id);
    } catch (e) {
      onEvent?.({ type: "warning", id, message: toMailsendError(e).message });
      this.due.set(id, Date.now() + 60_000);
      return;
    }
    if (!queued) {
      this.due.delete(id);
      return;
    }
    const { meta, raw, state } = queued;
    if (state.nextAttemptAt > Date.now()) {
      this.due.set(id, state.nextAttemptAt);
      return;
    }
    const attempts = state.attempts + 1;
    const maxAge = this.opts.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
    try {
      const message = await prepareMessage(raw, meta.envelope, meta.idempotencyKey);
      const sender = await this.sender(meta.profile);
      const chosen = sender.choose(message);
      const result = await sender.send(message, chosen, { signal: this.stopController.signal });
      // Accepted: from here on nothing may make it go out again except under its own key.
      this.due.delete(id);
      this.summary.sent++;
      try {
        await this.outbox.remove(id);
      } catch (e) {
        onEvent?.({ type: "warning", id, message: `sent, but could not be removed from the outbox (${toMailsendError(e).message}); a later run resends it under the same idempotency key, which the service drops as a repeat` });
      }
      onEvent?.({ type: "sent", id, transport: result.transport, reason: chosen.reason, messageId: result.messageId, recipients: result.recipients, attempts });
    } catch (e) {
      const err = toMailsendError(e);
      const next: OutboxState = { attempts, nextAttemptAt: 0, lastError: errorRecord(err) };
      const tooOld = Date.now() - meta.createdAt > maxAge;
      try {
        if (isTemporary(err) && !tooOld) {
          next.nextAttemptAt = Date.now() + retryDelayMs(attempts, err.retryAfter);
          await this.outbox.setState(id, next);
          this.due.set(id, next.nextAttemptAt);
          this.summary.deferred++;
          onEvent?.({ type: "deferred", id, error: err, nextAttemptAt: next.nextAttemptAt, attempts });
        } else {
          const final = tooOld && isTemporary(err) ? new MailsendError(err.code, `${err.message} (given up after ${Math.round(maxAge / 3600_000)} h in the outbox)`, { cause: err }) : err;
          await this.outbox.fail(id, { ...next, lastError: errorRecord(final), failedAt: Date.now() });
          this.due.delete(id);
          this.summary.failed++;
          onEvent?.({ type: "failed", id, error: final, attempts });
        }
      } catch (bookkeeping) {
        // The state could not be written (a full disk): the message stays as it was, tried again later.
        this.due.set(id, Date.now() + 60_000);
        onEvent?.({ type: "warning", id, message: `could not record the attempt: ${toMailsendError(bookkeeping).message}` });
      }
    }
  }
}
