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
import type { Channels } from "../transports/choose.js";
import { abortableSleep, deliver, isBudgetStoreFailure, type DeliverOptions } from "../limits/deliver.js";
import { AttachmentCache, FieldClashes, messageOfRow, type RowDefaults } from "./item.js";
import { strayBraces } from "./template.js";
import type { ItemState, Journal } from "./journal.js";
import { rowsOf, type Format, type Row } from "./rows.js";

export interface BatchInput {
  /** Called once per pass: the input must be readable twice (stdin is spooled to a file first). */
  open(): AsyncIterable<Buffer>;
  format: Format;
  /** The input's character encoding when it is not UTF-8 (a WHATWG label). */
  encoding?: string;
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
  /** The batch stopped starting items before the end: the rate-limit budget's store failed for several in a row. */
  stopped?: "budget";
}

export interface BatchOptions {
  input: BatchInput;
  defaults: RowDefaults;
  /** "auto": each row's message chooses among `channels` (the transport given dispatches the same way). */
  transportName: TransportName | "auto";
  channels?: Channels;
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

/** Items in a row that could not get a slot from the budget's store before the batch stops starting more. */
const STORE_FAILURES_TO_STOP = 3;

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
  return abortableSleep(ms, signal).catch((e: unknown) => {
    throw signal?.aborted ? interrupted() : e;
  });
}

/**
 * Per message in flight: the attempts made, how the last one failed, and the failure that left it
 * in doubt, if any. A Map whose entries the runner deletes when the item ends (a WeakMap costs
 * the garbage collector an ephemeron for every message).
 */
type Tries = Map<Message, { attempts: number; error?: MailsendError; doubt?: MailsendError }>;

const inDoubt = (e: MailsendError) => e.mayHaveBeenSent || e.code === "outcome_unknown";

/**
 * The transport as deliver() sees it: no attempt starts once stopped; a send
 * in flight ends only on abortSends (deliver's `signal`, which each attempt's
 * deadline follows: the signal deliver passes on is both). The batch's stop
 * signal never reaches a send. It notes each message's last failure: a stop
 * during the wait before a retry must report that failure (it may be
 * "outcome unknown"), not "interrupted before it was sent".
 */
