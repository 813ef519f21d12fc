/**
 * What `mailsend queue`'s subcommands do and print (list, run, retry, rm, purge, check): apart from
 * the command file, so that sendmail's -bp and -q (mailq, a cron's queue run) share them without
 * loading commander.
 */
import { MailsendError, toMailsendError } from "../core/errors.js";
import { formatAge, formatSize } from "../core/size.js";
import { QueueRunner, DEFAULT_MAX_AGE_MS, type RunnerEvent, type RunSummary } from "../outbox/runner.js";
import { runnerHoldsOutbox } from "../outbox/runner-lock.js";
import { damageOf, Outbox, isOutboxId, strandedMailNote } from "../outbox/store.js";
import { CHECK_EXIT, judgeQueue, type CheckThresholds, type QueueCounts } from "../outbox/check.js";
import type { OutboxMeta, OutboxState } from "../outbox/types.js";
import { colorsFor, type CliIO } from "./io.js";
import { reportError } from "./report.js";
import { shownWord } from "../core/redact.js";
import { parseDuration } from "./values.js";

interface ListFlags {
  json?: boolean;
  failed?: boolean;
  /**
   * mailq / sendmail -bp: the empty and summary lines in Postfix's words ("Mail queue is empty",
   * "-- N Kbytes in M Requests."), which monitoring checks (check_mailq, munin) parse.
   */
  postfix?: boolean;
}

function when(at: number, now: number): string {
  if (at <= now) return "now";
  return `in ${formatAge(at - now)}`;
}

