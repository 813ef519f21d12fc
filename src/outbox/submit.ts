/**
 * Mail handed over by another program (sendmail, `send --queue`): delivered
 * at once when that is quick, else kept in the outbox and delivered later.
 * The message is on disk before the attempt, held for that attempt, so a
 * crash in the middle loses nothing and a later delivery carries the same
 * idempotency key.
 */
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const randomUUID = () => process.getBuiltinModule("node:crypto").randomUUID();
import { MailsendError, exitCodeFor, toMailsendError } from "../core/errors.js";
import { checkWireSize, maxMessageSize } from "../core/size.js";
import type { SendResult, TransportName } from "../core/transport.js";
import { OutboxSender, isTemporary, type Chosen } from "./deliver.js";
import { prepareMessage } from "./message.js";
import { retryDelayMs } from "./runner.js";
import { runnerHoldsOutbox } from "./runner-lock.js";
import { autorunOff, kickRunner } from "./spawn.js";
import { Outbox, type AddInput } from "./store.js";
import type { Envelope, QueueMode } from "../core/envelope.js";
import type { OutboxMeta } from "./types.js";
import type { Env } from "../core/env.js";
import type { Message } from "../core/message.js";

export type SubmitResult =
  | { status: "sent"; result: SendResult; chosen: Chosen }
  | { status: "queued"; id: string; reason: string; log?: string };

export interface SubmitOptions {
  mode: QueueMode;
  env: Env;
  source: OutboxMeta["source"];
  profile?: string;
  trace?: (line: string) => void;
  /** How long the at-once attempt may wait for the budget before the message is queued instead (ms). */
  quickWaitMs?: number;
  /** How long the at-once attempt may take (ms). */
  quickDeadlineMs?: number;
  /**
   * `send --queue`: the transport send chose, kept with the message (send's
   * own rules apply, e.g. a text body as <pre> over REST), and its key.
   */
  transport?: TransportName;
  idempotencyKey?: string;
  /** The Message-ID was added by mailsend (sendmail's fix-up), not written by the program. */
  stampedMessageId?: boolean;
  /**
   * Ends the at-once attempt (submitStoppable: SIGTERM, SIGINT, SIGHUP): the message, already in
   * the outbox, is then queued for a runner, as after any temporary failure.
   */
  signal?: AbortSignal;
}

/**
 * submit() with SIGTERM, SIGINT and SIGHUP ending its at-once attempt (sendmail, send --queue): a
 * caller stopped then (a cron job's timeout, systemd stopping a unit, Ctrl-C) leaves the message
 * queued and a runner started, not killed with it in the outbox under a hold nobody will end.
 * The signals are given back when it returns.
 */
