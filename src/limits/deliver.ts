/**
 * One logical message through the shared budget and the retry policy:
 * take a slot (waiting if the window is full), send, and on failure either
 * give up or wait and try again with the same idempotency key.
 */
import { MailsendError, said, toMailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import type { SendContext, SendResult, Transport } from "../core/transport.js";
import { type AttemptDeadline, attemptDeadline } from "./deadline.js";
import { backoffMs, shouldRetry } from "./retry.js";
import type { Limits, SlotClass } from "./sliding-log.js";
import { monotonicMs, type SlotStore } from "./store.js";

/** The least time before the deadline a retry must have left to start (or twice the last attempt's). */
const RETRY_ROOM_MS = 250;

export interface WaitInfo {
  reason: "budget" | "retry";
  ms: number;
  /** The attempt about to be made (1 = first). */
  attempt: number;
  error?: MailsendError;
}

export interface DeliverOptions {
  /** The shared budget; none when the local limit is switched off. */
  store?: SlotStore;
  limits: Limits;
  /** Bulk waits for room beyond the budget's reserve; urgent (the default) takes any free slot. */
  slotClass?: SlotClass;
  /** Retries after the first attempt. */
  retries: number;
  /** Longest total time to spend waiting (for slots and between retries). */
  maxWaitMs: number;
  /** Fail at once instead of waiting for a slot. */
  noWait: boolean;
  /**
   * Longest time for the attempts and the waits between them, counted from
   * the first attempt; an attempt still running then is stopped. The waits
   * for a rate-limit slot are not counted (maxWaitMs bounds those). 0 or
   * absent: no deadline.
   */
  deadlineMs?: number;
  onWait?: (info: WaitInfo) => void;
  /**
   * Something the user should hear that does not stop the send: a damaged
   * budget state, or a failure to record a send the service accepted (the
   * message was sent: that is never an error). Also in the result's `warnings`.
   */
  onWarning?: (text: string) => void;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  signal?: AbortSignal;
  trace?: SendContext["trace"];
}

/**
 * A wait that ends at once on an abort (also one that came before), failing with what the signal
 * was aborted with: the caller's own reason (an interruption's error, the runner's WaitCut), not
 * the AbortError that wraps it.
 */
export const abortableSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  process
    .getBuiltinModule("node:timers/promises")
    .setTimeout(ms, undefined, signal ? { signal } : {})
    .catch((e: unknown) => {
      throw signal?.aborted ? signal.reason : e;
    });

/** Errors raised before anything reached the service: the slot was not used. */
function neverReached(e: MailsendError): boolean {
  if (e.mayHaveBeenSent) return false;
  return [
    "connection_failed",
    "timeout",
    "tls_mismatch",
    "tls_untrusted",
    "config_invalid",
    "config_missing",
    "file_unreadable",
    "file_not_found",
  ].includes(e.code);
}

/** Whether a resend of this message would be recognised as the same message by the service. */
export function carriesIdempotencyKey(m: Message): boolean {
  if (!m.raw) return true;
  const head =
    m.raw
      .subarray(0, Math.min(m.raw.length, 64 * 1024))
      .toString("latin1")
      .split(/\r?\n\r?\n/)[0] ?? "";
  return /^x-idempotency-key:/im.test(head);
}

function withAttempts(e: MailsendError, attempts: number): MailsendError {
  e.attempts = attempts;
  return e;
}

let counter = 0;
function slotId(): string {
  return `${process.pid}-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Waits so far: `ms` as asked for (checked against --max-wait), `actualMs` as they took. */
interface Waited {
  ms: number;
  actualMs: number;
}

/** Failures of the budget's store itself (Redis gone or silent, the state file unwritable), before anything was sent. */
const storeFailures = new WeakSet<object>();

/**
 * Whether deliver() failed because the rate-limit budget could not be asked for a slot: nothing
 * was sent, and the next message would fail the same way (a batch stops starting items on it).
 */
export function isBudgetStoreFailure(e: unknown): boolean {
  return typeof e === "object" && e !== null && storeFailures.has(e);
}

/** Transport.prepare is best effort: whatever it meets, the send itself goes on as ever. */
function prepareQuietly(transport: Transport, message: Message): void {
  try {
    transport.prepare?.(message);
  } catch {}
}

/** How long before its slot frees a waiting send is made ready (Transport.prepare): a connection's set-up, with room. */
const PREPARE_LEAD_MS = 150;

async function takeSlot(
  store: SlotStore,
  opts: DeliverOptions,
  attempt: number,
  waited: Waited,
  prepare?: () => void,
): Promise<string> {
  const sleep = opts.sleep ?? abortableSleep;
  const id = slotId();
  for (let round = 0; round < 10_000; round++) {
    let r: Awaited<ReturnType<SlotStore["tryTake"]>>;
    try {
      r = await store.tryTake(id, opts.limits, opts.slotClass ?? "urgent");
    } catch (e) {
      if (typeof e === "object" && e !== null) storeFailures.add(e);
      throw e;
    }
    if (r.ok) return id;
    const seconds = Math.ceil(r.waitMs / 1000);
    if (opts.noWait) {
      throw new MailsendError(
        "rate_limited",
        `the rate limit of ${opts.limits.limit} per ${opts.limits.windowMs / 1000} s for this key is used up; the next slot frees in ${seconds} s`,
        {
          retryAfter: seconds,
          hint: (s) => `Without ${s.flag("noWait")}, mailsend waits for the slot.`,
        },
      );
    }
    if (waited.ms + r.waitMs > opts.maxWaitMs) {
      throw new MailsendError(
        "rate_limited",
        (s) =>
          `the rate limit for this key is used up and the next slot frees in ${seconds} s, beyond ${s.flag("maxWait")} (${Math.round(opts.maxWaitMs / 1000)} s)`,
        {
          retryAfter: seconds,
          hint: (s) =>
            `Raise ${s.flag("maxWait")} (now ${Math.round(opts.maxWaitMs / 1000)} s), or try again in ${seconds} s. Nothing was sent.`,
        },
      );
    }
    opts.onWait?.({ reason: "budget", ms: r.waitMs, attempt });
    const before = Date.now();
    // Shortly before the slot frees, the send is made ready (its connection open), so its request
    // reaches the service as the slot frees rather than a start-up and a connection later: every
    // later window of the service's log repeats that delay (bench/budget-share.mjs).
    const early = prepare && r.waitMs > PREPARE_LEAD_MS ? setTimeout(prepare, r.waitMs - PREPARE_LEAD_MS) : undefined;
    if (prepare && !early) prepare();
    try {
      await sleep(r.waitMs, opts.signal);
    } finally {
      clearTimeout(early);
    }
    waited.ms += r.waitMs;
    waited.actualMs += Date.now() - before;
  }
  throw new MailsendError("internal", "gave up waiting for a rate-limit slot");
}

/** An attempt stopped by the deadline: "outcome unknown" stays so; anything else is a timeout. */
function overDeadline(err: MailsendError, deadlineMs: number, attempt: number): MailsendError {
  const s = Math.round(deadlineMs / 1000);
  if (err.mayHaveBeenSent || err.code === "outcome_unknown") {
    return new MailsendError(
      "outcome_unknown",
      (say) => `${said(err.messageWords, say.front)} (stopped at the ${s} s deadline)`,
      { cause: err, mayHaveBeenSent: true, ...(err.hintWords ? { hint: err.hintWords } : {}) },
    );
  }
  return new MailsendError("timeout", `no delivery within the ${s} s deadline (attempt ${attempt} was still running)`, {
    cause: err,
    hint: (say) =>
      `Nothing was sent. The service or the network is slow or stuck; try again later, or raise ${say.flag("deadline")}.`,
  });
}

const mayHaveGone = (e: MailsendError) => e.mayHaveBeenSent === true || e.code === "outcome_unknown";

/**
 * The doubt an attempt's failure carries: its own, or (a transport's repeat after a broken
 * connection that was told to wait: a 429 keeps its code and Retry-After) its cause's.
 */
function doubtOf(e: MailsendError): MailsendError | undefined {
  if (mayHaveGone(e)) return e;
  return e.cause instanceof MailsendError && mayHaveGone(e.cause) ? e.cause : undefined;
}

/** Failures that refuse the message itself (invalid, too large, its recipients). */
const REFUSES_THE_MESSAGE = new Set<string>(["dataerr", "nouser", "usage"]);

/**
 * The failure to report once an earlier attempt may have handed the message over: a later
 * attempt that could not reach the service, was told to wait (429, 5xx, SMTP 4xx), ran out of
 * time, was interrupted, or met a 403/404 (a proxy or load balancer in an outage says those too)
 * says nothing of that one, so the outcome stays unknown (exit 76, with the key that makes a
 * resend safe), never "nothing was sent". A refusal of the message itself (invalid, too large, a
 * recipient refused) stands: the service answers a repeat of a message it took, with the same
 * idempotency key, as it answered the first.
 */
function stillInDoubt(err: MailsendError, doubt: MailsendError | undefined): MailsendError {
  if (!doubt || mayHaveGone(err) || REFUSES_THE_MESSAGE.has(err.exitClass)) return err;
  const failed = new MailsendError(
    "outcome_unknown",
    (s) =>
      `${said(doubt.messageWords, s.front)}; ${err.attempts !== undefined ? `attempt ${err.attempts} failed too` : "then"}: ${said(err.messageWords, s.front)}`,
    {
      cause: err,
      mayHaveBeenSent: true,
      ...(doubt.hintWords ? { hint: doubt.hintWords } : {}),
    },
  );
  if (err.attempts !== undefined) failed.attempts = err.attempts;
  return failed;
}

/** What book-keeping that failed is, in words: its own message when it is ours (a local file fault names path and errno). */
function bookkeepingFailure(e: unknown): string {
  return e instanceof MailsendError ? e.message : e instanceof Error ? e.message : String(e);
}

/** One deliver() call's running state: what its attempts share, and the steps each one takes. */
class Delivery {
  readonly warnings: string[] = [];
  readonly waited: Waited = { ms: 0, actualMs: 0 };
  readonly idempotent: boolean;
  readonly deadlineMs: number;
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Time spent in attempts and in the waits between them: what the deadline bounds. */
  spentMs = 0;
  /** The first attempt that may have handed the message over: later failures do not undo it. */
  doubt: MailsendError | undefined;

  constructor(
    readonly transport: Transport,
    readonly message: Message,
    readonly opts: DeliverOptions,
  ) {
    this.sleep = opts.sleep ?? abortableSleep;
    this.idempotent = carriesIdempotencyKey(message);
    this.deadlineMs = opts.deadlineMs || Infinity;
  }

  warn(text: string): void {
    this.warnings.push(text);
    this.opts.onWarning?.(text);
  }

  storeWarnings(): void {
    for (const w of this.opts.store?.takeWarnings?.() ?? []) this.warn(w);
  }

  /** Book-keeping in the budget: the send's own failure is what to report, so one that fails is said beside it. */
  async keepBooks(what: string, op: () => Promise<void>): Promise<void> {
    try {
      await op();
    } catch (e) {
      this.warn(`${what} failed: ${bookkeepingFailure(e)}`);
    }
    this.storeWarnings();
  }

  /** A slot in the shared budget for this attempt, waiting for one if need be; none without a budget. */
  async slot(attempt: number): Promise<string | undefined> {
    const { transport, message, opts } = this;
    try {
      return opts.store
        ? await takeSlot(
            opts.store,
            opts,
            attempt,
            this.waited,
            transport.prepare ? () => prepareQuietly(transport, message) : undefined,
          )
        : undefined;
    } finally {
      this.storeWarnings();
    }
  }

  /**
   * The attempt's deadline, what is left of the whole. The caller's signal ends the attempt too:
   * the deadline's signal follows it (no AbortSignal.any, which makes a composite signal with weak
   * references per attempt).
   */
  attemptDeadline(): AttemptDeadline | undefined {
    return this.deadlineMs < Infinity
      ? attemptDeadline(Math.max(0, this.deadlineMs - this.spentMs), this.opts.signal)
      : undefined;
  }

  /** One send; once accepted, its slot recorded and the result counting this delivery's attempts and waits. */
  async send(attempt: number, id: string | undefined, deadline: AttemptDeadline | undefined): Promise<SendResult> {
    const { opts } = this;
    /** When the service's answer began to arrive, where the transport says (SendContext.answered). */
    let answeredAt: number | undefined;
    let result: SendResult;
    try {
      // Built field by field: conditional spreads cost a batch a slow object copy per attempt.
      const ctx: SendContext = {};
      if (id) ctx.answered = () => (answeredAt ??= monotonicMs());
      if (opts.trace) ctx.trace = opts.trace;
      const signal = deadline ? deadline.signal : opts.signal;
      if (signal) ctx.signal = signal;
      if (deadline) ctx.deadline = deadline.signal;
      result = await this.transport.send(this.message, ctx);
    } finally {
      deadline?.release();
    }
    const answered = answeredAt ?? monotonicMs();
    // Accepted: from here on nothing is an error. A send reported failed would be sent again.
    if (id) {
      try {
        // The slot counts from the answer, not from when its record got the lock.
        await opts.store!.complete(id, opts.limits, () => monotonicMs() - answered);
      } catch (e) {
        this.warn(
          `the message was sent, but recording it in the rate-limit budget failed: ${bookkeepingFailure(e)}. Do not send it again; later sends may go out a little early for this one window.`,
        );
      }
      this.storeWarnings();
    }
    const delivered: SendResult = { ...result, attempts: attempt, waitedMs: this.waited.actualMs };
    if (this.warnings.length) delivered.warnings = [...(result.warnings ?? []), ...this.warnings];
    return delivered;
  }

  /** An attempt's failure as it is to be reported, noting the first doubt it raises. */
  failure(e: unknown, deadline: AttemptDeadline | undefined, attempt: number): MailsendError {
    let err = toMailsendError(e);
    if (deadline?.signal.aborted && !this.opts.signal?.aborted) err = overDeadline(err, this.deadlineMs, attempt);
    this.doubt ??= doubtOf(err);
    return err;
  }

  /** A failed attempt's slot: given back when the service cannot have counted it, else counted. */
  async settleSlot(id: string, err: MailsendError): Promise<void> {
    const { opts } = this;
    // Stopped by the caller before the message was handed over: the service counted nothing either.
    if (neverReached(err) || (opts.signal?.aborted === true && !mayHaveGone(err)))
      await this.keepBooks("giving back the rate-limit slot", () => opts.store!.release(id, opts.limits));
    else
      await this.keepBooks("recording the attempt in the rate-limit budget", () =>
        opts.store!.complete(id, opts.limits),
      );
  }

  /** After a failed attempt that started at `started`: waits for the next one, or throws `err` when there is to be none. */
  async waitToRetry(err: MailsendError, attempt: number, started: number): Promise<void> {
    const { opts, deadlineMs, waited } = this;
    const delay = backoffMs(attempt, err);
    // The service's own "wait for the rate limit" (429, SMTP 421 for rate) is a wait for a slot:
    // --no-wait refuses it, --max-wait alone bounds it (not --deadline), as for the local budget.
    const slotWait = err.code === "rate_limited";
    // Refused for rate: every process of this key holds back, not only this one.
    if (slotWait && opts.store)
      await this.keepBooks("recording the service's rate-limit wait", () => opts.store!.block(delay, opts.limits));
    // Stopped by the caller: no retry, and no wait said for one.
    if (opts.signal?.aborted || attempt > opts.retries || !shouldRetry(err, this.idempotent))
      throw withAttempts(err, attempt);
    if (slotWait && opts.noWait) throw withAttempts(err, attempt);
    if (waited.ms + delay > opts.maxWaitMs) throw withAttempts(err, attempt);
    const tookMs = Date.now() - started;
    this.spentMs += tookMs;
    // A retry must have room to finish: one cut at the deadline after its request went out turns
    // a clean "nothing was sent" into an outcome unknown. Once the outcome is unknown already,
    // only a retry under the same key can settle it: then any time before the deadline will do.
    // An attempt that got no answer (a timeout, no connection) says nothing of a round trip's
    // time, and a retry cut before its request goes out is harmless: the floor alone then.
    const room = this.doubt
      ? 0
      : err.code === "timeout" || err.code === "connection_failed"
        ? RETRY_ROOM_MS
        : Math.max(RETRY_ROOM_MS, 2 * tookMs);
    if (!slotWait && this.spentMs + delay + room >= deadlineMs) {
      opts.trace?.(`* no retry: it could not finish before the ${Math.round(deadlineMs / 1000)} s deadline`);
      throw withAttempts(err, attempt);
    }
    opts.onWait?.({ reason: "retry", ms: delay, attempt: attempt + 1, error: err });
    const before = Date.now();
    await this.sleep(delay, opts.signal);
    waited.ms += delay;
    waited.actualMs += Date.now() - before;
    if (!slotWait) this.spentMs += Date.now() - before;
  }
}

export async function deliver(transport: Transport, message: Message, opts: DeliverOptions): Promise<SendResult> {
  const run = new Delivery(transport, message, opts);
  try {
    for (let attempt = 1; ; attempt++) {
      const id = await run.slot(attempt);
      const started = Date.now();
      const deadline = run.attemptDeadline();
      try {
        return await run.send(attempt, id, deadline);
      } catch (e) {
        const err = run.failure(e, deadline, attempt);
        if (id) await run.settleSlot(id, err);
        await run.waitToRetry(err, attempt, started);
      } finally {
        deadline?.release();
      }
    }
  } catch (e) {
    // Not ours to change: a caller's own stop (the runner's WaitCut) goes through as it is.
    if (!run.doubt || !(e instanceof MailsendError)) throw e;
    throw stillInDoubt(e, run.doubt);
  }
}
