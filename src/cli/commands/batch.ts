import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import {
  closeSync,
  createReadStream,
  createWriteStream,
  fsyncSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  writeSync,
} from "node:fs";
import { redactForPrint } from "../../core/redact.js";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { HeaderList } from "../../core/headers.js";
import { parseHeaderFlag } from "../../core/headers.js";
import { localFileError, MailsendError } from "../../core/errors.js";
import { fingerprint, legacyFingerprint } from "../../batch/journal.js";
import { openBatchJournal, type InputIds } from "../../batch/journal-place.js";

import type { RowDefaults } from "../../batch/item.js";
import { encodingName, formatFromContent, formatFromName, type Format } from "../../batch/rows.js";
import { runBatch, type BatchInput, type Counts, type ItemResult } from "../../batch/runner.js";
import { cliLayers, resolveSettings, type ConnectionFlags, type Settings } from "../../settings/resolve.js";
import type { Env } from "../../core/env.js";
import type { Journal } from "../../batch/journal.js";
import type { WaitInfo } from "../../limits/deliver.js";
import type { TransportConfig } from "../../core/config.js";
import type { TransportName } from "../../core/transport.js";
import type { Channels } from "../../transports/choose.js";
import { bodyComposeOf } from "../../message/build.js";
import { ImageCache } from "../../compose/cache.js";
import { loadSettings } from "../../settings/profile.js";
import { fileError, regularFileSize, utf8, type InputStreams } from "../../core/read.js";
import { createAutoTransport, createTransport } from "../../transports/index.js";
import { openBudget, type BudgetCliFlags } from "../budget.js";
import { colorsFor, type CliIO } from "../io.js";
import { Progress, waitText } from "../progress.js";
import { reportError, warn } from "../report.js";
import { annotation, inGitHubActions, writeGitHubOutputs } from "../github.js";

interface BatchFlags extends ConnectionFlags, BudgetCliFlags {
  from?: string;
  name?: string;
  replyTo?: string;
  subject?: string;
  header?: string[];
  attach?: string[];
  htmlFile?: string;
  textFile?: string;
  markdownFile?: string;
  allowHtml?: boolean;
  baseDir?: string;
  embed?: boolean;
  inlineCss?: boolean;
  format?: Format;
  encoding?: string;
  concurrency?: number;
  check?: boolean;
  failFast?: boolean;
  results?: string;
  journal?: string;
  resume?: boolean;
  fresh?: boolean;
  json?: boolean;
  quiet?: boolean;
  githubOutput?: boolean;
  profile?: string;
}

async function template(path: string | undefined, what: string): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return utf8(await readFile(path), path);
  } catch (e) {
    throw e instanceof MailsendError ? e : fileError(e, path, what);
  }
}

/**
 * The body templates: --html-file / --text-file, or --markdown-file for both
 * (rendered once, placeholders kept, filled per row like the others).
 */
async function bodyTemplates(
  flags: BatchFlags,
): Promise<Pick<RowDefaults, "htmlTemplate" | "textTemplate" | "templateFlag" | "textIsPlainHtml">> {
  if (flags.allowHtml && flags.markdownFile === undefined)
    throw new MailsendError("usage", "--allow-html applies only to --markdown-file");
  if (flags.markdownFile !== undefined) {
    const clash = [flags.htmlFile !== undefined && "--html-file", flags.textFile !== undefined && "--text-file"].filter(
      Boolean,
    );
    if (clash.length > 0)
      throw new MailsendError(
        "usage",
        `--markdown-file makes the HTML and the text template; it cannot be combined with ${clash.join(", ")}`,
      );
    const { renderMarkdownTemplate, stripFrontMatter } = await import("../../message/markdown.js");
    const source = stripFrontMatter((await template(flags.markdownFile, "Markdown template"))!);
    return {
      htmlTemplate: await renderMarkdownTemplate(source, { allowHtml: flags.allowHtml ?? false }),
      textTemplate: source,
      templateFlag: "--markdown-file",
      textIsPlainHtml: true,
    };
  }
  return {
    ...(flags.htmlFile ? { htmlTemplate: (await template(flags.htmlFile, "HTML template"))! } : {}),
    ...(flags.textFile ? { textTemplate: (await template(flags.textFile, "text template"))! } : {}),
  };
}

/**
 * The input, readable twice (validation, then sending). Stdin is spooled to
 * a private temp file; its hash names the journal, so re-running the same
 * pipeline resumes it.
 */