export async function submitStoppable(
  raw: Buffer,
  envelope: Envelope,
  opts: Omit<SubmitOptions, "signal">,
): Promise<SubmitResult> {
  const controller = new AbortController();
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  const onSignal = () => controller.abort(new MailsendError("temporary_failure", "interrupted by a signal"));
  for (const s of signals) process.on(s, onSignal);
  try {
    return await submit(raw, envelope, { ...opts, signal: controller.signal });
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
}

/**
 * After a send of its own, a sendmail looks whether mail someone else left is due with no runner
 * to deliver it (a sendmail killed -9 during its attempt: its hold ran out, and nothing queued
 * since to start a runner), and starts one. One listing of queue/, usually empty.
 */
async function kickIfDue(env: Env, outbox: Outbox): Promise<void> {
  const ids = await outbox.ids("queue").catch(() => [] as string[]);
  if (ids.length === 0 || autorunOff(env) || runnerHoldsOutbox(outbox)) return;
  const now = Date.now();
  for (const id of ids.slice(0, 64)) {
    const state = await outbox.state(id).catch(() => undefined);
    if (!state || state.nextAttemptAt > now) continue;
    // Delivered and being removed by another sendmail as we look (its .state goes after its .msg,
    // and a missing state reads as due): only a message still there counts.
    if ((await outbox.meta(id).catch(() => undefined)) === undefined) continue;
    await kickRunner(env, outbox);
    return;
  }
}

export function queueModeFrom(flag: string | undefined, env: Env): QueueMode {
  const v = (flag ?? env.MAILSEND_QUEUE ?? "auto").trim();
  if (v === "auto" || v === "always" || v === "never") return v;
  throw new MailsendError("usage", `--queue must be auto, always or never, got ${JSON.stringify(v)}`);
}

const HOLD_MS = 120_000;

export async function submit(raw: Buffer, envelope: Envelope, opts: SubmitOptions): Promise<SubmitResult> {
  const key = opts.idempotencyKey ?? randomUUID();
  // Bad input is refused before anything is queued; a message too large is measured as it goes
  // out (CRLF line ends), not as piped (LF), or it would be queued only to be refused (552) later.
  checkWireSize(raw, maxMessageSize(opts.env));
  const message = await prepareMessage(raw, envelope, key, { stampedMessageId: opts.stampedMessageId ?? false });
  const outbox = Outbox.fromEnv(opts.env);
  const quickWaitMs = opts.quickWaitMs ?? 3_000;
  const deadlineMs = opts.quickDeadlineMs ?? 15_000;
  // No key, no base URL: a configuration error now, not mail that can never leave.
  const sender = await OutboxSender.open(opts.env, opts.profile, {
    retries: opts.mode === "never" ? 3 : 0,
    maxWaitMs: opts.mode === "never" ? 300_000 : quickWaitMs,
    deadlineMs: opts.mode === "never" ? 60_000 : deadlineMs,
    ...(opts.trace ? { trace: opts.trace } : {}),
  });
  try {
    const chosen = opts.transport
      ? { transport: opts.transport, reason: `--transport ${opts.transport}` }
      : sender.choose(message);
    opts.trace?.(`* over ${chosen.transport}: ${chosen.reason}`);
    const stoppable = opts.signal ? { signal: opts.signal } : {};
    if (opts.mode === "never") return { status: "sent", result: await sender.send(message, chosen, stoppable), chosen };
    const add = (holdUntil?: number) =>
      outbox.add({ ...entryOf(raw, envelope, key, message, opts), ...(holdUntil ? { holdUntil } : {}) });
    if (opts.mode === "always") {
      const id = await add();
      const log = await kickRunner(opts.env, outbox);
      return { status: "queued", id, reason: "--queue always", ...(log ? { log } : {}) };
    }
    const id = await add(Date.now() + HOLD_MS);
    try {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const result = await sender.send(message, chosen, stoppable);
      try {
        await outbox.remove(id);
      } catch {
        // Sent; the copy left behind goes again under the same key, which the service drops.
      }
      await kickIfDue(opts.env, outbox);
      return { status: "sent", result, chosen };
    } catch (e) {
      const err = toMailsendError(e);
      if (!isTemporary(err)) {
        await outbox.remove(id).catch(() => {});
        throw err;
      }
      return await leaveForRunner(outbox, id, err, opts.env);
    }
  } finally {
    await sender.close();
  }
}

/** What the outbox keeps of a submitted message: the bytes, the envelope, and what a listing shows. */
function entryOf(raw: Buffer, envelope: Envelope, key: string, message: Message, opts: SubmitOptions): AddInput {
  return {
    raw,
    envelope,
    idempotencyKey: key,
    source: opts.source,
    ...(opts.profile ? { profile: opts.profile } : {}),
    ...(opts.transport ? { transport: opts.transport } : {}),
    subject: message.subject,
    ...(opts.stampedMessageId ? { stampedMessageId: true } : {}),
    headerFrom: message.from.name ? `${message.from.name} <${message.from.address}>` : message.from.address,
  };
}

/** The at-once attempt failed for now: the message, already in the outbox, is due for a runner when the service allows. */
async function leaveForRunner(outbox: Outbox, id: string, err: MailsendError, env: Env): Promise<SubmitResult> {
  await outbox
    .setState(id, {
      attempts: 1,
      nextAttemptAt:
        Date.now() + (err.code === "rate_limited" ? (err.retryAfter ?? 1) * 1000 : retryDelayMs(1, err.retryAfter)),
      lastError: { code: err.code, message: err.message, exit: exitCodeFor(err.code), at: Date.now() },
    })
    .catch(() => {});
  const log = await kickRunner(env, outbox);
  // Said to callers that know nothing of send's flags (sendmail, cron): what happened, in its own words.
  const reason =
    err.code === "rate_limited"
      ? `the rate limit for this key is reached${err.retryAfter !== undefined ? `; the next slot frees in ${err.retryAfter} s` : ""}`
      : err.message;
  return { status: "queued", id, reason, ...(log ? { log } : {}) };
}
