/**
 * The batch: a first pass validates every row (so bad rows are listed
 * before anything is sent, and --check can stop there), a second pass sends
 * the good ones, N at a time, through the shared budget, with each item's
 * state in the journal before and after its send. Rows are streamed in both
 * passes: memory does not grow with the input.
 */
import { EXIT, MailsendError, toMailsendError, worstExitClass, type ExitClass } from "../core/errors.js";
import type { Message } from "../core/message.js";
import { allRecipients } from "../core/message.js";
import type { TransportName, Transport } from "../core/transport.js";
import { deliver, type DeliverOptions } from "../limits/deliver.js";
import { AttachmentCache, messageOfRow, type RowDefaults } from "./item.js";
import type { Journal } from "./journal.js";
import { rowsOf, type Format, type Row } from "./rows.js";

export interface BatchInput {
  /** Called once per pass: the input must be readable twice (stdin is spooled to a file first). */
  open(): AsyncIterable<Buffer>;
  format: Format;
}

export type ItemStatus = "sent" | "failed" | "invalid" | "skipped" | "unknown";

export interface ItemResult {
  index: number;
  line: number;
  recipients: string[];
  status: ItemStatus;
  message_id?: string;
  attempts?: number;
  idempotency_key?: string;
  error?: { code: string; message: string; exit: number; class: ExitClass };
}

export interface Counts {
  total: number;
  sent: number;
  failed: number;
  invalid: number;
  skipped: number;
  unknown: number;
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
  signal?: AbortSignal;
}

function errorOf(e: MailsendError): NonNullable<ItemResult["error"]> {
  // A row that cannot be a message is bad data, whatever the flag-level code would be.
  const err = e.code === "usage" ? new MailsendError("invalid_message", e.message) : e;
  return { code: err.code, message: err.message, exit: err.exitCode, class: err.exitClass };
}

async function build(row: Row, opts: BatchOptions, cache: AttachmentCache, key: string): Promise<Message> {
  if (row.error) throw row.error;
  try {
    return await messageOfRow(row.data!, { defaults: opts.defaults, transport: opts.transportName, cache, idempotencyKey: key });
  } catch (e) {
    const err = toMailsendError(e);
    throw new MailsendError(err.code === "usage" ? "invalid_message" : err.code, `row ${row.index + 1} (line ${row.line}): ${err.message}`, {
      ...(err.hint ? { hint: err.hint } : {}),
    });
  }
}

function recipientsOf(row: Row): string[] {
  const to = row.data?.to;
  if (typeof to === "string") return [to];
  return Array.isArray(to) ? to.filter((x): x is string => typeof x === "string") : [];
}

export async function runBatch(opts: BatchOptions): Promise<BatchSummary> {
  const started = Date.now();
  const cache = new AttachmentCache();
  const counts: Counts = { total: 0, sent: 0, failed: 0, invalid: 0, skipped: 0, unknown: 0 };
  const classes = new Set<ExitClass>();
  const invalid = new Set<number>();
  const keyFor = (i: number) => opts.journal?.keyFor(i) ?? `${started.toString(36)}-${process.pid}-${i}`;
  const progress = () => opts.onProgress?.({ ...counts, left: counts.total - counts.invalid - counts.sent - counts.failed - counts.skipped - counts.unknown });

  // Pass 1: validate everything; list the bad rows first.
  for await (const row of rowsOf(opts.input.format, opts.input.open())) {
    counts.total++;
    try {
      await build(row, opts, cache, keyFor(row.index));
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
  const inFlight = new Set<Promise<void>>();
  let stop = false;
  const sendOne = async (row: Row): Promise<void> => {
    const key = keyFor(row.index);
    const message = await build(row, opts, cache, key);
    const base = { index: row.index, line: row.line, recipients: allRecipients(message).map((r) => r.address), idempotency_key: message.idempotencyKey };
    await opts.journal?.record(row.index, { s: "intended", k: message.idempotencyKey });
    try {
      const r = await deliver(opts.transport!, message, { ...opts.deliver, ...(opts.signal ? { signal: opts.signal } : {}) });
      await opts.journal?.record(row.index, { s: "done", k: message.idempotencyKey, id: r.messageId });
      counts.sent++;
      opts.onResult({ ...base, status: "sent", message_id: r.messageId, attempts: r.attempts });
    } catch (e) {
      const err = toMailsendError(e);
      const unknown = err.mayHaveBeenSent || err.code === "outcome_unknown";
      await opts.journal?.record(row.index, unknown ? { s: "unknown", k: message.idempotencyKey, code: err.code } : { s: "failed", k: message.idempotencyKey, code: err.code, exit: err.exitCode });
      if (unknown) counts.unknown++;
      else counts.failed++;
      classes.add(unknown ? "protocol" : err.exitClass);
      opts.onResult({ ...base, status: unknown ? "unknown" : "failed", ...(err.attempts ? { attempts: err.attempts } : {}), error: errorOf(err) });
      if (opts.failFast) stop = true;
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
    const p: Promise<void> = sendOne(row).catch((e) => {
      const err = toMailsendError(e);
      counts.failed++;
      classes.add(err.exitClass);
      opts.onResult({ index: row.index, line: row.line, recipients: recipientsOf(row), status: "failed", error: errorOf(err) });
    });
    const tracked = p.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
    if (inFlight.size >= opts.concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return finish();
}
