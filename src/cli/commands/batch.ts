import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import { writeFileAtomic } from "../../core/atomic.js";
import { closeSync, createReadStream, createWriteStream, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readSync, rmSync, writeSync } from "node:fs";
import { ensurePrivateDir } from "../../limits/private-dir.js";
import { redactForPrint } from "../../core/redact.js";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { HeaderList } from "../../core/headers.js";
import { parseHeaderFlag } from "../../core/headers.js";
import { localFileError, MailsendError } from "../../core/errors.js";
import { fingerprint, Journal, legacyFingerprint, type OpenOptions, type Replaced } from "../../batch/journal.js";

/** Who a journal belongs to: the input's identity, and the one earlier versions gave it. */
type InputIds = Pick<OpenOptions, "input" | "legacyInput">;
import type { RowDefaults } from "../../batch/item.js";
import { encodingName, formatFromContent, formatFromName, type Format } from "../../batch/rows.js";
import { runBatch, type BatchInput, type Counts, type ItemResult } from "../../batch/runner.js";
import { configuredChannels, resolveApiKey, resolveTransportChoice, resolveTransportConfig, type ConnectionFlags } from "../../input/config.js";
import { smtpUserIsKey, type TransportConfig } from "../../core/config.js";
import type { TransportName } from "../../core/transport.js";
import type { Channels } from "../../transports/choose.js";
import { bodyComposeOf } from "../../message/build.js";
import { ImageCache } from "../../compose/cache.js";
import { loadSettings } from "../../input/profile.js";
import { fileError, regularFileSize, utf8, type InputStreams } from "../../core/read.js";
import { stateDir } from "../../limits/budget.js";
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
async function bodyTemplates(flags: BatchFlags): Promise<Pick<RowDefaults, "htmlTemplate" | "textTemplate" | "templateFlag" | "textIsPlainHtml">> {
  if (flags.allowHtml && flags.markdownFile === undefined) throw new MailsendError("usage", "--allow-html applies only to --markdown-file");
  if (flags.markdownFile !== undefined) {
    const clash = [flags.htmlFile !== undefined && "--html-file", flags.textFile !== undefined && "--text-file"].filter(Boolean);
    if (clash.length > 0) throw new MailsendError("usage", `--markdown-file makes the HTML and the text template; it cannot be combined with ${clash.join(", ")}`);
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
async function openInput(file: string, io: CliIO, format: Format | undefined): Promise<{ input: BatchInput; identity: string; fp: InputIds; cleanup: () => void }> {
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
        if (!out.write(buf)) await new Promise<void>((r) => (out.once("drain", () => r()), out.once("error", () => r())));
      }
      await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ?? failed ? j(e ?? failed) : r())));
    } catch (e) {
      cleanup();
      // The spool is a local file: a full or read-only temp dir is this machine's fault (73), said as such.
      throw (e as NodeJS.ErrnoException).code ? localFileError(e, path, "write", "copy of stdin (set TMPDIR to move it)") : e;
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

/** The journal last used for an input (batches/<hash>.last holds its path); undefined when none was recorded. */
function readPointer(pointer: string): string | undefined {
  try {
    const path = readFileSync(pointer, "utf8").split("\n")[0];
    return path ? path : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records which journal this input's run used, so that a later run given another (new) journal is
 * told of it. Book-keeping: a state dir that cannot take it does not stop the batch.
 */
function writePointer(pointer: string, journal: string): void {
  const path = resolve(journal);
  if (readPointer(pointer) === path) return;
  try {
    mkdirSync(dirname(pointer), { recursive: true, mode: 0o700 });
    writeFileAtomic(pointer, `${path}\n`, { mode: 0o600, durable: false });
  } catch {}
}

/** What Journal.open would do with the journal at `path` for this input: undefined when it cannot tell (damaged: open says so). */
function journalAction(path: string, fp: InputIds): string | undefined {
  try {
    return Journal.plan({ path, ...fp, fresh: false, resume: false }).action;
  } catch {
    return undefined;
  }
}

/**
 * A journal that starts a new batch here (none at `journalPath`, or one of another input or a
 * finished run that would be replaced) sends every row. When another journal of the same input
 * (same file, same content) records sends that a run would resume, that is a resend by mistake
 * (the journal moved: --journal given or changed), so it is refused; --fresh asks for it. A journal
 * this run continues (or refuses) needs no guard.
 */
function guardNewJournal(journalPath: string, earlier: ReadonlyArray<string | undefined>, fp: InputIds): void {
  const own = journalAction(journalPath, fp);
  if (own !== "create" && own !== "replace") return;
  const seen = new Set([resolve(journalPath)]);
  for (const path of earlier) {
    if (path === undefined || seen.has(resolve(path))) continue;
    seen.add(resolve(path));
    let plan;
    try {
      plan = existsSync(path) ? Journal.plan({ path, ...fp, fresh: false, resume: false }) : undefined;
    } catch {
      continue; // damaged or not a journal: nothing it can say about what was sent
    }
    if (plan?.action !== "resume") continue;
    const sent = [...plan.states.values()].filter((st) => st.s === "done").length;
    if (sent === 0) continue;
    throw new MailsendError("usage", `the journal ${journalPath} is new, but the journal ${path} records ${sent} item${sent === 1 ? "" : "s"} of this input as sent: a new journal would send every row again`, {
      hint: `Give --journal ${path} to continue it (it skips what was sent), or --fresh to send everything again.`,
    });
  }
}

const when = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * A finished run's journal of another input is replaced (kept as *.old) and
 * the batch starts over: every row goes out, also those that run sent. Right,
 * when the input is a new one; a surprise when it is the old one edited, so
 * it is said out loud. (--fresh asks for it; a run older than 24 h is
 * documented as history.)
 */
function newBatchNotice(r: Pick<Replaced, "finishedAt" | "sent">, keptAt: string, checking: boolean): string {
  const last = `the input differs from the last run's (finished at ${when(r.finishedAt)}, ${r.sent} sent)`;
  return checking
    ? `${last}, so sending it would start a new batch: every row of it would be sent, also any the last run sent; the old journal would be kept as ${keptAt}`
    : `${last}, so this is a new batch: every row of it is sent, also any the last run sent; the old journal is kept at ${keptAt}`;
}

function summaryLine(c: Counts & { elapsedMs: number; not_started?: number; stopped?: string }): string {
  const parts = [`${c.sent} sent${c.partial ? ` (${c.partial} with refused recipients)` : ""}`];
  if (c.skipped) parts.push(`${c.skipped} already sent`);
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.unknown) parts.push(`${c.unknown} outcome unknown`);
  if (c.invalid) parts.push(`${c.invalid} invalid`);
  if (c.not_started) parts.push(`${c.not_started} not started (${c.stopped === "budget" ? "the rate-limit budget could not be reached" : "interrupted"})`);
  return `${parts.join(", ")} (of ${c.total}) in ${(c.elapsedMs / 1000).toFixed(1)} s`;
}

export async function runBatchCommand(file: string, opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as BatchFlags;
  const json = flags.json ?? false;
  let cleanup = () => {};
  try {
    if (file === "-" && flags.apiKeyStdin) throw new MailsendError("usage", "stdin cannot hold both the batch input and the API key");
    if (flags.resume && flags.fresh) throw new MailsendError("usage", "--resume and --fresh contradict each other");
    const concurrency = flags.concurrency ?? 4;
    if (concurrency < 1 || concurrency > 64) throw new MailsendError("usage", "--concurrency must be from 1 to 64");
    // flags > environment > profile > defaults: the profile is layered under the environment here.
    const settings = loadSettings(flags.profile, io.env);
    // stdin is made only if --api-key-stdin reads it (making the stream costs ~5 ms at start-up).
    const streams = <T extends object>(o: T): T & InputStreams => Object.defineProperty(o, "stdin", { get: () => io.stdin, enumerable: true }) as T & InputStreams;
    // auto: as for send, each row's message chooses its channel among those configured (REST
    // unless it would lose something, then SMTP); the key is read once for both.
    const choice = resolveTransportChoice(flags, settings.env);
    let config: TransportConfig;
    let auto: { channels: Channels; configs: Partial<Record<TransportName, TransportConfig>> } | undefined;
    if (choice === "auto") {
      const channels = configuredChannels(flags, settings.env);
      if (!channels.rest && !channels.smtp) {
        throw new MailsendError("config_missing", "--transport auto: neither a REST base URL nor an SMTP host is configured", {
          hint: "Set MAILSEND_BASE_URL or MAILSEND_SMTP_HOST (or --base-url / --smtp-host). For a local one, run `mailsend sandbox` and paste the export lines it prints.",
        });
      }
      const apiKey = flags.check ? "" : await resolveApiKey(flags, settings.env, streams({}), settings.profile);
      const configs: Partial<Record<TransportName, TransportConfig>> = {};
      for (const name of ["rest", "smtp"] as const) {
        if (channels[name]) configs[name] = { ...(await resolveTransportConfig({ ...flags, transport: name }, settings.env, streams({ needKey: false, profile: settings.profile }))), apiKey };
      }
      // Resolved without the key: the SMTP username is checked against it now (the key is the password).
      if (configs.smtp?.transport === "smtp") {
        const userIsKey = smtpUserIsKey(configs.smtp.user, apiKey, flags.smtpUser !== undefined ? "--smtp-user" : "MAILSEND_SMTP_USER, or the profile's smtp_user");
        if (userIsKey) throw userIsKey;
      }
      auto = { channels, configs };
      config = (configs.rest ?? configs.smtp)!;
    } else {
      config = await resolveTransportConfig(flags, settings.env, streams({ needKey: !flags.check, profile: settings.profile }));
    }
    const headers: HeaderList = (flags.header ?? []).map(parseHeaderFlag);
    const from = flags.from ?? (settings.env.MAILSEND_FROM || undefined);
    const defaults: RowDefaults = {
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
    let encoding: string | undefined;
    if (flags.encoding !== undefined) {
      encoding = encodingName(flags.encoding);
      if (encoding === undefined) {
        throw new MailsendError("usage", `--encoding: no such encoding: ${flags.encoding}`, { hint: "Give a name such as windows-1252, iso-8859-15, macintosh or utf-16le." });
      }
    }
    const opened = await openInput(file, io, flags.format);
    cleanup = opened.cleanup;
    if (encoding !== undefined) opened.input.encoding = encoding;

    // The journal is named after the input, in the state dir, whatever else the command says: a
    // rerun that only adds or changes --results must find what the first run sent. (Before, --results
    // R put it at R.journal: a run of that version is continued there.)
    const batchesDir = join(stateDir(io.env), "batches");
    const inputHash = createHash("sha256").update(opened.identity).digest("hex").slice(0, 24);
    const defaultJournal = join(batchesDir, `${inputHash}.journal`);
    const legacyJournal = flags.results ? `${flags.results}.journal` : undefined;
    // Only a journal of this input (one a run would continue): another input's is not this batch's.
    const journalPath = flags.journal ?? (legacyJournal && journalAction(legacyJournal, opened.fp) === "resume" ? legacyJournal : defaultJournal);
    const say = (text: string) => (json ? io.stderr.write(`${JSON.stringify({ warning: redactForPrint(text) })}\n`) : warn(io, text));
    if (journalPath === defaultJournal && !flags.check) {
      // Journals hold addresses and subjects: the state dir is private (made 0700; a looser one is said).
      const loose = [ensurePrivateDir(stateDir(io.env)), ensurePrivateDir(batchesDir, "batch journal directory")];
      for (const text of loose) if (text) say(text);
    }
    const lastPointer = join(batchesDir, `${inputHash}.last`);
    if (!flags.fresh) guardNewJournal(journalPath, [readPointer(lastPointer), defaultJournal, legacyJournal], opened.fp);
    const journalOptions = { path: journalPath, ...opened.fp, fresh: flags.fresh ?? false, resume: flags.resume ?? false };
    const journal = flags.check ? undefined : await Journal.open(journalOptions);
    if (journal) writePointer(lastPointer, journal.path);
    if (journal?.replaced?.reason === "input_changed" && journal.replaced.sent > 0) say(newBatchNotice(journal.replaced, journal.replaced.path, false));
    if (journal?.replaced?.reason === "damaged") {
      const r = journal.replaced;
      say(
        `the journal ${journalPath} was damaged (line ${r.damagedLine ?? "?"}); it is kept as ${r.path}, and this is a new batch: every item is sent again, also those the earlier run sent (${r.sent} recorded as sent before the damage)`,
      );
    }
    if (flags.check) {
      // What the run would do with the journal, so that --check does not say "all fine" before a resend.
      // A journal that is missing or unusable is the real run's error to report, not --check's.
      let plan;
      try {
        plan = Journal.plan({ ...journalOptions, resume: false });
      } catch {
        plan = undefined;
      }
      if (plan?.action === "replace" && plan.reason === "input_changed" && plan.sent > 0) say(newBatchNotice(plan, `${journalPath}.<time>.old`, true));
    }

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
          say(`${localFileError(e, flags.results!, "write", "results file").message}; the batch goes on (the journal ${journal?.path ?? ""} still records every item), but this file is incomplete from item ${r.index + 1} on`);
        }
      }
      if (json) io.stdout.write(line);
      else if (!flags.quiet && (r.status === "invalid" || r.status === "failed" || r.status === "unknown" || r.status === "partial")) {
        const label = r.status === "unknown" || r.status === "partial" ? c.yellow(r.status) : c.red(r.status);
        io.stderr.write(`${label}: ${r.error?.message ?? `item ${r.index + 1}`}\n`);
        const hint = r.status === "invalid" ? r.error?.hint : undefined;
        if (hint && !hintsShown.has(hint.slice(0, 48))) {
          hintsShown.add(hint.slice(0, 48));
          io.stderr.write(`${c.dim("hint:")} ${hint}\n`);
        }
      }
    };

    const progress = new Progress(io, !flags.quiet && !json);
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

    const transport = flags.check ? undefined : auto ? createAutoTransport(auto.configs, { pool: concurrency }) : await createTransport(config, { pool: concurrency });
    const budget = flags.check ? undefined : await openBudget(flags, config.apiKey, settings.env, config.caFile ? { caFile: config.caFile } : {});
    // The first interrupt stops the batch: nothing new starts and the messages in
    // flight finish (aborting them would leave them in doubt). A second one aborts those too.
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
      if (!flags.quiet && !json) io.stderr.write("mailsend batch: stopping; the messages in flight finish (interrupt again to abort them)\n");
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    let quietWaitSaid = false;
    let lastWaitLine = 0;
    progress.begin(flags.check ? "checking..." : "sending...");
    let summary;
    try {
      summary = await runBatch({
        input: opened.input,
        defaults,
        transportName: auto ? "auto" : config.transport,
        ...(auto ? { channels: auto.channels } : {}),
        ...(transport ? { transport } : {}),
        deliver: {
          ...(budget?.options ?? { limits: { limit: 0, windowMs: 60_000 }, retries: 0, maxWaitMs: 0, noWait: true }),
          onWait: (w) => {
            const why = w.reason === "budget" ? "rate limit for this key reached" : `${w.error?.message ?? "temporary failure"}; retry ${w.attempt - 1}`;
            progress.update(w.reason === "budget" ? `waiting ${waitText(w.ms)} for the rate limit` : `${why}; waiting ${waitText(w.ms)}`);
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
          },
        },
        concurrency,
        check: flags.check ?? false,
        failFast: flags.failFast ?? false,
        ...(journal ? { journal } : {}),
        onResult,
        // Nothing shows progress under --quiet or --json: the runner then makes no counts for it.
        ...(flags.quiet || json ? {} : { onProgress }),
        onWarning: say,
        signal: abort.signal,
        abortSends: abortSends.signal,
      });
    } finally {
      progress.stop();
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      await transport?.close();
      // Closing is book-keeping: after items were sent, its failure is a warning, not the batch's exit status.
      await budget?.close().catch((e: unknown) => say(`closing the rate-limit budget failed: ${e instanceof Error ? e.message : String(e)}`));
      await journal?.close().catch((e: unknown) => say(`closing the journal ${journal.path} failed: ${e instanceof Error ? e.message : String(e)}`));
      if (resultsFd !== undefined) {
        try {
          fsyncSync(resultsFd);
        } catch (e) {
          if (!resultsFailed) say(`${localFileError(e, flags.results!, "sync", "results file").message}; it may be incomplete (the journal still records every item)`);
        }
        closeSync(resultsFd);
      }
    }
    const unfinished = summary.failed + summary.unknown + (abort.signal.aborted ? 1 : 0) > 0;
    // Interrupted: the summary says so, counts the items that never started, and carries the exit
    // code the process ends with (75; 130 / 143 interrupted twice), not the one of what was done.
    const exitCode = secondSignal ? (secondSignal === "SIGTERM" ? 143 : 130) : abort.signal.aborted ? 75 : summary.exitCode;
    const notStarted = Math.max(0, summary.total - summary.invalid - summary.sent - summary.failed - summary.skipped - summary.unknown);
    const reported = abort.signal.aborted
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
      say(`${rows}. Editing ${input} to fix ${summary.invalid === 1 ? "it" : "them"} makes it a new batch: running it again would send every row again, also the ${delivered} already sent. Put the fixed rows (with the header) in a file of their own`);
    }
    if (json) {
      io.stderr.write(`${JSON.stringify({ summary: { ...reported, journal: journal?.path ?? null, check: flags.check ?? false } })}\n`);
    } else if (!flags.quiet) {
      const line = flags.check
        ? `${summary.total - summary.invalid} valid, ${summary.invalid} invalid (of ${summary.total}); nothing sent (--check)`
        : summaryLine(reported);
      io.stdout.write(`${line}\n`);
      if (journal && unfinished) io.stderr.write(`${c.dim(`journal: ${journal.path} — run the same command again to retry what did not go out`)}\n`);
    }
    if (flags.githubOutput) {
      const { sent, skipped, failed, unknown, invalid, total, partial } = summary;
      const problem = writeGitHubOutputs(io.env, { sent, already_sent: skipped, failed, unknown, invalid, total, partial });
      if (problem) say(problem);
    }
    if (inGitHubActions(io.env) && summary.failed + summary.unknown + summary.invalid > 0) {
      io.stderr.write(annotation("error", `batch: ${summaryLine(summary)}`, journal && unfinished ? "Run the same command again to retry what did not go out." : undefined));
    }
    if (secondSignal) {
      // Interrupted twice: the sends in flight were cut. Say which items may or may not have gone
      // out, then exit as a shell reports the signal (130 for SIGINT, 143 for SIGTERM).
      const which = unknownItems.map((r) => `${r.index + 1} (line ${r.line}${r.recipients.length ? `, to ${r.recipients.join(", ")}` : ""})`);
      const text = which.length
        ? `interrupted twice: the outcome of item${which.length === 1 ? "" : "s"} ${which.join("; ")} is unknown: it may have been sent. Run the same command again: it resends ${which.length === 1 ? "it" : "them"} with the same idempotency key${which.length === 1 ? "" : "s"}, which the service de-duplicates`
        : "interrupted twice: no item was in doubt; run the same command again to send the rest";
      if (json) io.stderr.write(`${JSON.stringify({ interrupted: { signal: secondSignal, unknown: unknownItems.map((r) => r.index) }, message: text })}\n`);
      else io.stderr.write(`mailsend batch: ${text}\n`);
    }
    return exitCode;
  } catch (e) {
    return reportError(e, io, { json });
  } finally {
    cleanup();
  }
}
