/**
 * The batch: a first pass validates every row (so bad rows are listed
 * before anything is sent, and --check can stop there), a second pass sends
 * the good ones, N at a time, through the shared budget, with each item's
 * state in the journal before and after its send. Rows are streamed in both
 * passes: memory does not grow with the input.
 */
import { commaSplitNameFix, parseAddressValues } from "../core/address.js";
import {
  EXIT,
  MailsendError,
  said,
  toMailsendError,
  worstExitClass,
  type ExitClass,
  type Text,
} from "../core/errors.js";
import type { Front } from "../core/setting-names.js";
import type { Message } from "../core/message.js";
import { allRecipients } from "../core/message.js";
import type { TransportName, Transport } from "../core/transport.js";
import type { Channels } from "../transports/choose.js";
import { abortableSleep, deliver, isBudgetStoreFailure, type DeliverOptions } from "../limits/deliver.js";
import { AttachmentCache, FieldClashes, messageOfRow, type RowDefaults } from "./item.js";
import { strayBraces } from "../message/template.js";
import type { ItemState, Journal } from "./journal.js";
import { rowsOf, type Format, type Row } from "./rows.js";
import type { Counts } from "./counts.js";

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

export type { Counts };

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
  /** Whose words the results' errors and the warnings are in: the CLI's (the default) or the library's. */
  front?: Front;
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

function errorOf(e: MailsendError, front: Front = "cli"): NonNullable<ItemResult["error"]> {
  // A row that cannot be a message is bad data, whatever the flag-level code would be.
  const err = (
    e.code === "usage"
      ? new MailsendError("invalid_message", e.messageWords, e.hintWords ? { hint: e.hintWords } : {})
      : e
  ).in(front);
  return {
    code: err.code,
    message: err.message,
    exit: err.exitCode,
    class: err.exitClass,
    ...(err.hint ? { hint: err.hint } : {}),
  };
}

/** A CSV cell holding `"Doe, Jane" <jane@example.com>` has its quotes doubled, and the cell quoted. */
function csvHint(data: Record<string, unknown>, hint: Text | undefined): Text | undefined {
  for (const field of ["to", "cc", "bcc", "reply_to", "from"]) {
    const v = data[field];
    const fix = typeof v === "string" ? commaSplitNameFix(v) : undefined;
    if (fix !== undefined)
      return (s) =>
        `${hint === undefined ? "" : said(hint, s.front)} In a CSV cell the quotes are doubled and the cell quoted: "${fix.replace(/"/g, '""')}".`.trim();
  }
  return hint;
}

