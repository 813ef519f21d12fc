import { setMaxListeners } from "node:events";
import { redactForPrint } from "../../core/redact.js";
import { dirname, resolve } from "node:path";
import type { HeaderList } from "../../core/headers.js";
import { parseHeaderFlag } from "../../core/headers.js";
import { MailsendError } from "../../core/errors.js";
import { openBatchJournal } from "../../batch/journal-place.js";
import { openBatchInput } from "../../batch/input.js";
import { bodyTemplates } from "../../batch/templates.js";

import type { RowDefaults } from "../../batch/item.js";
import { encodingName, type Format } from "../../batch/rows.js";
import { runBatch, type BatchInput } from "../../batch/runner.js";
import { cliLayers, resolveSettings, type ConnectionFlags, type Settings } from "../../settings/resolve.js";
import type { Env } from "../../core/env.js";
import type { Journal } from "../../batch/journal.js";
import type { TransportConfig } from "../../core/config.js";
import type { TransportName } from "../../core/transport.js";
import type { Channels } from "../../transports/choose.js";
import { bodyComposeOf } from "../../message/build.js";
import { ImageCache } from "../../compose/cache.js";
import { loadSettings } from "../../settings/profile.js";
import type { InputStreams } from "../../core/read.js";
import { createAutoTransport, createTransport } from "../../transports/index.js";
import { openBudget, type BudgetCliFlags } from "../budget.js";
import type { CliIO } from "../io.js";
import { Progress } from "../progress.js";
import { reportError, warn } from "../report.js";
import { itemReporter, progressReporter, reportEnd, type ReportFlags } from "./batch-report.js";

interface BatchFlags extends ConnectionFlags, BudgetCliFlags, ReportFlags {
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
  failFast?: boolean;
  journal?: string;
  resume?: boolean;
  fresh?: boolean;
  profile?: string;
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
    const opened = await openBatchInput(file, io, flags.format);
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
