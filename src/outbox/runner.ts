/**
 * The one runner that delivers from the outbox: due messages, in order of
 * arrival, a few at a time, through the shared budget. One runner at a time
 * holds the outbox (a lock whose mtime it refreshes, so a runner killed with
 * -9 stops holding it within seconds); any number of processes add to it.
 */
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const randomInt = (min: number, max: number) => process.getBuiltinModule("node:crypto").randomInt(min, max);
import { MailsendError, exitCodeFor, toMailsendError } from "../core/errors.js";
import { abortableSleep } from "../limits/deliver.js";
import { OutboxSender, slotClassOf, waitsInOutbox } from "./deliver.js";
import { prepareMessage } from "./message.js";
import { compareIds } from "./ids.js";
import { Schedule } from "./schedule.js";
import { isDamagedFile, Outbox } from "./store.js";
import type { OutboxState, QueuedMessage } from "./types.js";
import { preloadDelivery } from "./preload.js";
import { lockOutbox } from "./runner-lock.js";
import { chooseNotice, planNotice, queueNotice, type NoticeKind, type PlannedNotice } from "./notices.js";
import type { Env } from "../core/env.js";

export const DEFAULT_MAX_AGE_MS = 5 * 24 * 3600_000;
const DEFAULT_CONCURRENCY = 4;
/** How often a watching runner looks for mail added by other processes. */
const POLL_MS = 1000;

export type RunnerEvent =
  | {
      type: "sent";
      id: string;
      transport: string;
      reason: string;
      messageId: string;
      recipients: string[];
      attempts: number;
    }
  | { type: "deferred"; id: string; error: MailsendError; nextAttemptAt: number; attempts: number }
  | { type: "failed"; id: string; error: MailsendError; attempts: number }
  | { type: "warning"; id?: string; message: string }
  /** A notice about message `id` was queued as `noticeId` (outbox/notices.ts). */
  | { type: "notice"; id: string; noticeId: string; to: string[] };

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
  /** A fault of this machine (a full or read-only disk) that kept messages from going or from being recorded: the run's exit code is its. */
  localFault?: MailsendError;
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

class WaitCut extends Error {
  constructor() {
    super("the runner stopped while this message waited for the budget");
  }
}