async function build(row: Row, opts: BatchOptions, cache: AttachmentCache, key: string): Promise<Message> {
  if (row.error) throw row.error;
  try {
    return await messageOfRow(row.data!, {
      defaults: opts.defaults,
      transport: opts.transportName,
      ...(opts.channels ? { channels: opts.channels } : {}),
      cache,
      idempotencyKey: key,
    });
  } catch (e) {
    const err = toMailsendError(e);
    const hint =
      opts.input.format === "csv" && err.code === "invalid_address" ? csvHint(row.data!, err.hintWords) : err.hintWords;
    throw new MailsendError(
      err.code === "usage" ? "invalid_message" : err.code,
      (s) => `row ${row.index + 1} (line ${row.line}): ${said(err.messageWords, s.front)}`,
      {
        ...(hint ? { hint } : {}),
      },
    );
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

/**
 * The --concurrency slots: an item holds one while it is being sent; the fsync of its "done"
 * line happens after, so the next item need not wait for it. A count and one waiter, not
 * Promise.race over the items on the wire: a race per item adds a reaction to every one of
 * them (concurrency x items in all, kept until each settles).
 */
class Slots {
  private onWire = 0;
  private freed: (() => void) | undefined;
  constructor(private readonly size: number) {}
  hold(): void {
    this.onWire++;
  }
  full(): boolean {
    return this.onWire >= this.size;
  }
  untilOneIsFree(): Promise<void> {
    return new Promise<void>((r) => (this.freed = r));
  }
  free(): void {
    this.onWire--;
    const wake = this.freed;
    this.freed = undefined;
    wake?.();
  }
}

/** Before anything is sent: the braces of the templates that are no placeholder, said once each. */
function warnStrayBraces(d: RowDefaults, warn: (text: string) => void): void {
  // A Markdown template is its text template too: its braces are said once.
  const templates = new Map<string, string>();
  if (d.subject !== undefined) templates.set(d.labels?.subject ?? "--subject", d.subject);
  if (d.textTemplate !== undefined) templates.set(d.labels?.text ?? d.templateFlag ?? "--text-file", d.textTemplate);
  if (d.htmlTemplate !== undefined && !templates.has(d.labels?.html ?? d.templateFlag ?? "--html-file"))
    templates.set(d.labels?.html ?? d.templateFlag ?? "--html-file", d.htmlTemplate);
  for (const [label, template] of templates) {
    const stray = strayBraces(template);
    if (stray.length > 0) {
      warn(
        `${label} has braces that are no placeholder, sent as written to every recipient: ${stray.map((x) => JSON.stringify(x)).join(", ")}. A placeholder is {{column}} or {{column|default}}: letters, digits, spaces, _ . - in double braces.`,
      );
    }
  }
}

/** One run of a batch: its counts and exit classes, pass 1 (validate) and pass 2 (send). */
class BatchRun {
  private readonly started = Date.now();
  private readonly cache = new AttachmentCache();
  readonly counts: Counts = { total: 0, sent: 0, failed: 0, invalid: 0, skipped: 0, unknown: 0, partial: 0 };
  private readonly classes = new Set<ExitClass>();
  /** The indexes of the rows pass 1 found invalid: pass 2 passes them by. */
  private readonly invalid = new Set<number>();
  /**
   * Items in a row whose slot could not be asked for (Redis gone or silent): each would wait out
   * the store's timeout in turn, a 10,000-row batch for hours, and fail. After a few, no further
   * item starts; the run ends 75 and a re-run sends the rest.
   */
  private storeFailuresInARow = 0;
  private stoppedBy: BatchSummary["stopped"];
  /** Each valid row while everything fits REUSE_BUDGET; past it, only the messages kept so far, in `built`. */
  private plan: Planned[] | undefined;
  private built: Map<number, Message> | undefined;
  // Pass 2's state: the transport as deliver() sees it, and the items in flight.
  private readonly tries: Tries = new Map();
  private transport!: Transport;
  private deliverOptions!: DeliverOptions;
  private slots!: Slots;
  /** Items started and not yet finished (their "done" line on disk, their result given), and who waits for none. */
  private running = 0;
  private allDone: (() => void) | undefined;
  private stop = false;
  private fatal: { error: unknown } | undefined;

  constructor(private readonly opts: BatchOptions) {}

  keyFor(i: number): string {
    return this.opts.journal?.keyFor(i) ?? `${this.started.toString(36)}-${process.pid}-${i}`;
  }

  progress(): void {
    const c = this.counts;
    this.opts.onProgress?.({ ...c, left: c.total - c.invalid - c.sent - c.failed - c.skipped - c.unknown });
  }

  summary(): BatchSummary {
    return {
      ...this.counts,
      exitCode: EXIT[worstExitClass(this.classes)],
      elapsedMs: Date.now() - this.started,
      ...(this.stoppedBy ? { stopped: this.stoppedBy } : {}),
    };
  }

  /** Pass 1: validate everything; list the bad rows first. */
  async validate(sending: boolean): Promise<void> {
    const { opts, counts } = this;
    if (sending) this.plan = [];
    let builtBytes = 0;
    // Keys the rows give themselves: a repeat would be taken by the service for the
    // same message and answered without sending, so it is a bad row, not a silent loss.
    const givenKeys = new Map<string, number>();
    const clashes = new FieldClashes(opts.defaults, opts.input.format, opts.front);
    if (opts.onWarning) warnStrayBraces(opts.defaults, opts.onWarning);
    for await (const row of rowsOf(opts.input.format, opts.input.open(), opts.input.encoding)) {
      counts.total++;
      if (row.data && opts.onWarning) for (const text of clashes.check(row.data)) opts.onWarning(text);
      try {
        const message = await build(row, opts, this.cache, this.keyFor(row.index));
        if (row.data?.idempotency_key !== undefined) {
          const first = givenKeys.get(message.idempotencyKey);
          if (first !== undefined) {
            throw new MailsendError(
              "invalid_message",
              `row ${row.index + 1} (line ${row.line}): idempotency_key ${JSON.stringify(message.idempotencyKey)} is also row ${first + 1}'s; the service would take this message for that one and not send it`,
              {
                hint: "Give each row its own idempotency_key, or leave the column out and mailsend makes one per row.",
              },
            );
          }
          givenKeys.set(message.idempotencyKey, row.index);
        }
        if (sending) builtBytes = this.keep(row, message, builtBytes);
      } catch (e) {
        const err = toMailsendError(e);
        this.invalid.add(row.index);
        counts.invalid++;
        this.classes.add(err.code === "usage" ? "dataerr" : err.exitClass);
        opts.onResult({
          index: row.index,
          line: row.line,
          recipients: recipientsOf(row),
          status: "invalid",
          error: errorOf(err, opts.front),
        });
      }
    }
    this.progress();
  }

  /** What pass 2 will need of a valid row, while it fits REUSE_BUDGET; returns the bytes kept so far. */
  private keep(row: Row, message: Message, builtBytes: number): number {
    const before = this.opts.journal?.previous.get(row.index);
    if (before?.s === "done") {
      if (!this.plan) return builtBytes;
      const recipients = recipientsOf(row);
      this.plan.push({ index: row.index, line: row.line, done: before, recipients });
      return builtBytes + 256 + 64 * recipients.length;
    }
    const size = footprint(message);
    if (builtBytes + size > REUSE_BUDGET) {
      if (this.plan) {
        // Past the budget: pass 2 reads the input again, and builds the rows not kept.
        this.built = new Map();
        for (const p of this.plan) if (p.message) this.built.set(p.index, p.message);
        this.plan = undefined;
      }
      return builtBytes;
    }
    if (this.plan) this.plan.push({ index: row.index, line: row.line, message });
    else this.built!.set(row.index, message);
    return builtBytes + size;
  }

  /** Pass 2: send. A new journal's header is on disk first (a failure to sync it fails the batch, as one to create it does). */
  async send(to: Transport): Promise<void> {
    const { opts } = this;
    await opts.journal?.durable();
    this.transport = stoppable(to, opts.signal, this.tries);
    // The stop signal reaches deliver()'s waits through its sleep, not as deliver's `signal`: a send
    // in flight never ends on it. abortSends is deliver's signal: each attempt's deadline follows it.
    const sleep = opts.deliver.sleep ?? stoppableSleep;
    // A batch is bulk: it leaves the budget's reserve to one-shot sends and alerts started meanwhile.
    this.deliverOptions = { ...opts.deliver, slotClass: "bulk", sleep: (ms) => sleep(ms, opts.signal) };
    if (opts.abortSends) this.deliverOptions.signal = opts.abortSends;
    this.slots = new Slots(opts.concurrency);
    const plan = this.plan;
    if (plan) {
      for (let i = 0; i < plan.length; i++) {
        if (this.stop || opts.signal?.aborted) break;
        const p = plan[i]!;
        // Let go of the message once it is sent: what was planned is not kept until the end.
        plan[i] = undefined as never;
        if (p.done) this.skip(p.index, p.line, p.recipients!, p.done);
        else await this.launch(p.index, p.line, undefined, p.message);
      }
    } else {
      for await (const row of rowsOf(opts.input.format, opts.input.open(), opts.input.encoding)) {
        if (this.stop || opts.signal?.aborted) break;
        if (this.invalid.has(row.index)) continue;
        const before = opts.journal?.previous.get(row.index);
        if (before?.s === "done") {
          this.skip(row.index, row.line, recipientsOf(row), before);
          continue;
        }
        const kept = this.built?.get(row.index);
        this.built?.delete(row.index);
        await this.launch(row.index, row.line, row, kept);
      }
    }
    if (this.running > 0) await new Promise<void>((r) => (this.allDone = r));
    if (this.fatal) throw this.fatal.error;
  }

  private skip(index: number, line: number, recipients: string[], done: Extract<ItemState, { s: "done" }>): void {
    this.counts.skipped++;
    this.opts.onResult({ index, line, recipients, status: "skipped", message_id: done.id, idempotency_key: done.k });
    this.progress();
  }

  /** Start one item, then wait while every slot is taken. */
  private async launch(index: number, line: number, row: Row | undefined, kept: Message | undefined): Promise<void> {
    this.slots.hold();
    this.running++;
    void this.sendOne(index, line, row, kept);
    if (this.slots.full()) await this.slots.untilOneIsFree();
  }

  /**
   * One item, from its journal line to its result. It holds its slot until its answer (or
   * failure) is in: the fsync of its "done" line happens after, so the next item need not wait for it.
   */
  private async sendOne(index: number, line: number, row: Row | undefined, kept: Message | undefined): Promise<void> {
    const { opts } = this;
    let holding = true;
    const letGo = () => {
      holding = false;
      this.slots.free();
    };
    let message: Message | undefined = kept;
    try {
      message ??= await build(row!, opts, this.cache, this.keyFor(index));
      const item: Item = { index, line, message, key: message.idempotencyKey, recipients: addressesOf(message) };
      // In the file before the send; its fsync goes with the next group (journal.ts says why).
      await opts.journal?.record(index, { s: "intended", k: item.key }, "written");
      const warn = (text: string) => {
        (item.warnings ??= []).push(text);
        opts.onWarning?.(`item ${index + 1} (line ${line}): ${text}`);
      };
      let r: Awaited<ReturnType<typeof deliver>>;
      try {
        r = await deliver(this.transport, message, { ...this.deliverOptions, onWarning: warn });
      } catch (e) {
        this.failedToSend(e);
        letGo();
        await this.endFailed(item, e);
        return;
      }
      this.storeFailuresInARow = 0;
      this.tries.delete(message);
      letGo();
      await this.endSent(item, r, warn);
    } catch (e) {
      // The row could not be built again, or its "intended" line not written: nothing was sent.
      try {
        const err = toMailsendError(e);
        this.counts.failed++;
        this.classes.add(err.exitClass);
        opts.onResult({
          index,
          line,
          recipients: message ? addressesOf(message) : recipientsOf(row!),
          status: "failed",
          error: errorOf(err, opts.front),
        });
      } catch (e2) {
        // Nobody awaits an item: what cannot even be reported ends the batch once the rest has settled.
        this.fatal ??= { error: e2 };
      }
    } finally {
      if (holding) this.slots.free();
      this.progress();
      if (--this.running === 0) this.allDone?.();
    }
  }

  /** A send failed: before its slot is freed, so that no other item starts after a failure that stops the batch. */
  private failedToSend(e: unknown): void {
    if (this.opts.failFast) this.stop = true;
    if (!isBudgetStoreFailure(e)) this.storeFailuresInARow = 0;
    else if (++this.storeFailuresInARow >= STORE_FAILURES_TO_STOP && !this.stop) {
      this.stop = true;
      this.stoppedBy = "budget";
      this.opts.onWarning?.(
        `the rate-limit budget could not be asked for a slot for ${this.storeFailuresInARow} items in a row (${toMailsendError(e).message}); no further item is started. Nothing of those was sent; run the same command again to send the rest.`,
      );
    }
  }

  private async endSent(
    item: Item,
    r: Awaited<ReturnType<typeof deliver>>,
    warn: (text: string) => void,
  ): Promise<void> {
    const { index, line, key, recipients } = item;
    try {
      await this.opts.journal?.record(index, { s: "done", k: key, id: r.messageId });
    } catch (e) {
      // It was sent: a journal that cannot say so is a warning, never a failed item (a script would resend it).
      warn(
        `sent (${r.messageId}), but the journal could not record it: ${e instanceof Error ? e.message : String(e)}. A rerun resends it with the same idempotency key, which the service de-duplicates for 24 h.`,
      );
    }
    this.counts.sent++;
    const result: ItemResult = {
      index,
      line,
      recipients,
      idempotency_key: key,
      status: "sent",
      message_id: r.messageId,
      attempts: r.attempts,
    };
    if (item.warnings) result.warnings = item.warnings;
    this.opts.onResult(result);
  }

  private async endFailed(item: Item, e: unknown): Promise<void> {
    const { opts, counts } = this;
    const { index, line, key, message } = item;
    const tried = this.tries.get(message);
    this.tries.delete(message);
    let err = toMailsendError(e);
    const base = { index, line, recipients: item.recipients, idempotency_key: key };
    if (err.partial) {
      // Sent to the others: done, so that no run sends it again; its exit class says some were refused.
      await opts.journal?.record(index, { s: "done", k: key, id: err.partial.messageId });
      counts.sent++;
      counts.partial++;
      this.classes.add(err.exitClass);
      opts.onResult({
        ...base,
        recipients: err.partial.accepted,
        status: "partial",
        message_id: err.partial.messageId,
        refused: err.partial.refused,
        error: errorOf(err, opts.front),
      });
      return;
    }
    // Stopped while waiting to retry: the last attempt's failure is the item's state.
    if (interruptions.has(err) && tried?.error) err = tried.error;
    // An attempt that may have gone through keeps the item in doubt, whatever the retries after it said.
    if (!inDoubt(err) && tried?.doubt) err = tried.doubt;
    if (tried) err.attempts = tried.attempts;
    const unknown = inDoubt(err);
    await opts.journal?.record(
      index,
      unknown ? { s: "unknown", k: key, code: err.code } : { s: "failed", k: key, code: err.code, exit: err.exitCode },
    );
    if (unknown) counts.unknown++;
    else counts.failed++;
    this.classes.add(unknown ? "protocol" : err.exitClass);
    opts.onResult({
      ...base,
      status: unknown ? "unknown" : "failed",
      ...(err.attempts ? { attempts: err.attempts } : {}),
      error: errorOf(err, opts.front),
    });
  }
}

/** An item of pass 2 once its message is built: what its result and journal lines name. */
interface Item {
  index: number;
  line: number;
  message: Message;
  key: string;
  recipients: string[];
  /** Sent, but recording it failed: said with its result. */
  warnings?: string[];
}

export async function runBatch(opts: BatchOptions): Promise<BatchSummary> {
  const run = new BatchRun(opts);
  const sending = !opts.check && opts.transport !== undefined;
  await run.validate(sending);
  if (opts.check || (opts.failFast && run.counts.invalid > 0) || !opts.transport) return run.summary();
  await run.send(opts.transport);
  return run.summary();
}
