/**
 * The batch: a first pass validates every row (so bad rows are listed
 * before anything is sent, and --check can stop there), a second pass sends
 * the good ones, N at a time, through the shared budget, with each item's
 * state in the journal before and after its send. Rows are streamed in both
 * passes: memory does not grow with the input.
 */
import { commaSplitNameFix, parseAddressValues } from "../core/address.js";
import { EXIT, MailsendError, toMailsendError, worstExitClass, type ExitClass } from "../core/errors.js";
import type { Message } from "../core/message.js";
import { allRecipients } from "../core/message.js";
import type { TransportName, Transport } from "../core/transport.js";
import { deliver, type DeliverOptions } from "../limits/deliver.js";
import { AttachmentCache, FieldClashes, messageOfRow, type RowDefaults } from "./item.js";
import type { Journal } from "./journal.js";
import { rowsOf, type Format, type Row } from "./rows.js";

export interface BatchInput {
  /** Called once per pass: the input must be readable twice (stdin is spooled to a file first). */
  open(): AsyncIterable<Buffer>;
  format: Format;
}

/** "partial": sent, but some recipients were refused (SMTP); never resent. */
export type ItemStatus = "sent" | "partial" | "failed" | "invalid" | "skipped" | "unknown";

export interface ItemResult {
  index: number;
  line: number;
  recipients: string[];
  status: ItemStatus;
  message_id?: string;
  attempts?: number;
  idempotency_key?: string;
  /** "partial": the recipients the server refused, with its reply. */
  refused?: Array<{ address: string; reply: string }>;
  /** Sent, but recording it (journal, budget) failed: said, never a reason to send it again. */
  warnings?: string[];
  error?: { code: string; message: string; exit: number; class: ExitClass; hint?: string };
}

export interface Counts {
  total: number;
  sent: number;
  failed: number;
  invalid: number;
  skipped: number;
  unknown: number;
  /** Of those sent, the messages some recipients of which were refused (status "partial"). */
  partial: number;
}

export interface BatchSummary extends Counts {
  exitCode: number;
  elapsedMs: number;
}

export interface BatchOptions {
  input: BatchInput;
  defaults: RowDefaults;
  transportName: TransportName;
  /** Absent with --check. */
  transport?: Transport;
  deliver: Omit<DeliverOptions, "signal">;
  concurrency: number;
  check: boolean;
  failFast: boolean;
  journal?: Journal;
  onResult: (r: ItemResult) => void;
  onProgress?: (c: Counts & { left: number }) => void;
  /**
   * Something the user should know: about the input as a whole, said once
   * before anything is sent; or, as it happens, book-keeping that failed for
   * an item the service accepted (the item stays "sent").
   */
  onWarning?: (text: string) => void;
  /**
   * Stop: start nothing more (no new item, no retry, no wait for a slot);
   * the sends in flight finish, so a stop does not make items "in doubt".
   */
  signal?: AbortSignal;
  /** Abort the sends in flight too (a second interrupt). */
  abortSends?: AbortSignal;
}

/** Errors that only say "the batch was stopped here", not how the item's last attempt went. */
const interruptions = new WeakSet<MailsendError>();

function interrupted(): MailsendError {
  const e = new MailsendError("temporary_failure", "interrupted before it was sent", {
    hint: "Nothing was sent for this item; run the same command again to send it.",
  });
  interruptions.add(e);
  return e;
}

/**
 * deliver()'s waits (for a slot, between retries): they end at once when the
 * batch is stopped, also when it was stopped before the wait began, and leave
 * no listener on the shared signal (one per wait would pile up over a batch).
 */
function stoppableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(interrupted());
    const onAbort = () => {
      clearTimeout(timer);
      reject(interrupted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Per message: the attempts made, how the last one failed, and the failure that left it in doubt, if any. */
type Tries = WeakMap<Message, { attempts: number; error?: MailsendError; doubt?: MailsendError }>;

const inDoubt = (e: MailsendError) => e.mayHaveBeenSent || e.code === "outcome_unknown";

/**
 * The transport as deliver() sees it: no attempt starts once stopped; a send
 * in flight ends only on abortSends. It notes each message's last failure:
 * a stop during the wait before a retry must report that failure (it may be
 * "outcome unknown"), not "interrupted before it was sent".
 */
function stoppable(t: Transport, stop: AbortSignal | undefined, abort: AbortSignal | undefined, tries: Tries): Transport {
  return {
    name: t.name,
    preview: (m, sink, o) => t.preview(m, sink, o),
    close: () => t.close(),
    async send(m, ctx = {}) {
      if (stop?.aborted) throw interrupted();
      const mine = tries.get(m) ?? { attempts: 0 };
      tries.set(m, mine);
      mine.attempts++;
      // The batch's stop signal is not passed on (a send in flight finishes); abortSends and the deadline are.
      const { signal: _stop, ...rest } = ctx;
      const ends = either(abort, ctx.deadline);
      try {
        return await t.send(m, { ...rest, ...(ends.signal ? { signal: ends.signal } : {}) });
      } catch (e) {
        mine.error = toMailsendError(e);
        if (inDoubt(mine.error)) mine.doubt ??= mine.error;
        throw e;
      } finally {
        ends.done();
      }
    },
  };
}

const nothing = () => {};

/**
 * A signal that aborts when either does, and `done` to let go of it. Made by
 * hand, with a listener on each taken off when the send ends: AbortSignal.any
 * costs a batch several times as much per message (weak references and a
 * finalization registry for every signal it makes).
 */
function either(a: AbortSignal | undefined, b: AbortSignal | undefined): { signal?: AbortSignal; done: () => void } {
  if (!a || !b) {
    const one = a ?? b;
    return one ? { signal: one, done: nothing } : { done: nothing };
  }
  if (a.aborted || b.aborted) return { signal: a.aborted ? a : b, done: nothing };
  const both = new AbortController();
  const onA = () => both.abort(a.reason);
  const onB = () => both.abort(b.reason);
  a.addEventListener("abort", onA, { once: true });
  b.addEventListener("abort", onB, { once: true });
  return {
    signal: both.signal,
    done: () => {
      a.removeEventListener("abort", onA);
      b.removeEventListener("abort", onB);
    },
  };
}

function errorOf(e: MailsendError): NonNullable<ItemResult["error"]> {
  // A row that cannot be a message is bad data, whatever the flag-level code would be.
  const err = e.code === "usage" ? new MailsendError("invalid_message", e.message) : e;
  return { code: err.code, message: err.message, exit: err.exitCode, class: err.exitClass, ...(e.hint ? { hint: e.hint } : {}) };
}

/** A CSV cell holding `"Doe, Jane" <jane@example.com>` has its quotes doubled, and the cell quoted. */
function csvHint(data: Record<string, unknown>, hint: string | undefined): string | undefined {
  for (const field of ["to", "cc", "bcc", "reply_to", "from"]) {
    const v = data[field];
    const fix = typeof v === "string" ? commaSplitNameFix(v) : undefined;
    if (fix !== undefined) return `${hint ?? ""} In a CSV cell the quotes are doubled and the cell quoted: "${fix.replace(/"/g, '""')}".`.trim();
  }
  return hint;
}

async function build(row: Row, opts: BatchOptions, cache: AttachmentCache, key: string): Promise<Message> {
  if (row.error) throw row.error;
  try {
    return await messageOfRow(row.data!, { defaults: opts.defaults, transport: opts.transportName, cache, idempotencyKey: key });
  } catch (e) {
    const err = toMailsendError(e);
    const hint = opts.input.format === "csv" && err.code === "invalid_address" ? csvHint(row.data!, err.hint) : err.hint;
    throw new MailsendError(err.code === "usage" ? "invalid_message" : err.code, `row ${row.index + 1} (line ${row.line}): ${err.message}`, {
      ...(hint ? { hint } : {}),
    });
  }
}

/**
 * The row's recipients for a result that has no message to take them from
 * (invalid, or sent by an earlier run): its to, cc and bcc parsed as a send
 * parses them, so a skipped item names the addresses its first run named;
 * the raw text when they do not parse.
 */
function recipientsOf(row: Row): string[] {
  const raw = (["to", "cc", "bcc"] as const).flatMap((f) => {
    const v = row.data?.[f];
    if (typeof v === "string") return v === "" ? [] : [v];
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  });
  try {
    return parseAddressValues(raw, "to").map((m) => m.address);
  } catch {
    return raw;
  }
}

/**
 * Messages built in pass 1 are kept for pass 2 up to about this many bytes,
 * so a batch of ordinary size is built once; beyond it, rows are built again
 * as they are sent, and memory stays flat.
 */
const REUSE_BUDGET = 8 * 1024 * 1024;

/** A rough size of a message in memory: its texts (UTF-16) and attachment bytes, plus the objects around them. */
function footprint(m: Message): number {
  let n = 2048 + 2 * (m.subject.length + (m.html?.length ?? 0) + (m.text?.length ?? 0));
  for (const a of m.attachments) n += a.source.kind === "bytes" ? a.source.data.length : 256;
  return n;
}

export async function runBatch(opts: BatchOptions): Promise<BatchSummary> {
  const started = Date.now();
  const cache = new AttachmentCache();
  const counts: Counts = { total: 0, sent: 0, failed: 0, invalid: 0, skipped: 0, unknown: 0, partial: 0 };
  const classes = new Set<ExitClass>();
  const invalid = new Set<number>();
  const keyFor = (i: number) => opts.journal?.keyFor(i) ?? `${started.toString(36)}-${process.pid}-${i}`;
  const { onProgress } = opts;
  const progress = onProgress
    ? () => onProgress({ ...counts, left: counts.total - counts.invalid - counts.sent - counts.failed - counts.skipped - counts.unknown })
    : () => {};

  // Pass 1: validate everything; list the bad rows first.
  const built = new Map<number, Message>();
  let builtBytes = 0;
  // Keys the rows give themselves: a repeat would be taken by the service for the
  // same message and answered without sending, so it is a bad row, not a silent loss.
  const givenKeys = new Map<string, number>();
  const clashes = new FieldClashes(opts.defaults, opts.input.format);
  for await (const row of rowsOf(opts.input.format, opts.input.open())) {
    counts.total++;
    if (row.data && opts.onWarning) for (const text of clashes.check(row.data)) opts.onWarning(text);
    try {
      const message = await build(row, opts, cache, keyFor(row.index));
      if (row.data?.idempotency_key !== undefined) {
        const first = givenKeys.get(message.idempotencyKey);
        if (first !== undefined) {
          throw new MailsendError(
            "invalid_message",
            `row ${row.index + 1} (line ${row.line}): idempotency_key ${JSON.stringify(message.idempotencyKey)} is also row ${first + 1}'s; the service would take this message for that one and not send it`,
            { hint: "Give each row its own idempotency_key, or leave the column out and mailsend makes one per row." },
          );
        }
        givenKeys.set(message.idempotencyKey, row.index);
      }
      const size = footprint(message);
      if (!opts.check && opts.journal?.previous.get(row.index)?.s !== "done" && builtBytes + size <= REUSE_BUDGET) {
        built.set(row.index, message);
        builtBytes += size;
      }
    } catch (e) {
      const err = toMailsendError(e);
      invalid.add(row.index);
      counts.invalid++;
      classes.add(err.code === "usage" ? "dataerr" : err.exitClass);
      opts.onResult({ index: row.index, line: row.line, recipients: recipientsOf(row), status: "invalid", error: errorOf(err) });
    }
  }
  progress();
  const finish = (): BatchSummary => ({ ...counts, exitCode: EXIT[worstExitClass(classes)], elapsedMs: Date.now() - started });
  if (opts.check || (opts.failFast && counts.invalid > 0) || !opts.transport) return finish();

  // Pass 2: send.
  const tries: Tries = new WeakMap();
  const transport = stoppable(opts.transport, opts.signal, opts.abortSends, tries);
  // The stop signal reaches deliver()'s waits through its sleep, not as deliver's `signal`: a send
  // in flight never listens to it (see stoppable), and deliver would combine it with each attempt's
  // deadline (AbortSignal.any, once per message) only for the transport to drop it.
  const sleep = opts.deliver.sleep ?? stoppableSleep;
  const deliverOptions: DeliverOptions = { ...opts.deliver, sleep: (ms) => sleep(ms, opts.signal) };
  // An item holds one of the --concurrency slots while it is being sent; the
  // fsync of its "done" line happens after, so the next item need not wait for it.
  // A count and one waiter, not Promise.race over the items on the wire: a race per item adds a
  // reaction to every one of them (concurrency x items in all, kept until each settles).
  let onWire = 0;
  let slotFreed: (() => void) | undefined;
  const pending = new Set<Promise<void>>();
  let stop = false;
  const sendOne = async (row: Row, sent: () => void): Promise<void> => {
    const key = keyFor(row.index);
    const kept = built.get(row.index);
    built.delete(row.index);
    const message = kept ?? (await build(row, opts, cache, key));
    const base = { index: row.index, line: row.line, recipients: allRecipients(message).map((r) => r.address), idempotency_key: message.idempotencyKey };
    await opts.journal?.record(row.index, { s: "intended", k: message.idempotencyKey });
    const warnings: string[] = [];
    const warn = (text: string) => {
      warnings.push(text);
      opts.onWarning?.(`item ${row.index + 1} (line ${row.line}): ${text}`);
    };
    try {
      const r = await deliver(transport, message, { ...deliverOptions, onWarning: warn });
      sent();
      try {
        await opts.journal?.record(row.index, { s: "done", k: message.idempotencyKey, id: r.messageId });
      } catch (e) {
        // It was sent: a journal that cannot say so is a warning, never a failed item (a script would resend it).
        warn(`sent (${r.messageId}), but the journal could not record it: ${e instanceof Error ? e.message : String(e)}. A rerun resends it with the same idempotency key, which the service de-duplicates for 24 h.`);
      }
      counts.sent++;
      opts.onResult({ ...base, status: "sent", message_id: r.messageId, attempts: r.attempts, ...(warnings.length ? { warnings } : {}) });
    } catch (e) {
      // Before the slot is freed, so that no other item starts after a failure.
      if (opts.failFast) stop = true;
      sent();
      let err = toMailsendError(e);
      if (err.partial) {
        // Sent to the others: done, so that no run sends it again; its exit class says some were refused.
        await opts.journal?.record(row.index, { s: "done", k: message.idempotencyKey, id: err.partial.messageId });
        counts.sent++;
        counts.partial++;
        classes.add(err.exitClass);
        opts.onResult({ ...base, recipients: err.partial.accepted, status: "partial", message_id: err.partial.messageId, refused: err.partial.refused, error: errorOf(err) });
        progress();
        return;
      }
      const tried = tries.get(message);
      // Stopped while waiting to retry: the last attempt's failure is the item's state.
      if (interruptions.has(err) && tried?.error) err = tried.error;
      // An attempt that may have gone through keeps the item in doubt, whatever the retries after it said.
      if (!inDoubt(err) && tried?.doubt) err = tried.doubt;
      if (tried) err.attempts = tried.attempts;
      const unknown = inDoubt(err);
      await opts.journal?.record(row.index, unknown ? { s: "unknown", k: message.idempotencyKey, code: err.code } : { s: "failed", k: message.idempotencyKey, code: err.code, exit: err.exitCode });
      if (unknown) counts.unknown++;
      else counts.failed++;
      classes.add(unknown ? "protocol" : err.exitClass);
      opts.onResult({ ...base, status: unknown ? "unknown" : "failed", ...(err.attempts ? { attempts: err.attempts } : {}), error: errorOf(err) });
    }
    progress();
  };

  for await (const row of rowsOf(opts.input.format, opts.input.open())) {
    if (stop || opts.signal?.aborted) break;
    if (invalid.has(row.index)) continue;
    const before = opts.journal?.previous.get(row.index);
    if (before?.s === "done") {
      counts.skipped++;
      opts.onResult({ index: row.index, line: row.line, recipients: recipientsOf(row), status: "skipped", message_id: before.id, idempotency_key: before.k });
      progress();
      continue;
    }
    let freed = false;
    const sent = () => {
      if (freed) return;
      freed = true;
      onWire--;
      const wake = slotFreed;
      slotFreed = undefined;
      wake?.();
    };
    onWire++;
    const item: Promise<void> = sendOne(row, sent)
      .catch((e) => {
        const err = toMailsendError(e);
        counts.failed++;
        classes.add(err.exitClass);
        opts.onResult({ index: row.index, line: row.line, recipients: recipientsOf(row), status: "failed", error: errorOf(err) });
      })
      .finally(() => {
        sent();
        pending.delete(item);
      });
    pending.add(item);
    if (onWire >= opts.concurrency) await new Promise<void>((r) => (slotFreed = r));
  }
  await Promise.all(pending);
  return finish();
}