export class QueueRunner {
  readonly outbox: Outbox;
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private senders = new Map<string, Promise<OutboxSender>>();
  /** When each known message is next due (ms); the outbox's state files say the same on disk. */
  private due = new Schedule();
  private inFlight = new Set<string>();
  /** Sent, but their files could not be removed: not sent again by this runner (a later run resends them under their keys). */
  private unremoved = new Set<string>();
  /**
   * Messages whose due time came from their state file as another process wrote it (held by a
   * sender that tries it itself, then deferred by it): each scan reads their state again, since
   * that process may have moved the time (its hold of two minutes, then a slot in seconds).
   */
  private heldElsewhere = new Set<string>();
  /**
   * Profiles whose key the service refused, until when: the other messages of that profile wait
   * with it instead of each asking the service again with the same refused key (a backlog would
   * otherwise be a burst of failed logins every retry). Cleared by `queue retry`.
   */
  private keyRefused = new Map<string, { until: number; error: MailsendError }>();
  private readonly summary: RunSummary = { ran: true, sent: 0, deferred: 0, failed: 0, left: 0 };
  /** Messages a fault of this machine kept from going or from being recorded, until one goes after all. */
  private readonly faulted = new Map<string, MailsendError>();
  private stopController = new AbortController();
  /** Ends the waits for a budget slot on stop(): those messages have not started, so they wait for the next run. */
  private waitsController = new AbortController();

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
    this.waitsController.abort(new WaitCut());
    this.wake();
  }

  /** Stop at once, cutting deliveries in flight (they stay in the outbox, with their idempotency keys). */
  abort(): void {
    this.stopController.abort(new MailsendError("temporary_failure", "the runner was stopped"));
    this.stop();
  }

  async run(): Promise<RunSummary> {
    for (let round = 0; ; round++) {
      let compromised = false;
      const release = await lockOutbox(this.outbox, () => {
        compromised = true;
        this.opts.onEvent?.({ type: "warning", message: "the outbox lock was taken over by another runner; stopping" });
        this.stop();
      });
      if (!release) {
        if (round === 0) return { ran: false, sent: 0, deferred: 0, failed: 0, left: await this.outbox.count() };
        // Another runner took the outbox meanwhile: it delivers what arrived.
        break;
      }
      // lockOutbox wrote runner.pid: which process holds it (for a person, and for a writer asking
      // whether the holder is alive), removed on release.
      // A runner that stays (watch: a service, the relay; drain: the background runner, which
      // sleeps until deferred mail is due) can outlive an upgrade of dist/: what delivering
      // loads, loaded now, by the one runner that holds the outbox (src/outbox/preload.ts).
      if (this.opts.mode !== "due" && round === 0) await preloadDelivery(this.opts.env);
      try {
        await this.outbox.sweepTmp();
        await this.loop();
      } finally {
        for (const s of this.senders.values()) await (await s.catch(() => undefined))?.close();
        this.senders.clear();
        if (!compromised) {
          await release().catch(() => {});
        }
      }
      if (this.stopping || compromised || this.opts.mode === "watch") break;
      // A writer that queued a message just before the lock was released saw it held and started
      // no runner: it counted on this one. Look again now that the lock is free; a message added
      // after this look finds the lock free and starts a runner of its own.
      if (!(await this.arrivedUnseen())) break;
    }
    this.summary.left = await this.outbox.count();
    // A full disk that a later attempt got past (a drain delivers once it is freed) kept nothing;
    // nor did one whose message left queue/ since (failed/ for its own reason, or `queue rm`).
    for (const id of [...this.faulted.keys()]) if (!(await this.outbox.has(id))) this.faulted.delete(id);
    const fault = this.faulted.values().next().value;
    if (fault) this.summary.localFault = fault;
    return this.summary;
  }

  /** Whether queue/ holds a message this runner does not know of (added since its last listing). */
  private async arrivedUnseen(): Promise<boolean> {
    const { ids } = await this.outbox.listing();
    for (let j = 0; j < ids.n; j++)
      if (!this.due.knows(ids.hi[j]!, ids.lo[j]!) && !this.unremoved.has(ids.idAt(j))) return true;
    return false;
  }

  /** What is in queue/ now: new messages are scheduled, vanished ones (queue rm) forgotten. */
  private async scan(): Promise<void> {
    const started = Date.now();
    // `queue retry` since the last look: the known messages are due when their state files say now.
    const stamp = await this.outbox.retriedAt();
    const retried = this.retrySeen !== undefined && stamp !== this.retrySeen;
    // `queue retry` after the key was fixed: every message is tried again, none held for the old refusal.
    if (retried) this.keyRefused.clear();
    this.retrySeen = stamp;
    const { ids, withState } = await this.outbox.listing();
    // A new message with a state file (held by its caller, or deferred by an earlier run) is due
    // when that says; one already known keeps the time this runner gave it.
    const listedAt = new Float64Array(ids.n);
    const moved: Array<[string, number]> = [];
    for (let j = 0, k = 0; j < ids.n && k < withState.n; j++) {
      const hi = ids.hi[j]!;
      const lo = ids.lo[j]!;
      while (k < withState.n && compareIds(withState.hi[k]!, withState.lo[k]!, hi, lo) < 0) k++;
      if (k >= withState.n || withState.hi[k] !== hi || withState.lo[k] !== lo) continue;
      const id = ids.idAt(j);
      if (this.due.knows(hi, lo)) {
        if ((retried || this.heldElsewhere.has(id)) && !this.inFlight.has(id) && !this.unremoved.has(id)) {
          const when = await this.stateTime(id);
          if (when !== undefined) moved.push([id, when]);
        }
        continue;
      }
      // A state file this runner cannot read (another user wrote it) makes the message due: its
      // attempt says why and tries again in a minute. Never a reason to stop delivering the rest.
      listedAt[j] = (await this.stateTime(id)) ?? 0;
      if (listedAt[j]! > Date.now()) this.heldElsewhere.add(id);
    }
    // Nothing awaited from here on: what the deliveries recorded meanwhile is not overwritten.
    this.due.replace(ids, listedAt, (id) => this.inFlight.has(id));
    for (const [id, when] of moved)
      if ((retried || this.heldElsewhere.has(id)) && !this.inFlight.has(id)) this.due.set(id, when);
    for (const id of this.unremoved) this.due.delete(id);
    this.lastScan = Date.now();
    // A big outbox is listed less often: at most a tenth of the time goes to listing it.
    this.scanEveryMs = Math.max(POLL_MS, 10 * (this.lastScan - started));
  }

  /** When a message's state file says it is due; undefined when it cannot be read. */
  private async stateTime(id: string): Promise<number | undefined> {
    try {
      return (await this.outbox.state(id)).nextAttemptAt;
    } catch {
      return undefined;
    }
  }

  private lastScan = 0;
  /** The retry stamp as the last scan saw it (undefined before the first). */
  private retrySeen: number | undefined;
  private scanEveryMs = POLL_MS;

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
    await this.scan();
    for (;;) {
      if (this.stopping) break;
      let id: string | undefined;
      while (running.size < lanes && (id = this.due.next(Date.now(), this.inFlight)) !== undefined) {
        const taken = id;
        this.inFlight.add(taken);
        const p: Promise<void> = this.attempt(taken).finally(() => {
          this.inFlight.delete(taken);
          running.delete(p);
          this.wake();
        });
        running.add(p);
      }
      const pending = this.due.earliest(this.inFlight);
      if (running.size === 0 && this.opts.mode === "due" && (pending === undefined || pending > Date.now())) break;
      if (running.size === 0 && this.opts.mode === "drain" && pending === undefined) {
        // Look once more: a writer that saw this runner's lock counted on it.
        await this.scan();
        if (this.due.earliest(this.inFlight) === undefined) break;
        continue;
      }
      const untilScan = this.opts.mode === "due" ? Infinity : this.lastScan + this.scanEveryMs - Date.now();
      const untilDue = pending === undefined ? Infinity : pending - Date.now();
      const wait = running.size >= lanes ? Math.max(0, untilScan) : Math.max(0, Math.min(untilScan, untilDue));
      if (wait > 0) await this.sleep(Math.min(wait, 60_000));
      if (this.opts.mode !== "due" && Date.now() - this.lastScan >= this.scanEveryMs) await this.scan();
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
    // From here on this runner keeps its schedule.
    this.heldElsewhere.delete(id);
    const queued = await this.loadDue(id);
    if (!queued) return;
    const maxAge = this.opts.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
    if (await this.waitsForRefusedKey(id, queued, maxAge)) return;
    const attempts = queued.state.attempts + 1;
    try {
      await this.deliver(id, queued, attempts);
    } catch (e) {
      // Stopped while waiting for the budget: nothing was tried, nothing to record.
      if (e instanceof WaitCut) return;
      await this.record(id, queued, attempts, toMailsendError(e), maxAge);
    }
  }

  /** The message when it is due now; else its place in the schedule is set and nothing is returned. */
  private async loadDue(id: string): Promise<QueuedMessage | undefined> {
    const { onEvent } = this.opts;
    let queued;
    try {
      queued = await this.outbox.load(id);
    } catch (e) {
      const err = toMailsendError(e);
      if (isDamagedFile(e)) {
        // It can never go as it is: failed/, with the reason, where `mailsend queue --failed` shows it; never sent cut.
        try {
          await this.outbox.fail(id, {
            attempts: 0,
            nextAttemptAt: 0,
            lastError: errorRecord(err),
            failedAt: Date.now(),
          });
          this.due.delete(id);
          this.summary.failed++;
          onEvent?.({ type: "failed", id, error: err, attempts: 0 });
          return undefined;
        } catch {}
      }
      onEvent?.({ type: "warning", id, message: err.message });
      this.due.set(id, Date.now() + 60_000);
      return undefined;
    }
    if (!queued) {
      this.due.delete(id);
      this.faulted.delete(id);
      return undefined;
    }
    if (queued.state.nextAttemptAt > Date.now()) {
      this.due.set(id, queued.state.nextAttemptAt);
      return undefined;
    }
    return queued;
  }

  /** Its profile's key was refused by this run: it waits with the message that found out, untried. */
  private async waitsForRefusedKey(id: string, { meta, state }: QueuedMessage, maxAge: number): Promise<boolean> {
    const refused = this.keyRefused.get(meta.profile ?? "");
    if (!(refused && refused.until > Date.now() && Date.now() - meta.createdAt <= maxAge)) return false;
    try {
      await this.outbox.setState(id, { ...state, nextAttemptAt: refused.until, lastError: errorRecord(refused.error) });
    } catch {}
    this.due.set(id, refused.until);
    this.summary.deferred++;
    this.opts.onEvent?.({
      type: "deferred",
      id,
      error: refused.error,
      nextAttemptAt: refused.until,
      attempts: state.attempts,
    });
    return true;
  }

  /** One try to send it; once accepted it leaves the outbox. Throws what the try ran into. */
  private async deliver(id: string, { meta, raw }: QueuedMessage, attempts: number): Promise<void> {
    const { onEvent } = this.opts;
    let message = await prepareMessage(raw, meta.envelope, meta.idempotencyKey, {
      stampedMessageId: meta.stampedMessageId === true,
      nullSender: meta.source === "notice",
    });
    const sender = await this.sender(meta.profile);
    // What `send --queue` queued goes as send chose; mail from other programs as the outbox chooses.
    let chosen;
    try {
      if (meta.source === "notice") ({ message, chosen } = chooseNotice(sender, message));
      else
        chosen =
          meta.source === "send" && (meta.transport === "rest" || meta.transport === "smtp")
            ? { transport: meta.transport, reason: "as send chose when it queued it" }
            : sender.choose(message);
    } catch (e) {
      // A channel it needs is configured wrongly: a setting to fix, it waits (choose says which).
      if ((e as { broken?: boolean }).broken) throw e;
      // No configured channel carries it whole: it waits in failed/ with the reason (never sent changed).
      throw Object.assign(toMailsendError(e), { permanent: true });
    }
    const result = await sender.send(message, chosen, {
      signal: this.stopController.signal,
      sleep: (ms) => abortableSleep(ms, this.waitsController.signal),
      slotClass: slotClassOf(meta.source, attempts),
    });
    // Accepted: from here on nothing may make it go out again except under its own key.
    this.due.delete(id);
    this.faulted.delete(id);
    this.summary.sent++;
    try {
      await this.outbox.remove(id);
    } catch (e) {
      this.unremoved.add(id);
      onEvent?.({
        type: "warning",
        id,
        message: `sent, but could not be removed from the outbox (${toMailsendError(e).message}); a later run resends it under the same idempotency key, which the service drops as a repeat`,
      });
    }
    onEvent?.({
      type: "sent",
      id,
      transport: result.transport,
      reason: chosen.reason,
      messageId: result.messageId,
      recipients: result.recipients,
      attempts,
    });
  }

  /** A failed try: deferred with its next time, or to failed/ (permanent, or too old). */
  private async record(
    id: string,
    queued: QueuedMessage,
    attempts: number,
    err: MailsendError,
    maxAge: number,
  ): Promise<void> {
    const { onEvent } = this.opts;
    const { meta } = queued;
    const next: OutboxState = {
      attempts,
      nextAttemptAt: 0,
      lastError: errorRecord(err),
      ...(queued.state.notices ? { notices: queued.state.notices } : {}),
    };
    // The attempt itself failed on this machine (the budget's state or lock cannot be written): the run's result.
    if ((err.exitClass === "cantcreat" || err.exitClass === "ioerr") && !this.faulted.has(id))
      this.faulted.set(id, err);
    const tooOld = Date.now() - meta.createdAt > maxAge;
    try {
      if (waitsInOutbox(err) && !tooOld && !(err as { permanent?: boolean }).permanent) {
        next.nextAttemptAt = Date.now() + retryDelayMs(attempts, err.retryAfter);
        if ((err.code === "auth_failed" || err.code === "key_revoked") && !err.local)
          this.keyRefused.set(meta.profile ?? "", { until: next.nextAttemptAt, error: err });
        const warning = this.noticeFor("delayed", id, queued, err, { attempts, maxAge, next });
        await this.outbox.setState(id, next);
        if (warning) await this.sendNotice(id, warning);
        this.due.set(id, next.nextAttemptAt);
        this.summary.deferred++;
        onEvent?.({ type: "deferred", id, error: err, nextAttemptAt: next.nextAttemptAt, attempts });
      } else {
        const expired = tooOld && waitsInOutbox(err);
        const final = expired
          ? new MailsendError(
              err.code,
              `${err.message} (given up after ${Math.round(maxAge / 3600_000)} h in the outbox)`,
              { cause: err },
            )
          : err;
        const notice = this.noticeFor("failed", id, queued, final, { attempts, maxAge, next, tooOld: expired });
        await this.outbox.fail(id, { ...next, lastError: errorRecord(final), failedAt: Date.now() });
        if (notice) await this.sendNotice(id, notice);
        this.due.delete(id);
        this.summary.failed++;
        onEvent?.({ type: "failed", id, error: final, attempts });
      }
    } catch (bookkeeping) {
      // The state could not be written (a full disk): the message stays as it was, tried again later.
      this.due.set(id, Date.now() + 60_000);
      const fault = toMailsendError(bookkeeping);
      this.summary.deferred++;
      if (!this.faulted.has(id)) this.faulted.set(id, fault);
      onEvent?.({
        type: "warning",
        id,
        message: `not delivered (${err.message}), and the attempt could not be recorded: ${fault.message}; it stays queued`,
      });
    }
  }

  /**
   * The notice this failed try calls for, marked in `next` (the state about to be written): the
   * mark is on disk before the notice is queued, so a crash between the two loses the notice
   * rather than sending it twice. A bad notice setting is said, and costs the notice only.
   */
  private noticeFor(
    kind: NoticeKind,
    id: string,
    queued: QueuedMessage,
    err: MailsendError,
    o: { attempts: number; maxAge: number; next: OutboxState; tooOld?: boolean },
  ): PlannedNotice | undefined {
    let planned: PlannedNotice | undefined;
    try {
      planned = planNotice(kind, queued, err, {
        env: this.opts.env,
        maxAgeMs: o.maxAge,
        attempts: o.attempts,
        ...(o.tooOld ? { tooOld: true } : {}),
      });
    } catch (e) {
      this.opts.onEvent?.({
        type: "warning",
        id,
        message: `no ${kind === "failed" ? "notice" : "delay warning"} was queued to its sender: ${toMailsendError(e).message}`,
      });
      return undefined;
    }
    if (planned) o.next.notices = { ...o.next.notices, [kind]: Date.now() };
    return planned;
  }

  /** Into the outbox, and due in this run; a failure to queue it is said, never the original's fault. */
  private async sendNotice(id: string, notice: PlannedNotice): Promise<void> {
    try {
      const noticeId = await queueNotice(this.outbox, notice);
      this.due.set(noticeId, Date.now());
      this.opts.onEvent?.({ type: "notice", id, noticeId, to: notice.envelope.to });
    } catch (e) {
      this.opts.onEvent?.({
        type: "warning",
        id,
        message: `the notice to ${notice.envelope.to.join(", ")} could not be queued: ${toMailsendError(e).message}`,
      });
    }
  }
}