async function openInput(
  file: string,
  io: CliIO,
  format: Format | undefined,
): Promise<{ input: BatchInput; identity: string; fp: InputIds; cleanup: () => void }> {
  let path = file;
  let cleanup = () => {};
  let identity: string;
  let fp: InputIds;
  if (file === "-") {
    const dir = join(tmpdir(), `mailsend-batch-${process.pid}-${Date.now()}`);
    path = join(dir, "stdin");
    const hash = createHash("sha256");
    try {
      mkdirSync(dir, { mode: 0o700 });
      cleanup = () => rmSync(dir, { recursive: true, force: true });
      const out = createWriteStream(path, { mode: 0o600 });
      let failed: Error | undefined;
      out.on("error", (e) => (failed ??= e));
      for await (const chunk of io.stdin) {
        if (failed) throw failed;
        const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
        hash.update(buf);
        if (!out.write(buf))
          await new Promise<void>((r) => (out.once("drain", () => r()), out.once("error", () => r())));
      }
      await new Promise<void>((r, j) => out.end((e?: Error | null) => ((e ?? failed) ? j(e ?? failed) : r())));
    } catch (e) {
      cleanup();
      // The spool is a local file: a full or read-only temp dir is this machine's fault (73), said as such.
      throw (e as NodeJS.ErrnoException).code
        ? localFileError(e, path, "write", "copy of stdin (set TMPDIR to move it)")
        : e;
    }
    identity = `stdin:${hash.digest("hex").slice(0, 32)}`;
    fp = { input: identity };
  } else {
    await regularFileSize(file, "batch input");
    identity = `file:${resolve(file)}`;
    fp = { input: await fingerprint(file), legacyInput: await legacyFingerprint(file) };
  }
  let fmt = format ?? (file === "-" ? undefined : formatFromName(file));
  if (!fmt) {
    const fd = openSync(path, "r");
    const head = Buffer.alloc(256);
    const n = readSync(fd, head, 0, 256, 0);
    closeSync(fd);
    fmt = formatFromContent(head.subarray(0, n));
  }
  const input: BatchInput = { format: fmt, open: () => createReadStream(path, { highWaterMark: 64 * 1024 }) };
  return { input, identity, fp, cleanup };
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

/** Under auto, each row's message chooses among the configured channels (REST unless it would lose something, then SMTP). */
function batchChannels(run: Settings): {
  config: TransportConfig;
  auto?: { channels: Channels; configs: Partial<Record<TransportName, TransportConfig>> };
} {
  if (run.transport !== "auto") return { config: run.channel(run.transport) };
  const channels = run.configured;
  const configs: Partial<Record<TransportName, TransportConfig>> = {};
  for (const name of ["rest", "smtp"] as const) if (channels[name]) configs[name] = run.channel(name);
  return { config: (configs.rest ?? configs.smtp)!, auto: { channels, configs } };
}

/** What each row's message starts from: the flags' sender, subject, templates, headers and attachments. */
async function rowDefaults(flags: BatchFlags, env: Env, file: string): Promise<RowDefaults> {
  const headers: HeaderList = (flags.header ?? []).map(parseHeaderFlag);
  const from = flags.from ?? (env.MAILSEND_FROM || undefined);
  return {
    ...(from ? { from } : {}),
    ...(flags.name ? { name: flags.name } : {}),
    ...(flags.replyTo ? { replyTo: flags.replyTo } : {}),
    ...(flags.subject !== undefined ? { subject: flags.subject } : {}),
    ...(await bodyTemplates(flags)),
    headers,
    attach: flags.attach ?? [],
    // Local images of each row's HTML resolve against the template's directory; each file is read once.
    compose: { ...bodyComposeOf({ ...flags, inline: [] }), cache: new ImageCache() },
    ...(file !== "-" ? { inputDir: dirname(resolve(file)) } : {}),
  };
}

/** Each item's result: a line of the results file and of --json, the failures said on stderr (a hint once per mistake). */
function itemReporter(flags: BatchFlags, io: CliIO, say: (text: string) => void, journalPath: string | undefined) {
  let resultsFd: number | undefined;
  if (flags.results) {
    try {
      // Each run reports every item (what an earlier run sent, as skipped), so the
      // file is rewritten: appending would give an item one line per run.
      // 0600 like the journal: it holds addresses and subjects.
      resultsFd = openSync(flags.results, "w", 0o600);
    } catch (e) {
      throw localFileError(e, flags.results, "write", "results file");
    }
  }
  const c = colorsFor(io.stderr, io.env);
  const json = flags.json ?? false;
  // A bad row's hint says how to fix it; rows with the same mistake get it once (the
  // start of a hint names the mistake, the rest may quote the row: compare the start).
  const hintsShown = new Set<string>();
  // Items left in doubt, for the report after a second interrupt.
  const unknownItems: ItemResult[] = [];
  let resultsFailed = false;
  const onResult = (r: ItemResult) => {
    if (r.status === "unknown") unknownItems.push(r);
    // Made only for something that shows it: most items of a quiet run need no text at all.
    const line = resultsFd !== undefined || json ? `${JSON.stringify(r)}\n` : "";
    if (resultsFd !== undefined && !resultsFailed) {
      try {
        const buf = Buffer.from(line);
        // A full disk may take part of a write before refusing the rest: the rest is tried, so the refusal is seen.
        for (let off = 0; off < buf.length; ) off += writeSync(resultsFd, buf, off);
      } catch (e) {
        // The items are sent (or not) whatever the report says: a results file that cannot be
        // written is said once, and the journal still knows each item's state.
        resultsFailed = true;
        say(
          `${localFileError(e, flags.results!, "write", "results file").message}; the batch goes on (the journal ${journalPath ?? ""} still records every item), but this file is incomplete from item ${r.index + 1} on`,
        );
      }
    }
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
  const close = () => {
    if (resultsFd === undefined) return;
    try {
      fsyncSync(resultsFd);
    } catch (e) {
      if (!resultsFailed)
        say(
          `${localFileError(e, flags.results!, "sync", "results file").message}; it may be incomplete (the journal still records every item)`,
        );
    }
    closeSync(resultsFd);
  };
  return { onResult, unknownItems, close };
}

/** The progress line, and what a wait (the budget, a retry) says in each mode. */
function progressReporter(flags: BatchFlags, io: CliIO, progress: Progress) {
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

interface EndContext {
  summary: Awaited<ReturnType<typeof runBatch>>;
  aborted: boolean;
  secondSignal: NodeJS.Signals | undefined;
  journal: Journal | undefined;
  file: string;
  flags: BatchFlags;
  io: CliIO;
  say: (text: string) => void;
  unknownItems: ItemResult[];
}

/** The summary in each mode, the GitHub outputs, and the exit code the batch ends with. */
function reportEnd(ctx: EndContext): number {
  const { summary, aborted, secondSignal, journal, file, flags, io, say, unknownItems } = ctx;
  const json = flags.json ?? false;
  const c = colorsFor(io.stderr, io.env);
  const unfinished = summary.failed + summary.unknown + (aborted ? 1 : 0) > 0;
  // Interrupted: the summary says so, counts the items that never started, and carries the exit
  // code the process ends with (75; 130 / 143 interrupted twice), not the one of what was done.
  const exitCode = secondSignal ? (secondSignal === "SIGTERM" ? 143 : 130) : aborted ? 75 : summary.exitCode;
  const notStarted = Math.max(
    0,
    summary.total - summary.invalid - summary.sent - summary.failed - summary.skipped - summary.unknown,
  );
  const reported = aborted
    ? { ...summary, exitCode, interrupted: true, not_started: notStarted }
    : summary.stopped
      ? { ...summary, not_started: notStarted }
      : summary;
  // The invalid rows' hints say to fix the data; a fixed file is an edited input, which a re-run
  // takes for a new batch and sends whole. Said where the fix is made, not only after the re-run.
  const delivered = summary.sent + summary.skipped;
  if (journal && !unfinished && summary.invalid > 0 && delivered > 0) {
    const rows = `${summary.invalid} invalid row${summary.invalid === 1 ? " was" : "s were"} not sent`;
    const input = file === "-" ? "the input" : file;
    say(
      `${rows}. Editing ${input} to fix ${summary.invalid === 1 ? "it" : "them"} makes it a new batch: running it again would send every row again, also the ${delivered} already sent. Put the fixed rows (with the header) in a file of their own`,
    );
  }
  if (json) {
    io.stderr.write(
      `${JSON.stringify({ summary: { ...reported, journal: journal?.path ?? null, check: flags.check ?? false } })}\n`,
    );
  } else if (!flags.quiet) {
    const line = flags.check
      ? `${summary.total - summary.invalid} valid, ${summary.invalid} invalid (of ${summary.total}); nothing sent (--check)`
      : summaryLine(reported);
    io.stdout.write(`${line}\n`);
    if (journal && unfinished)
      io.stderr.write(
        `${c.dim(`journal: ${journal.path} — run the same command again to retry what did not go out`)}\n`,
      );
  }
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
  if (secondSignal) {
    // Interrupted twice: the sends in flight were cut. Say which items may or may not have gone
    // out, then exit as a shell reports the signal (130 for SIGINT, 143 for SIGTERM).
    const which = unknownItems.map(
      (r) => `${r.index + 1} (line ${r.line}${r.recipients.length ? `, to ${r.recipients.join(", ")}` : ""})`,
    );
    const text = which.length
      ? `interrupted twice: the outcome of item${which.length === 1 ? "" : "s"} ${which.join("; ")} is unknown: it may have been sent. Run the same command again: it resends ${which.length === 1 ? "it" : "them"} with the same idempotency key${which.length === 1 ? "" : "s"}, which the service de-duplicates`
      : "interrupted twice: no item was in doubt; run the same command again to send the rest";
    if (json)
      io.stderr.write(
        `${JSON.stringify({ interrupted: { signal: secondSignal, unknown: unknownItems.map((r) => r.index) }, message: text })}\n`,
      );
    else io.stderr.write(`mailsend batch: ${text}\n`);
  }
  return exitCode;
}

/**
 * The first interrupt stops the batch: nothing new starts and the messages in flight finish
 * (aborting them would leave them in doubt). A second one aborts those too.
 */
function stopOnSignals(flags: BatchFlags, io: CliIO, progress: Progress, concurrency: number) {
  const json = flags.json ?? false;
  const abort = new AbortController();
  const abortSends = new AbortController();
  // Each send in flight listens on them (one per item, so up to --concurrency): above
  // that, Node's leak warning would be real; below, it is only noise on stderr.
  setMaxListeners(concurrency + 10, abort.signal, abortSends.signal);
  let secondSignal: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (abort.signal.aborted) {
      secondSignal ??= sig;
      abortSends.abort(new MailsendError("temporary_failure", "interrupted twice"));
      return;
    }
    abort.abort(new MailsendError("temporary_failure", "interrupted"));
    progress.stop();
    if (!flags.quiet && !json)
      io.stderr.write("mailsend batch: stopping; the messages in flight finish (interrupt again to abort them)\n");
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    abort,
    abortSends,
    secondSignal: () => secondSignal,
    off: () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

/** The flags that contradict each other or the input, refused before anything is read; gives the concurrency. */
function checkBatchFlags(file: string, flags: BatchFlags): number {
  if (file === "-" && flags.apiKeyStdin)
    throw new MailsendError("usage", "stdin cannot hold both the batch input and the API key");
  if (flags.resume && flags.fresh) throw new MailsendError("usage", "--resume and --fresh contradict each other");
  const concurrency = flags.concurrency ?? 4;
  if (concurrency < 1 || concurrency > 64) throw new MailsendError("usage", "--concurrency must be from 1 to 64");
  return concurrency;
}

/** The layered settings and the channel (or, under auto, the channels) the rows are sent through. */
async function batchConnection(flags: BatchFlags, io: CliIO) {
  // flags > environment > profile > defaults: the profile is layered under the environment here.
  const settings = loadSettings(flags.profile, io.env);
  // stdin is made only if --api-key-stdin reads it: a batch from a file never needs the stream.
  const streams = <T extends object>(o: T): T & InputStreams =>
    Object.defineProperty(o, "stdin", { get: () => io.stdin, enumerable: true }) as T & InputStreams;
  // auto: as for send, each row's message chooses its channel among those configured (REST
  // unless it would lose something, then SMTP); the key is read once for both.
  const run = await resolveSettings(
    cliLayers(flags, settings.env, settings.profile),
    streams({ needKey: !flags.check, needChannel: true }),
  );
  return { env: settings.env, ...batchChannels(run) };
}

/** The decoder --encoding names, or undefined when the flag is absent and the input's own encoding is used. */
function inputEncoding(flags: BatchFlags): string | undefined {
  if (flags.encoding === undefined) return undefined;
  const encoding = encodingName(flags.encoding);
  if (encoding === undefined) {
    throw new MailsendError("usage", `--encoding: no such encoding: ${flags.encoding}`, {
      hint: "Give a name such as windows-1252, iso-8859-15, macintosh or utf-16le.",
    });
  }
  return encoding;
}

type Connection = Awaited<ReturnType<typeof batchConnection>>;

/** The transport and rate-limit budget the rows go through; a --check sends nothing and opens neither. */
async function openSending(flags: BatchFlags, connection: Connection, concurrency: number) {
  if (flags.check) return {};
  const { config, auto, env } = connection;
  const transport = auto
    ? createAutoTransport(auto.configs, { pool: concurrency })
    : await createTransport(config, { pool: concurrency });
  const budget = await openBudget(flags, config.apiKey, env, config.caFile ? { caFile: config.caFile } : {});
  return { transport, budget };
}

type Sending = Awaited<ReturnType<typeof openSending>>;

/** Closes what the run opened. Closing is book-keeping: after items were sent, its failure is a warning, not the batch's exit status. */
async function closeSending(sending: Sending, journal: Journal | undefined, say: (text: string) => void) {
  await sending.transport?.close();
  await sending.budget
    ?.close()
    .catch((e: unknown) => say(`closing the rate-limit budget failed: ${e instanceof Error ? e.message : String(e)}`));
  await journal
    ?.close()
    .catch((e: unknown) =>
      say(`closing the journal ${journal.path} failed: ${e instanceof Error ? e.message : String(e)}`),
    );
}

interface RowsRun {
  file: string;
  flags: BatchFlags;
  io: CliIO;
  input: BatchInput;
  defaults: RowDefaults;
  connection: Connection;
  concurrency: number;
  journal: Journal | undefined;
  say: (text: string) => void;
}

/** Sends (or checks) every row of the opened input, showing progress and items as they go, then reports the end. */
async function sendRows(r: RowsRun): Promise<number> {
  const { file, flags, io, journal, say, concurrency } = r;
  const { config, auto } = r.connection;
  const json = flags.json ?? false;
  const items = itemReporter(flags, io, say, journal?.path);

  const progress = new Progress(io, !flags.quiet && !json);
  const { onProgress, onWait } = progressReporter(flags, io, progress);

  const sending = await openSending(flags, r.connection, concurrency);
  const { transport, budget } = sending;
  const stop = stopOnSignals(flags, io, progress, concurrency);
  progress.begin(flags.check ? "checking..." : "sending...");
  let summary;
  try {
    summary = await runBatch({
      input: r.input,
      defaults: r.defaults,
      transportName: auto ? "auto" : config.transport,
      ...(auto ? { channels: auto.channels } : {}),
      ...(transport ? { transport } : {}),
      deliver: {
        ...(budget?.options ?? { limits: { limit: 0, windowMs: 60_000 }, retries: 0, maxWaitMs: 0, noWait: true }),
        onWait,
      },
      concurrency,
      check: flags.check ?? false,
      failFast: flags.failFast ?? false,
      ...(journal ? { journal } : {}),
      onResult: items.onResult,
      // Nothing shows progress under --quiet or --json: the runner then makes no counts for it.
      ...(flags.quiet || json ? {} : { onProgress }),
      onWarning: say,
      signal: stop.abort.signal,
      abortSends: stop.abortSends.signal,
    });
  } finally {
    progress.stop();
    stop.off();
    await closeSending(sending, journal, say);
    items.close();
  }
  return reportEnd({
    summary,
    aborted: stop.abort.signal.aborted,
    secondSignal: stop.secondSignal(),
    journal,
    file,
    flags,
    io,
    say,
    unknownItems: items.unknownItems,
  });
}

export async function runBatchCommand(file: string, opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as BatchFlags;
  const json = flags.json ?? false;
  let cleanup = () => {};
  try {
    const concurrency = checkBatchFlags(file, flags);
    const connection = await batchConnection(flags, io);
    const defaults = await rowDefaults(flags, connection.env, file);
    const encoding = inputEncoding(flags);
    const opened = await openInput(file, io, flags.format);
    cleanup = opened.cleanup;
    if (encoding !== undefined) opened.input.encoding = encoding;

    const say = (text: string) =>
      json ? io.stderr.write(`${JSON.stringify({ warning: redactForPrint(text) })}\n`) : warn(io, text);
    const journal = await openBatchJournal({
      identity: opened.identity,
      fp: opened.fp,
      ...(flags.journal !== undefined ? { journal: flags.journal } : {}),
      ...(flags.results !== undefined ? { results: flags.results } : {}),
      check: flags.check ?? false,
      fresh: flags.fresh ?? false,
      resume: flags.resume ?? false,
      env: io.env,
      say,
    });
    return await sendRows({ file, flags, io, input: opened.input, defaults, connection, concurrency, journal, say });
  } catch (e) {
    return reportError(e, io, { json });
  } finally {
    cleanup();
  }
}
