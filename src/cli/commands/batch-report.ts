/**
 * What `mailsend batch` says as it runs and when it ends: each item's result, the progress
 * line and the waits, the summary, the GitHub outputs, and the exit code.
 */
import { redactForPrint } from "../../core/redact.js";
import type { Counts } from "../../batch/counts.js";
import type { Journal } from "../../batch/journal.js";
import { ResultsFile } from "../../batch/results-file.js";
import type { BatchSummary, ItemResult } from "../../batch/runner.js";
import type { WaitInfo } from "../../limits/deliver.js";
import { annotation, inGitHubActions, writeGitHubOutputs } from "../github.js";
import { colorsFor, type CliIO } from "../io.js";
import type { Progress } from "../progress.js";
import { waitText } from "../progress.js";

/** The flags that decide what the batch says. */
export interface ReportFlags {
  results?: string;
  check?: boolean;
  json?: boolean;
  quiet?: boolean;
  githubOutput?: boolean;
}

function summaryLine(c: Counts & { elapsedMs: number; not_started?: number; stopped?: string }): string {
  const parts = [`${c.sent} sent${c.partial ? ` (${c.partial} with refused recipients)` : ""}`];
  if (c.skipped) parts.push(`${c.skipped} already sent`);
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.unknown) parts.push(`${c.unknown} outcome unknown`);
  if (c.invalid) parts.push(`${c.invalid} invalid`);
  if (c.not_started)
    parts.push(
      `${c.not_started} not started (${c.stopped === "budget" ? "the rate-limit budget could not be reached" : "interrupted"})`,
    );
  return `${parts.join(", ")} (of ${c.total}) in ${(c.elapsedMs / 1000).toFixed(1)} s`;
}

/** Each item's result: a line of the results file and of --json, the failures said on stderr (a hint once per mistake). */
export function itemReporter(
  flags: ReportFlags,
  io: CliIO,
  say: (text: string) => void,
  journalPath: string | undefined,
) {
  const results = flags.results ? ResultsFile.open(flags.results, journalPath, say) : undefined;
  const c = colorsFor(io.stderr, io.env);
  const json = flags.json ?? false;
  // A bad row's hint says how to fix it; rows with the same mistake get it once (the
  // start of a hint names the mistake, the rest may quote the row: compare the start).
  const hintsShown = new Set<string>();
  // Items left in doubt, for the report after a second interrupt.
  const unknownItems: ItemResult[] = [];
  const onResult = (r: ItemResult) => {
    if (r.status === "unknown") unknownItems.push(r);
    // Made only for something that shows it: most items of a quiet run need no text at all.
    const line = results !== undefined || json ? `${JSON.stringify(r)}\n` : "";
    results?.write(line, r.index);
    if (json) io.stdout.write(line);
    else if (
      !flags.quiet &&
      (r.status === "invalid" || r.status === "failed" || r.status === "unknown" || r.status === "partial")
    ) {
      const label = r.status === "unknown" || r.status === "partial" ? c.yellow(r.status) : c.red(r.status);
      io.stderr.write(`${label}: ${r.error?.message ?? `item ${r.index + 1}`}\n`);
      const hint = r.status === "invalid" ? r.error?.hint : undefined;
      if (hint && !hintsShown.has(hint.slice(0, 48))) {
        hintsShown.add(hint.slice(0, 48));
        io.stderr.write(`${c.dim("hint:")} ${hint}\n`);
      }
    }
  };
  return { onResult, unknownItems, close: () => results?.close() };
}