/** A header value shown on one line of a terminal: no control characters. */
function plain(s: string | undefined, max = 60): string {
  const t = (s ?? "").replace(/[\u0000-\u001f\u007f-\u009f]/g, "\uFFFD");
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

interface Row {
  meta: OutboxMeta;
  state: OutboxState;
}

/** A file of the outbox that could not be read as a message: listed with what is wrong with it. */
interface Damaged {
  id: string;
  reason: string;
  /** The whole message and its hint, for stderr. */
  said: string;
}

/**
 * The messages, and what could not be listed (a damaged file) in its place among them: said on
 * stderr too, never left out silently, never an error that hides the others.
 */
async function rows(
  outbox: Outbox,
  where: "queue" | "failed",
): Promise<{ list: Row[]; unreadable: Damaged[]; all: (Row | Damaged)[] }> {
  const list: Row[] = [];
  const unreadable: Damaged[] = [];
  const all: (Row | Damaged)[] = [];
  for (const id of await outbox.ids(where)) {
    try {
      const meta = await outbox.meta(id, where);
      if (!meta) continue;
      const row = { meta, state: await outbox.state(id, where) };
      list.push(row);
      all.push(row);
    } catch (e) {
      const err = toMailsendError(e);
      const d = {
        id,
        reason: damageOf(e) ?? err.message,
        said: `${err.message}${err.hint ? `${/[.!?]$/.test(err.message) ? "" : "."} ${err.hint}` : ""}`,
      };
      unreadable.push(d);
      all.push(d);
    }
  }
  return { list, unreadable, all };
}

function damagedJson(d: Damaged) {
  return { id: d.id, status: "damaged", reason: d.reason };
}

function rowJson(r: Row, where: "queue" | "failed") {
  return {
    id: r.meta.id,
    status: where === "failed" ? "failed" : "queued",
    created_at: new Date(r.meta.createdAt).toISOString(),
    from: r.meta.envelope.from,
    header_from: r.meta.headerFrom ?? null,
    recipients: r.meta.envelope.to,
    subject: r.meta.subject ?? null,
    size: r.meta.size,
    source: r.meta.source,
    attempts: r.state.attempts,
    next_attempt_at: where === "failed" ? null : new Date(r.state.nextAttemptAt || r.meta.createdAt).toISOString(),
    last_error: r.state.lastError
      ? { code: r.state.lastError.code, message: r.state.lastError.message, exit: r.state.lastError.exit }
      : null,
  };
}

/** `mailsend queue [ls]`, `sendmail -bp`, `mailq`. */
export async function runQueueList(opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as ListFlags;
  try {
    const outbox = Outbox.fromEnv(io.env);
    const where = flags.failed ? "failed" : "queue";
    const { list, unreadable, all } = await rows(outbox, where);
    for (const u of unreadable) io.stderr.write(`warning: ${u.said}\n`);
    const stranded = strandedMailNote(io.env);
    if (stranded) io.stderr.write(`warning: ${stranded}\n`);
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(all.map((r) => ("meta" in r ? rowJson(r, where) : damagedJson(r))))}\n`);
      return 0;
    }
    if (list.length === 0 && unreadable.length === 0) {
      io.stdout.write(
        flags.postfix
          ? "Mail queue is empty\n"
          : `${where === "failed" ? "no failed mail" : "the outbox is empty"} (${outbox.dir})\n`,
      );
      return 0;
    }
    const c = colorsFor(io.stdout, io.env);
    const now = Date.now();
    for (const r of all) {
      if (!("meta" in r)) {
        io.stdout.write(`${c.bold(r.id)}  ${c.red("damaged")}: ${plain(r.reason, 300)}\n`);
        continue;
      }
      const next = where === "failed" ? c.red("failed") : when(r.state.nextAttemptAt, now);
      io.stdout.write(
        `${c.bold(r.meta.id)}  ${formatAge(now - r.meta.createdAt).padStart(4)}  ${formatSize(r.meta.size).padStart(9)}  tries ${r.state.attempts}  next ${next}\n` +
          `  from ${plain(r.meta.envelope.from || "<>")} to ${plain(r.meta.envelope.to.join(", "), 200)}\n` +
          `  subject ${plain(r.meta.subject)}\n` +
          (r.state.lastError ? `  ${c.yellow("last error:")} ${plain(r.state.lastError.message, 300)}\n` : ""),
      );
    }
    const total = list.reduce((n, r) => n + r.meta.size, 0);
    const damaged = unreadable.length
      ? ` (and ${unreadable.length} damaged file${unreadable.length === 1 ? "" : "s"}, named above)`
      : "";
    if (flags.postfix)
      io.stdout.write(
        `-- ${Math.ceil(total / 1024)} Kbytes in ${list.length} Request${list.length === 1 ? "" : "s"}.\n`,
      );
    else
      io.stdout.write(
        c.dim(
          `-- ${list.length} message${list.length === 1 ? "" : "s"}, ${formatSize(total)}${damaged} in ${where === "failed" ? outbox.failedDir : outbox.queueDir}\n`,
        ),
      );
    return 0;
  } catch (e) {
    return reportError(e, io, { json: flags.json ?? false });
  }
}

interface RunFlags {
  watch?: boolean;
  drain?: boolean;
  json?: boolean;
  verbose?: boolean;
  quiet?: boolean;
  concurrency?: number;
  maxAge?: string;
}

function eventLine(e: RunnerEvent, io: CliIO, flags: RunFlags): void {
  const stamp = new Date().toISOString();
  if (flags.json) {
    const base = { at: stamp, event: e.type, ...("id" in e && e.id ? { id: e.id } : {}) };
    if (e.type === "sent")
      io.stdout.write(
        `${JSON.stringify({ ...base, transport: e.transport, reason: e.reason, message_id: e.messageId, recipients: e.recipients, attempts: e.attempts })}\n`,
      );
    else if (e.type === "deferred")
      io.stdout.write(
        `${JSON.stringify({ ...base, error: e.error.toJSON(), attempts: e.attempts, next_attempt_at: new Date(e.nextAttemptAt).toISOString() })}\n`,
      );
    else if (e.type === "failed")
      io.stdout.write(`${JSON.stringify({ ...base, error: e.error.toJSON(), attempts: e.attempts })}\n`);
    else if (e.type === "notice") io.stdout.write(`${JSON.stringify({ ...base, notice_id: e.noticeId, to: e.to })}\n`);
    else io.stderr.write(`${JSON.stringify({ warning: e.message, ...base })}\n`);
    return;
  }
  if (flags.quiet && e.type === "sent") return;
  const c = colorsFor(io.stdout, io.env);
  // -v says why this transport (the outbox's choice: "REST carries it whole", "a text-only body", ...).
  if (e.type === "sent")
    io.stdout.write(
      `${stamp} ${c.green("sent")} ${e.id} ${e.messageId} (${e.transport}${flags.verbose ? `: ${e.reason}` : ""}, to ${e.recipients.join(", ")})\n`,
    );
  else if (e.type === "deferred")
    io.stdout.write(
      `${stamp} ${c.yellow("deferred")} ${e.id}: ${e.error.message}; next attempt in ${formatAge(e.nextAttemptAt - Date.now())}\n`,
    );
  else if (e.type === "notice")
    io.stdout.write(`${stamp} notice ${e.id}: queued as ${e.noticeId} to ${e.to.join(", ")}\n`);
  else if (e.type === "failed")
    io.stdout.write(
      `${stamp} ${c.red("failed")} ${e.id}: ${e.error.message} (moved to failed/; mailsend queue retry ${e.id} to try again)\n`,
    );
  else io.stderr.write(`${stamp} warning: ${e.id ? `${e.id}: ` : ""}${e.message}\n`);
}

/** How long a message may wait before it is given up: --max-age, else MAILSEND_QUEUE_MAX_AGE, else five days. */
function maxAgeOf(flags: RunFlags, env: CliIO["env"]): number {
  if (flags.maxAge) return parseDuration(flags.maxAge, "--max-age");
  if (env.MAILSEND_QUEUE_MAX_AGE) return parseDuration(env.MAILSEND_QUEUE_MAX_AGE, "MAILSEND_QUEUE_MAX_AGE");
  return DEFAULT_MAX_AGE_MS;
}

/** The first SIGINT/SIGTERM lets the deliveries in flight finish; a second one aborts them. */
function stopOnSignals(runner: QueueRunner) {
  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals === 1) runner.stop();
    else runner.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    count: () => signals,
    off: () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

/** What a run did, in each mode; the exit code it ends with. */
function reportRun(summary: RunSummary, runner: QueueRunner, flags: RunFlags, io: CliIO, signals: number): number {
  const json = flags.json ?? false;
  // Run by cron or a timer (stderr not a terminal), a run that did nothing says nothing, as
  // Postfix's sendmail -q: cron would otherwise mail that line every minute.
  const idle = !summary.ran || summary.sent + summary.deferred + summary.failed === 0;
  const quietIdle = idle && !io.stderr.isTTY && !flags.verbose;
  if (!summary.ran) {
    if (!flags.quiet && !flags.drain && !quietIdle)
      io.stderr.write(
        `mailsend: another runner is delivering from ${runner.outbox.dir}; ${summary.left} message${summary.left === 1 ? "" : "s"} queued\n`,
      );
    return 0;
  }
  if (json)
    io.stdout.write(
      `${JSON.stringify({ summary: { sent: summary.sent, deferred: summary.deferred, failed: summary.failed, left: summary.left } })}\n`,
    );
  else if (!flags.quiet && !quietIdle)
    io.stderr.write(
      `mailsend: sent ${summary.sent}, deferred ${summary.deferred}, failed ${summary.failed}; ${summary.left} left in the outbox\n`,
    );
  if (signals > 0) return signals > 1 ? 130 : 0;
  // A full or read-only disk kept mail from going (or from being recorded): said, with its exit code (73/74), not 0.
  if (summary.localFault) return reportError(summary.localFault, io, { json });
  return 0;
}

/** `mailsend queue run`, `sendmail -q`, and the background runner (--drain). */
export async function runQueueRun(opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as RunFlags;
  const json = flags.json ?? false;
  try {
    const c = colorsFor(io.stderr, io.env);
    const trace = flags.verbose ? (line: string) => io.stderr.write(`${c.dim(line)}\n`) : undefined;
    const runner = new QueueRunner({
      env: io.env,
      mode: flags.watch ? "watch" : flags.drain ? "drain" : "due",
      ...(flags.concurrency ? { concurrency: flags.concurrency } : {}),
      maxAgeMs: maxAgeOf(flags, io.env),
      onEvent: (e) => eventLine(e, io, flags),
      ...(trace ? { trace } : {}),
    });
    const signals = stopOnSignals(runner);
    try {
      if (flags.watch && !json && !flags.quiet)
        io.stderr.write(`mailsend: delivering from ${runner.outbox.dir} as mail arrives (Ctrl-C to stop)\n`);
      const summary = await runner.run();
      return reportRun(summary, runner, flags, io, signals.count());
    } finally {
      signals.off();
    }
  } catch (e) {
    return reportError(e, io, { json });
  }
}

function checkId(id: string): string {
  if (!isOutboxId(id))
    throw new MailsendError("usage", `not an outbox id: ${shownWord(id, (w) => JSON.stringify(w.slice(0, 40)))}`, {
      hint: "The ids are in the first column of `mailsend queue` (and `mailsend queue --failed`).",
    });
  return id;
}

/** `mailsend queue retry <id>|--all`: due now, and back from failed/. */
export async function runQueueRetry(id: string | undefined, opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const json = (opts.json as boolean | undefined) ?? false;
  try {
    const outbox = Outbox.fromEnv(io.env);
    let ids: string[];
    if (opts.all) ids = [...(await outbox.ids("failed")), ...(await outbox.ids("queue"))];
    else if (id) ids = [checkId(id)];
    else throw new MailsendError("usage", "name an id, or --all");
    let n = 0;
    for (const one of ids) if (await outbox.retry(one)) n++;
    if (id && n === 0)
      throw new MailsendError("file_not_found", `no message ${shownWord(id)} in the outbox`, {
        hint: "mailsend queue and mailsend queue --failed list what is there.",
      });
    // A runner delivering now (the relay, --watch, the background one) has its own schedule: the stamp tells it.
    if (n > 0) await outbox.markRetried();
    const running = runnerHoldsOutbox(outbox);
    if (json) io.stdout.write(`${JSON.stringify({ retried: n, runner: running })}\n`);
    else
      io.stderr.write(
        `mailsend: ${n} message${n === 1 ? "" : "s"} due now; ${running ? `the runner delivering from ${outbox.dir} takes ${n === 1 ? "it" : "them"} within seconds` : `mailsend queue run delivers ${n === 1 ? "it" : "them"}`}\n`,
      );
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

/** `mailsend queue rm <id>`: a person's decision; the only way queued mail is deleted. */
export async function runQueueRm(ids: string[], opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const json = (opts.json as boolean | undefined) ?? false;
  try {
    const outbox = Outbox.fromEnv(io.env);
    const missing: string[] = [];
    for (const id of ids.map(checkId)) {
      const a = await outbox.remove(id, "queue");
      const b = await outbox.remove(id, "failed");
      if (!a && !b) missing.push(id);
    }
    if (missing.length) throw new MailsendError("file_not_found", `not in the outbox: ${missing.join(", ")}`);
    if (json) io.stdout.write(`${JSON.stringify({ removed: ids.length })}\n`);
    else io.stderr.write(`mailsend: removed ${ids.length} message${ids.length === 1 ? "" : "s"}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

/** `mailsend queue purge --failed`. */
export async function runQueuePurge(opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const json = (opts.json as boolean | undefined) ?? false;
  try {
    if (!opts.failed)
      throw new MailsendError("usage", "queue purge removes the failed messages only: say --failed", {
        hint: "To remove queued mail, name it: mailsend queue rm <id>.",
      });
    const outbox = Outbox.fromEnv(io.env);
    const ids = await outbox.ids("failed");
    for (const id of ids) await outbox.remove(id, "failed");
    if (json) io.stdout.write(`${JSON.stringify({ removed: ids.length })}\n`);
    else io.stderr.write(`mailsend: removed ${ids.length} failed message${ids.length === 1 ? "" : "s"}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

interface CheckFlags {
  warningAge?: string;
  criticalAge?: string;
  warningCount?: number;
  criticalCount?: number;
  json?: boolean;
}

/** The thresholds, checked: a warning above its critical is a mistake (UNKNOWN, as plugins do). */
function checkThresholds(f: CheckFlags): CheckThresholds {
  const t: CheckThresholds = {
    warningAgeMs: parseDuration(f.warningAge ?? "1h", "--warning-age"),
    criticalAgeMs: parseDuration(f.criticalAge ?? "4h", "--critical-age"),
    ...(f.warningCount !== undefined ? { warningCount: f.warningCount } : {}),
    ...(f.criticalCount !== undefined ? { criticalCount: f.criticalCount } : {}),
  };
  if (t.warningAgeMs! > t.criticalAgeMs!)
    throw new MailsendError("usage", "--warning-age is longer than --critical-age");
  if (t.warningCount !== undefined && t.criticalCount !== undefined && t.warningCount > t.criticalCount)
    throw new MailsendError("usage", "--warning-count is above --critical-count");
  return t;
}

/** Nagios performance data: 'label'=value[unit];warn;crit;min. */
function perfData(c: QueueCounts, t: CheckThresholds): string {
  const n = (v: number | undefined) => (v === undefined ? "" : String(v));
  const s = (ms: number | undefined) => (ms === undefined ? "" : String(Math.round(ms / 1000)));
  return `queued=${c.queued};${n(t.warningCount)};${n(t.criticalCount)};0 failed=${c.failed};;;0 oldest=${s(c.oldestMs ?? 0)}s;${s(t.warningAgeMs)};${s(t.criticalAgeMs)};0`;
}

/** `mailsend queue check`: one status line with performance data, and Nagios's exit code. */
export async function runQueueCheck(opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as CheckFlags;
  let counts: QueueCounts;
  let thresholds: CheckThresholds;
  try {
    thresholds = checkThresholds(flags);
    const outbox = Outbox.fromEnv(io.env);
    const queued = await rows(outbox, "queue");
    const failed = await rows(outbox, "failed");
    const now = Date.now();
    const oldest = queued.list.reduce((min, r) => Math.min(min, r.meta.createdAt), Infinity);
    counts = {
      queued: queued.list.length,
      failed: failed.list.length,
      damaged: queued.unreadable.length + failed.unreadable.length,
      ...(Number.isFinite(oldest) ? { oldestMs: Math.max(0, now - oldest) } : {}),
    };
  } catch (e) {
    const err = toMailsendError(e);
    if (flags.json)
      io.stdout.write(
        `${JSON.stringify({ status: "UNKNOWN", exit: CHECK_EXIT.UNKNOWN, error: { code: err.code, message: err.message } })}\n`,
      );
    else io.stdout.write(`QUEUE UNKNOWN - ${plain(err.message, 300)}\n`);
    return CHECK_EXIT.UNKNOWN;
  }
  const { status, reasons } = judgeQueue(counts, thresholds, formatAge);
  if (flags.json) {
    const ms = (v: number | undefined) => (v === undefined ? null : Math.round(v / 1000));
    io.stdout.write(
      `${JSON.stringify({ status, exit: CHECK_EXIT[status], queued: counts.queued, failed: counts.failed, damaged: counts.damaged, oldest_age_s: ms(counts.oldestMs), reasons, thresholds: { warning_age_s: ms(thresholds.warningAgeMs), critical_age_s: ms(thresholds.criticalAgeMs), warning_count: thresholds.warningCount ?? null, critical_count: thresholds.criticalCount ?? null } })}\n`,
    );
  } else {
    const summary = `${counts.queued} queued, ${counts.failed} failed, oldest ${counts.oldestMs === undefined ? "-" : formatAge(counts.oldestMs)}`;
    io.stdout.write(
      `QUEUE ${status} - ${summary}${reasons.length ? ` (${reasons.join("; ")})` : ""} | ${perfData(counts, thresholds)}\n`,
    );
  }
  return CHECK_EXIT[status];
}