function stoppable(t: Transport, stop: AbortSignal | undefined, tries: Tries): Transport {
  return {
    name: t.name,
    preview: (m, sink, o) => t.preview(m, sink, o),
    close: () => t.close(),
    async send(m, ctx) {
      if (stop?.aborted) throw interrupted();
      let mine = tries.get(m);
      if (!mine) tries.set(m, (mine = { attempts: 0 }));
      mine.attempts++;
      try {
        return await t.send(m, ctx);
      } catch (e) {
        mine.error = toMailsendError(e);
        if (inDoubt(mine.error)) mine.doubt ??= mine.error;
        throw e;
      }
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
    return await messageOfRow(row.data!, { defaults: opts.defaults, transport: opts.transportName, ...(opts.channels ? { channels: opts.channels } : {}), cache, idempotencyKey: key });
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

/** The addresses a message goes to (to, cc, bcc), for its result. */
const addressesOf = (m: Message): string[] => allRecipients(m).map((r) => r.address);

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

/**
 * What pass 2 needs of a valid row, kept by pass 1 while the whole batch fits
 * REUSE_BUDGET: then pass 2 walks this list and does not read, decode and
 * parse the input a second time.
 */
interface Planned {
  index: number;
  line: number;
  /** A row to send: its message, built in pass 1. */
  message?: Message;
  /** A row an earlier run sent: its journal record, and its recipients for the result. */
  done?: Extract<ItemState, { s: "done" }>;
  recipients?: string[];
}

export async function runBatch(opts: BatchOptions): Promise<BatchSummary> {
  const started = Date.now();
  const cache = new AttachmentCache();
  /**
   * Items in a row whose slot could not be asked for (Redis gone or silent): each would wait out
   * the store's timeout in turn, a 10,000-row batch for hours, and fail. After a few, no further
   * item starts; the run ends 75 and a re-run sends the rest.
   */
  let storeFailuresInARow = 0;
  let stoppedBy: BatchSummary["stopped"];
  const counts: Counts = { total: 0, sent: 0, failed: 0, invalid: 0, skipped: 0, unknown: 0, partial: 0 };
  const classes = new Set<ExitClass>();
  const invalid = new Set<number>();
  const { journal } = opts;
  const keyFor = (i: number) => journal?.keyFor(i) ?? `${started.toString(36)}-${process.pid}-${i}`;
  const { onProgress } = opts;
  const progress = onProgress
    ? () => onProgress({ ...counts, left: counts.total - counts.invalid - counts.sent - counts.failed - counts.skipped - counts.unknown })
    : () => {};
  const sending = !opts.check && opts.transport !== undefined;

  // Pass 1: validate everything; list the bad rows first.
  // Each valid row in `plan` while everything fits the budget; past it, only the messages kept so far, in `built`.
  let plan: Planned[] | undefined = sending ? [] : undefined;
  let built: Map<number, Message> | undefined;
  let builtBytes = 0;
  // Keys the rows give themselves: a repeat would be taken by the service for the
  // same message and answered without sending, so it is a bad row, not a silent loss.
  const givenKeys = new Map<string, number>();
  const clashes = new FieldClashes(opts.defaults, opts.input.format);
  if (opts.onWarning) {
    const d = opts.defaults;
    // A Markdown template is its text template too: its braces are said once.
    const templates = new Map<string, string>();
    if (d.subject !== undefined) templates.set(d.labels?.subject ?? "--subject", d.subject);
    if (d.textTemplate !== undefined) templates.set(d.labels?.text ?? d.templateFlag ?? "--text-file", d.textTemplate);
    if (d.htmlTemplate !== undefined && !templates.has(d.labels?.html ?? d.templateFlag ?? "--html-file")) templates.set(d.labels?.html ?? d.templateFlag ?? "--html-file", d.htmlTemplate);
    for (const [label, template] of templates) {
      const stray = strayBraces(template);
      if (stray.length > 0) {
        opts.onWarning(`${label} has braces that are no placeholder, sent as written to every recipient: ${stray.map((x) => JSON.stringify(x)).join(", ")}. A placeholder is {{column}} or {{column|default}}: letters, digits, spaces, _ . - in double braces.`);
      }
    }
  }
  for await (const row of rowsOf(opts.input.format, opts.input.open(), opts.input.encoding)) {
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
      if (!sending) continue;
      const before = journal?.previous.get(row.index);
      if (before?.s === "done") {
        if (plan) {
          const recipients = recipientsOf(row);
          plan.push({ index: row.index, line: row.line, done: before, recipients });
          builtBytes += 256 + 64 * recipients.length;
        }
        continue;
      }
      const size = footprint(message);
      if (builtBytes + size > REUSE_BUDGET) {
        if (plan) {
          // Past the budget: pass 2 reads the input again, and builds the rows not kept.
          built = new Map();
          for (const p of plan) if (p.message) built.set(p.index, p.message);
          plan = undefined;
        }
        continue;
      }
      builtBytes += size;
      if (plan) plan.push({ index: row.index, line: row.line, message });
      else built!.set(row.index, message);
    } catch (e) {
      const err = toMailsendError(e);
      invalid.add(row.index);
      counts.invalid++;
      classes.add(err.code === "usage" ? "dataerr" : err.exitClass);
      opts.onResult({ index: row.index, line: row.line, recipients: recipientsOf(row), status: "invalid", error: errorOf(err) });
    }
  }
  progress();
  const finish = (): BatchSummary => ({ ...counts, exitCode: EXIT[worstExitClass(classes)], elapsedMs: Date.now() - started, ...(stoppedBy ? { stopped: stoppedBy } : {}) });
  if (opts.check || (opts.failFast && counts.invalid > 0) || !opts.transport) return finish();

  // Pass 2: send. A new journal's header is on disk first (a failure to sync it fails the batch, as one to create it does).
  await journal?.durable();
  const tries: Tries = new Map();
  const transport = stoppable(opts.transport, opts.signal, tries);
  // The stop signal reaches deliver()'s waits through its sleep, not as deliver's `signal`: a send
  // in flight never ends on it. abortSends is deliver's signal: each attempt's deadline follows it.
  const sleep = opts.deliver.sleep ?? stoppableSleep;
  const deliverOptions: DeliverOptions = { ...opts.deliver, sleep: (ms) => sleep(ms, opts.signal) };
  if (opts.abortSends) deliverOptions.signal = opts.abortSends;
  // An item holds one of the --concurrency slots while it is being sent; the
  // fsync of its "done" line happens after, so the next item need not wait for it.
  // A count and one waiter, not Promise.race over the items on the wire: a race per item adds a
  // reaction to every one of them (concurrency x items in all, kept until each settles).
  let onWire = 0;
  let slotFreed: (() => void) | undefined;
  const freeSlot = () => {
    onWire--;
    const wake = slotFreed;
    slotFreed = undefined;
    wake?.();
  };
  // Items started and not yet finished (their "done" line on disk, their result given), and who waits for none.
  let running = 0;
  let allDone: (() => void) | undefined;
  let stop = false;
  let fatal: { error: unknown } | undefined;

  /**
   * One item, from its journal line to its result. It holds its slot until its answer (or
   * failure) is in: the fsync of its "done" line happens after, so the next item need not wait for it.
   */
  const sendOne = async (index: number, line: number, row: Row | undefined, kept: Message | undefined): Promise<void> => {
    let holding = true;
    let message: Message | undefined = kept;
    try {
      message ??= await build(row!, opts, cache, keyFor(index));
      const key = message.idempotencyKey;
      const recipients = addressesOf(message);
      // In the file before the send; its fsync goes with the next group (journal.ts says why).
      await journal?.record(index, { s: "intended", k: key }, "written");
      let warnings: string[] | undefined;
      const warn = (text: string) => {
        (warnings ??= []).push(text);
        opts.onWarning?.(`item ${index + 1} (line ${line}): ${text}`);
      };
      try {
        const r = await deliver(transport, message, { ...deliverOptions, onWarning: warn });
        storeFailuresInARow = 0;
        tries.delete(message);
        holding = false;
        freeSlot();
        try {
          await journal?.record(index, { s: "done", k: key, id: r.messageId });
        } catch (e) {
          // It was sent: a journal that cannot say so is a warning, never a failed item (a script would resend it).
          warn(`sent (${r.messageId}), but the journal could not record it: ${e instanceof Error ? e.message : String(e)}. A rerun resends it with the same idempotency key, which the service de-duplicates for 24 h.`);
        }
        counts.sent++;
        const result: ItemResult = { index, line, recipients, idempotency_key: key, status: "sent", message_id: r.messageId, attempts: r.attempts };
        if (warnings) result.warnings = warnings;
        opts.onResult(result);
      } catch (e) {
        // Before the slot is freed, so that no other item starts after a failure.
        if (opts.failFast) stop = true;
        if (!isBudgetStoreFailure(e)) storeFailuresInARow = 0;
        else if (++storeFailuresInARow >= STORE_FAILURES_TO_STOP && !stop) {
          stop = true;
          stoppedBy = "budget";
          opts.onWarning?.(`the rate-limit budget could not be asked for a slot for ${storeFailuresInARow} items in a row (${toMailsendError(e).message}); no further item is started. Nothing of those was sent; run the same command again to send the rest.`);
        }
        holding = false;
        freeSlot();
        const tried = tries.get(message);
        tries.delete(message);
        let err = toMailsendError(e);
        const base = { index, line, recipients, idempotency_key: key };
        if (err.partial) {
          // Sent to the others: done, so that no run sends it again; its exit class says some were refused.
          await journal?.record(index, { s: "done", k: key, id: err.partial.messageId });
          counts.sent++;
          counts.partial++;
          classes.add(err.exitClass);
          opts.onResult({ ...base, recipients: err.partial.accepted, status: "partial", message_id: err.partial.messageId, refused: err.partial.refused, error: errorOf(err) });
          return;
        }
        // Stopped while waiting to retry: the last attempt's failure is the item's state.
        if (interruptions.has(err) && tried?.error) err = tried.error;
        // An attempt that may have gone through keeps the item in doubt, whatever the retries after it said.
        if (!inDoubt(err) && tried?.doubt) err = tried.doubt;
        if (tried) err.attempts = tried.attempts;
        const unknown = inDoubt(err);
        await journal?.record(index, unknown ? { s: "unknown", k: key, code: err.code } : { s: "failed", k: key, code: err.code, exit: err.exitCode });
        if (unknown) counts.unknown++;
        else counts.failed++;
        classes.add(unknown ? "protocol" : err.exitClass);
        opts.onResult({ ...base, status: unknown ? "unknown" : "failed", ...(err.attempts ? { attempts: err.attempts } : {}), error: errorOf(err) });
      }
    } catch (e) {
      // The row could not be built again, or its "intended" line not written: nothing was sent.
      try {
        const err = toMailsendError(e);
        counts.failed++;
        classes.add(err.exitClass);
        opts.onResult({ index, line, recipients: message ? addressesOf(message) : recipientsOf(row!), status: "failed", error: errorOf(err) });
      } catch (e2) {
        // Nobody awaits an item: what cannot even be reported ends the batch once the rest has settled.
        fatal ??= { error: e2 };
      }
    } finally {
      if (holding) freeSlot();
      progress();
      if (--running === 0) allDone?.();
    }
  };

  /** Start one item, then wait while every slot is taken. */
  const launch = async (index: number, line: number, row: Row | undefined, kept: Message | undefined): Promise<void> => {
    onWire++;
    running++;
    void sendOne(index, line, row, kept);
    if (onWire >= opts.concurrency) await new Promise<void>((r) => (slotFreed = r));
  };
  const skip = (index: number, line: number, recipients: string[], done: Extract<ItemState, { s: "done" }>) => {
    counts.skipped++;
    opts.onResult({ index, line, recipients, status: "skipped", message_id: done.id, idempotency_key: done.k });
    progress();
  };

  if (plan) {
    for (let i = 0; i < plan.length; i++) {
      if (stop || opts.signal?.aborted) break;
      const p = plan[i]!;
      // Let go of the message once it is sent: what was planned is not kept until the end.
      plan[i] = undefined as never;
      if (p.done) skip(p.index, p.line, p.recipients!, p.done);
      else await launch(p.index, p.line, undefined, p.message);
    }
  } else {
    for await (const row of rowsOf(opts.input.format, opts.input.open(), opts.input.encoding)) {
      if (stop || opts.signal?.aborted) break;
      if (invalid.has(row.index)) continue;
      const before = journal?.previous.get(row.index);
      if (before?.s === "done") {
        skip(row.index, row.line, recipientsOf(row), before);
        continue;
      }
      const kept = built?.get(row.index);
      built?.delete(row.index);
      await launch(row.index, row.line, row, kept);
    }
  }
  if (running > 0) await new Promise<void>((r) => (allDone = r));
  if (fatal) throw fatal.error;
  return finish();
}