/** The progress line, and what a wait (the budget, a retry) says in each mode. */
export function progressReporter(flags: ReportFlags, io: CliIO, progress: Progress) {
  const json = flags.json ?? false;
  const started = Date.now();
  // Off a terminal the first line comes one interval in: a "sent 0, failed 0" before
  // anything was sent reads like a failure in a CI log. --check sends nothing to count.
  const lineEveryMs = 5000;
  let lastLine = started;
  let lastDraw = 0;
  const onProgress = (p: Counts & { left: number }) => {
    // Called once per item: the text is made at most every 100 ms, and only when something shows it.
    if (flags.quiet || json || Date.now() - lastDraw < 100) return;
    lastDraw = Date.now();
    const done = p.sent + p.skipped;
    const secs = (Date.now() - started) / 1000;
    const rate = secs > 0 ? p.sent / secs : 0;
    const eta = rate > 0 ? Math.ceil(p.left / rate) : undefined;
    const text = `sent ${done}, failed ${p.failed + p.unknown}, left ${p.left}${rate ? `, ${rate.toFixed(1)}/s` : ""}${eta !== undefined ? `, ETA ${eta} s` : ""}`;
    progress.update(text);
    // Off a terminal, a line every few seconds is enough to show it is alive.
    if (!progress.interactive && !flags.check && Date.now() - lastLine >= lineEveryMs) {
      lastLine = Date.now();
      io.stderr.write(`mailsend batch: ${text}\n`);
    }
  };
  let quietWaitSaid = false;
  let lastWaitLine = 0;
  const onWait = (w: WaitInfo) => {
    const why =
      w.reason === "budget"
        ? "rate limit for this key reached"
        : `${w.error?.message ?? "temporary failure"}; retry ${w.attempt - 1}`;
    progress.update(
      w.reason === "budget" ? `waiting ${waitText(w.ms)} for the rate limit` : `${why}; waiting ${waitText(w.ms)}`,
    );
    if (json) return;
    // -q shows no progress; a long wait is still said once, so the run does not look hung.
    if (flags.quiet) {
      if (w.reason === "budget" && w.ms > 10_000 && !quietWaitSaid) {
        quietWaitSaid = true;
        io.stderr.write(`mailsend batch: rate limit for this key reached; waiting ${waitText(w.ms)}\n`);
      }
      return;
    }
    // Off a terminal the progress lines come as items finish: a wait (the key's budget, the
    // service's 429 and its Retry-After) left a CI log silent for up to a minute. Said when it
    // is long enough to be noticed, at most once per line interval (each item in flight waits).
    if (!progress.interactive && !flags.check && w.ms >= 5_000 && Date.now() - lastWaitLine >= lineEveryMs) {
      lastWaitLine = Date.now();
      io.stderr.write(`mailsend batch: ${redactForPrint(why)}; waiting ${waitText(w.ms)}\n`);
    }
  };
  return { onProgress, onWait };
}

export interface EndContext {
  summary: BatchSummary;
  aborted: boolean;
  secondSignal: NodeJS.Signals | undefined;
  journal: Journal | undefined;
  file: string;
  flags: ReportFlags;
  io: CliIO;
  say: (text: string) => void;
  unknownItems: ItemResult[];
}

type Reported = BatchSummary & { interrupted?: true; not_started?: number };

/**
 * How the run ended. Interrupted, the summary says so, counts the items that never started, and
 * carries the exit code the process ends with (75; 130 / 143 interrupted twice), not the one of
 * what was done.
 */
function endOf({ summary, aborted, secondSignal }: EndContext) {
  const unfinished = summary.failed + summary.unknown + (aborted ? 1 : 0) > 0;
  const exitCode = secondSignal ? (secondSignal === "SIGTERM" ? 143 : 130) : aborted ? 75 : summary.exitCode;
  const notStarted = Math.max(
    0,
    summary.total - summary.invalid - summary.sent - summary.failed - summary.skipped - summary.unknown,
  );
  const reported: Reported = aborted
    ? { ...summary, exitCode, interrupted: true, not_started: notStarted }
    : summary.stopped
      ? { ...summary, not_started: notStarted }
      : summary;
  return { unfinished, exitCode, reported };
}

/**
 * The invalid rows' hints say to fix the data; a fixed file is an edited input, which a re-run
 * takes for a new batch and sends whole. Said where the fix is made, not only after the re-run.
 */
function warnEditedInput({ summary, journal, file, say }: EndContext, unfinished: boolean): void {
  const delivered = summary.sent + summary.skipped;
  if (!journal || unfinished || summary.invalid === 0 || delivered === 0) return;
  const rows = `${summary.invalid} invalid row${summary.invalid === 1 ? " was" : "s were"} not sent`;
  const input = file === "-" ? "the input" : file;
  say(
    `${rows}. Editing ${input} to fix ${summary.invalid === 1 ? "it" : "them"} makes it a new batch: running it again would send every row again, also the ${delivered} already sent. Put the fixed rows (with the header) in a file of their own`,
  );
}

/** The summary in each mode, and where the journal is when something did not go out. */
function saySummary({ summary, journal, flags, io }: EndContext, reported: Reported, unfinished: boolean): void {
  if (flags.json) {
    io.stderr.write(
      `${JSON.stringify({ summary: { ...reported, journal: journal?.path ?? null, check: flags.check ?? false } })}\n`,
    );
    return;
  }
  if (flags.quiet) return;
  const line = flags.check
    ? `${summary.total - summary.invalid} valid, ${summary.invalid} invalid (of ${summary.total}); nothing sent (--check)`
    : summaryLine(reported);
  io.stdout.write(`${line}\n`);
  if (journal && unfinished)
    io.stderr.write(
      `${colorsFor(io.stderr, io.env).dim(`journal: ${journal.path} — run the same command again to retry what did not go out`)}\n`,
    );
}

/** --github-output's counts, and an error annotation in a workflow's log when items did not go. */
function reportToGitHub({ summary, journal, flags, io, say }: EndContext, unfinished: boolean): void {
  if (flags.githubOutput) {
    const { sent, skipped, failed, unknown, invalid, total, partial } = summary;
    const problem = writeGitHubOutputs(io.env, {
      sent,
      already_sent: skipped,
      failed,
      unknown,
      invalid,
      total,
      partial,
    });
    if (problem) say(problem);
  }
  if (inGitHubActions(io.env) && summary.failed + summary.unknown + summary.invalid > 0) {
    io.stderr.write(
      annotation(
        "error",
        `batch: ${summaryLine(summary)}`,
        journal && unfinished ? "Run the same command again to retry what did not go out." : undefined,
      ),
    );
  }
}

/**
 * Interrupted twice: the sends in flight were cut. Says which items may or may not have gone
 * out; the process then exits as a shell reports the signal (130 for SIGINT, 143 for SIGTERM).
 */
function sayInDoubt({ flags, io, unknownItems }: EndContext, signal: NodeJS.Signals): void {
  const which = unknownItems.map(
    (r) => `${r.index + 1} (line ${r.line}${r.recipients.length ? `, to ${r.recipients.join(", ")}` : ""})`,
  );
  const text = which.length
    ? `interrupted twice: the outcome of item${which.length === 1 ? "" : "s"} ${which.join("; ")} is unknown: it may have been sent. Run the same command again: it resends ${which.length === 1 ? "it" : "them"} with the same idempotency key${which.length === 1 ? "" : "s"}, which the service de-duplicates`
    : "interrupted twice: no item was in doubt; run the same command again to send the rest";
  if (flags.json)
    io.stderr.write(
      `${JSON.stringify({ interrupted: { signal, unknown: unknownItems.map((r) => r.index) }, message: text })}\n`,
    );
  else io.stderr.write(`mailsend batch: ${text}\n`);
}

/** The summary in each mode, the GitHub outputs, and the exit code the batch ends with. */
export function reportEnd(ctx: EndContext): number {
  const { unfinished, exitCode, reported } = endOf(ctx);
  warnEditedInput(ctx, unfinished);
  saySummary(ctx, reported, unfinished);
  reportToGitHub(ctx, unfinished);
  if (ctx.secondSignal) sayInDoubt(ctx, ctx.secondSignal);
  return exitCode;
}
