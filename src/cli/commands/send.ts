// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { statSync } = process.getBuiltinModule("node:fs");
import { MailsendError } from "../../core/errors.js";
import type { Message } from "../../core/message.js";
import type { TransportConfig } from "../../core/config.js";
import type { Env } from "../../core/env.js";
import type { SendResult, TransportName } from "../../core/transport.js";
import type { MessageFlags } from "../../message/build.js";
import { composeMessage, type Inlined } from "../../message/composed.js";
import type { StdinDecision } from "../../message/stdin-body.js";
import { withStreams, type InputStreams } from "../../core/read.js";
import { SETTINGS, settingName, type Setting, type SettingWords } from "../../core/setting-names.js";
import { cliLayers, resolveSettings, type ConnectionFlags } from "../../settings/resolve.js";
import { blankWithoutScript } from "../../message/html-blank.js";
import type { TransportChoice } from "../../transports/choose.js";
import { settleChannel } from "../../transports/settle.js";
import { formatSize } from "../../core/size.js";
import { loadSettings } from "../../settings/profile.js";
import { createTransport } from "../../transports/index.js";
import { colorsFor, shellWord, type CliIO } from "../io.js";
import type { BudgetCliFlags } from "../budget.js";
import type { WaitInfo } from "../../limits/deliver.js";
import { Progress, waitSeconds, waitText } from "../progress.js";
import { reportError, reportSent, warn } from "../report.js";
import { writeGitHubOutputs } from "../github.js";

interface OutputFlags {
  dryRun?: boolean;
  json?: boolean;
  verbose?: boolean;
  quiet?: boolean;
  githubOutput?: boolean;
  profile?: string;
}

type SendFlags = MessageFlags & ConnectionFlags & OutputFlags & BudgetCliFlags & { queue?: string };

export function resultJson(r: SendResult, stdin?: StdinDecision): Record<string, unknown> {
  return {
    ok: true,
    transport: r.transport,
    message_id: r.messageId,
    recipients: r.recipients,
    idempotency_key: r.idempotencyKey,
    attempts: r.attempts,
    waited_ms: r.waitedMs ?? 0,
    ...(r.status !== undefined ? { status: r.status } : {}),
    ...(r.smtpResponse !== undefined ? { smtp_response: r.smtpResponse } : {}),
    ...(stdin ? { stdin: { type: stdin.type, reason: stdin.reason } } : {}),
    ...(r.warnings?.length ? { warnings: r.warnings } : {}),
  };
}

/** A body flag's value that names an existing file (`--html report.html`) rather than being a body. */
function looksLikeFile(value: string): boolean {
  if (value.length > 1024 || /[\n<>]/.test(value)) return false;
  try {
    return statSync(value).isFile();
  } catch {
    return false;
  }
}

/** Under -q, a wait for the budget longer than this is still said (once). */
const QUIET_WAIT_MS = 10_000;

/** The connection settings a flag can give: a queued message cannot take them along. */
const CONNECTION_FLAGS: ReadonlyArray<[keyof SendFlags, Setting]> = [
  ["baseUrl", "baseUrl"],
  ["smtpHost", "smtpHost"],
  ["smtpPort", "smtpPort"],
  ["smtpTls", "smtpTls"],
  ["smtpUser", "smtpUser"],
  ["apiKeyStdin", "apiKey"],
  ["caFile", "caFile"],
  ["insecure", "insecure"],
  ["timeout", "timeout"],
  ["proxy", "proxy"],
  ["smtpProxy", "smtpProxy"],
];

/** What sets the same as a flag where the outbox reads it: the variable (the key's two), or a profile. */
function instead(setting: Setting): string {
  if (setting === "apiKey") return `${SETTINGS.apiKey.env} or ${SETTINGS.apiKeyFile.env}`;
  const words: SettingWords = SETTINGS[setting];
  return words.env ?? "a profile";
}

/**
 * --queue auto|always (or MAILSEND_QUEUE): the outbox delivers with the environment's settings (or
 * --profile's), now and in the background runner, so connection flags would be silently dropped
 * and the mail sent elsewhere. Given with --queue: a usage error. Given while MAILSEND_QUEUE asks
 * for the queue: the flags win (as they win over the environment everywhere), and this message
 * is sent now or fails, not queued; a warning says so.
 */
function queueModeOf(flags: SendFlags, io: CliIO): string {
  const mode = (flags.queue ?? io.env.MAILSEND_QUEUE ?? "").trim() || "never";
  if (mode === "never" || flags.dryRun) return mode;
  const given = CONNECTION_FLAGS.filter(([k]) => flags[k] !== undefined && flags[k] !== false);
  if (given.length === 0) return mode;
  const names = given.map(([, setting]) => settingName(setting, "cli", "given")).join(", ");
  if (flags.queue !== undefined) {
    throw new MailsendError(
      "usage",
      `${names} cannot be used with --queue ${mode}: a queued message is delivered with the environment's settings (or --profile's), not with this command's flags`,
      {
        hint: `Set ${given.map(([, setting]) => instead(setting)).join(", ")} instead (or name a profile with --profile), or leave out --queue to send now.`,
      },
    );
  }
  sayWarning(
    flags,
    io,
    `MAILSEND_QUEUE=${mode} is not used for this message: ${names} on the command line would not reach the outbox, which delivers with the environment's settings; it is sent now, or fails`,
  );
  return "never";
}

function sayWarning(flags: SendFlags, io: CliIO, text: string): void {
  if (flags.json) io.stderr.write(`${JSON.stringify({ warning: text })}\n`);
  else warn(io, text);
}

function warnings(
  m: Message,
  transport: string,
  flags: SendFlags,
  io: CliIO,
  body: { stdinText: boolean; smtp: boolean },
): void {
  const say = (text: string) => sayWarning(flags, io, text);
  // `df -h | mailsend send` with REST alone: the text arrives as HTML, the first surprise; -q asked for silence.
  if (transport === "rest" && body.stdinText && !body.smtp && m.html === undefined && !m.raw && !flags.quiet) {
    say(
      "the text on stdin goes as HTML (escaped inside <pre>): the REST send request has only an html field. To send text as text, configure SMTP (MAILSEND_SMTP_HOST) and use --transport auto, the default once an SMTP host is configured: text then goes over SMTP as text/plain.",
    );
  }
  for (const [flag, value] of [
    ["--html", flags.html],
    ["--text", flags.text],
  ] as const) {
    if (value !== undefined && looksLikeFile(value)) {
      say(
        `${flag} ${shellWord(value)} sends these words as the body, but a file of that name exists: did you mean ${flag}-file ${shellWord(value)}?`,
      );
    }
  }
  if (m.html !== undefined && !m.raw && blankWithoutScript(m.html)) {
    say(
      "the HTML body shows nothing until its <script> runs, and no mail client runs scripts: the mail will look blank. " +
        `Attach the page instead (--attach ${flags.htmlFile !== undefined && flags.htmlFile !== "-" ? shellWord(flags.htmlFile) : "report.html"}) with a short --text, or use the reporter's static HTML or Markdown output.`,
    );
  }
  if (flags.insecure) {
    say("--insecure: TLS certificates are NOT verified; anyone on the path can read the key and the message.");
  }
  // An .eml's text part is the plain version of its HTML, as a Markdown source is of
  // its rendering; only a text the user wrote is worth a warning.
  if (
    transport === "rest" &&
    m.html !== undefined &&
    m.text !== undefined &&
    !m.raw &&
    flags.markdownFile === undefined
  ) {
    say("the REST send request has only an html field: the text body is not sent (use --transport smtp to send both).");
  }
}

/** An SMTP send some recipients refused did go out to the others: said on stdout as a send is. */
function sayPartlySent(e: unknown, flags: SendFlags, io: CliIO): void {
  const partial = e instanceof MailsendError ? e.partial : undefined;
  if (!partial || flags.json || flags.quiet) return;
  const out = colorsFor(io.stdout, io.env);
  io.stdout.write(
    `${out.yellow("sent")} ${partial.messageId} ${out.dim(`(smtp, to ${partial.accepted.join(", ")} only)`)}\n`,
  );
}

/** stdin as the readers take it, looked up only when one of them reads it. */
function lazyStreams(io: CliIO & Pick<InputStreams, "stdinIsNull">): InputStreams {
  return {
    get stdin() {
      return io.stdin;
    },
    ...(io.stdinIsNull ? { stdinIsNull: io.stdinIsNull } : {}),
  };
}

/**
 * `io` may also say whether stdin is /dev/null without making the stream (the process's own
 * streams, src/cli/main.ts): a send made none of the three it does not use.
 */
export async function runSend(
  opts: Record<string, unknown>,
  io: CliIO & Pick<InputStreams, "stdinIsNull">,
): Promise<number> {
  const flags = opts as SendFlags;
  const json = flags.json ?? false;
  let stopWatching = () => {};
  const streams = lazyStreams(io);
  try {
    // flags > environment > profile > defaults: the profile is layered under the environment here.
    const settings = loadSettings(flags.profile, io.env);
    const queueMode = queueModeOf(flags, io);
    // The key is read first: with --api-key-stdin it is what stdin holds. With auto, the
    // channel's settings only once the message says which one it needs.
    const run = await resolveSettings(
      cliLayers(flags, settings.env, settings.profile),
      withStreams({ needKey: !flags.dryRun }, streams),
    );
    // Over one transport, its settings are checked before the message is read.
    const fixed = run.transport === "auto" ? undefined : run.channel(run.transport);
    const c = flags.verbose ? colorsFor(io.stderr, io.env) : undefined;
    const trace = c ? (line: string) => io.stderr.write(`${c.dim(line)}\n`) : undefined;
    const built = await composeMessage(flags, streams, {
      transport: run.transport,
      stdinTaken: flags.apiKeyStdin ?? false,
      defaultFrom: settings.env.MAILSEND_FROM || undefined,
      warn: (text) => sayWarning(flags, io, text),
      trace,
      sayStdinWait: !flags.quiet,
    });
    stopWatching = built.stopWatching;
    const { stdinBody, inlined } = built;
    const {
      message,
      transport: chosen,
      choice,
    } = await settleChannel(built.message, run.transport, run.configured, {
      trace,
    });
    const config = fixed ?? run.channel(chosen);
    warnings(message, config.transport, flags, io, {
      stdinText: stdinBody?.type === "text" || flags.textFile === "-",
      smtp: run.configured.smtp,
    });
    const transport = await createTransport(config);
    try {
      if (flags.dryRun) {
        await preview(transport, message, io, json, choice, inlined);
        return 0;
      }
      if (queueMode !== "never") return await sendQueued(message, config.transport, queueMode, flags, io, trace);
      return await sendNow({ transport, message, config, flags, io, env: settings.env, trace, stdinBody, choice });
    } finally {
      await transport.close();
    }
  } catch (e) {
    sayPartlySent(e, flags, io);
    return reportError(e, io, { json, verbose: flags.verbose ?? false });
  } finally {
    stopWatching();
  }
}

/** What sendNow needs from the run: the message, its transport and settings, and how to speak. */
interface NowContext {
  transport: Awaited<ReturnType<typeof createTransport>>;
  message: Message;
  config: TransportConfig;
  flags: SendFlags;
  io: CliIO;
  env: Env;
  trace: ((line: string) => void) | undefined;
  stdinBody: StdinDecision | undefined;
  choice: TransportChoice | undefined;
}

/**
 * Ctrl-C or a SIGTERM (a CI step's timeout) ends the attempt or the wait at once, and says
 * what became of the message (sent or not, or unknown with the key that makes a resend safe),
 * then exits as a shell reports the signal. A second one does not wait for that.
 */
function stopSendOnSignals(message: Message, io: CliIO, json: boolean) {
  const stop = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const onStop = (sig: NodeJS.Signals) => {
    if (stoppedBy) {
      // Not waiting for what the first one is finishing (an answer may be in, its bookkeeping not):
      // said as unknown, with the key that makes a resend safe, never silently.
      const text = `stopped (${sig}) before the outcome was known: the message may have been sent`;
      const hint = `Check before sending again (resending with --idempotency-key ${message.idempotencyKey} is safe: the service drops a repeat).`;
      io.stderr.write(
        json
          ? `${JSON.stringify({ error: { code: "outcome_unknown", message: text, exit: sig === "SIGTERM" ? 143 : 130, hint } })}\n`
          : `error: ${text}\nhint: ${hint}\n`,
      );
      process.exit(sig === "SIGTERM" ? 143 : 130);
    }
    stoppedBy = sig;
    stop.abort(
      new MailsendError("temporary_failure", `interrupted (${sig}) before the message was sent`, {
        hint: "Nothing was sent; it is safe to try again.",
      }),
    );
  };
  process.on("SIGINT", onStop);
  process.on("SIGTERM", onStop);
  return {
    signal: stop.signal,
    stoppedBy: () => stoppedBy,
    off: () => {
      process.off("SIGINT", onStop);
      process.off("SIGTERM", onStop);
    },
  };
}

/** How a wait (for the budget, or before a retry) is said in each mode. */
function sendWaitReporter(
  flags: SendFlags,
  io: CliIO,
  trace: ((line: string) => void) | undefined,
  progress: Progress | undefined,
): (w: WaitInfo) => void {
  const json = flags.json ?? false;
  let quietWaitSaid = false;
  return (w) => {
    // The spinner or line is off with --json and --verbose; a wait is still said, in that mode's form.
    // -q says nothing, except once for a long wait for the budget: a silent minute looks like a hang.
    if (flags.quiet && (w.reason !== "budget" || w.ms <= QUIET_WAIT_MS || quietWaitSaid)) return;
    if (flags.quiet) quietWaitSaid = true;
    if (json) {
      io.stderr.write(
        `${JSON.stringify({ wait: { reason: w.reason, seconds: waitSeconds(w.ms), attempt: w.attempt, ...(w.error ? { error: w.error.code } : {}) } })}\n`,
      );
    } else if (trace) {
      trace(
        `* ${w.reason === "budget" ? "rate limit for this key reached" : `${w.error?.message ?? "temporary failure"}; retry ${w.attempt - 1}`}; waiting ${waitText(w.ms)}`,
      );
    } else if (flags.quiet) {
      io.stderr.write(`mailsend: rate limit for this key reached; waiting ${waitText(w.ms)}\n`);
    } else progress?.wait(w);
  };
}

/**
 * Closes the budget once the send ended. After an accepted send, closing its connection is
 * book-keeping: a warning, said now and returned. Before the service accepted anything, this
 * failure is the outcome, so it is thrown.
 */
async function closeBudgetAfterSend(
  budget: { close: () => Promise<unknown> },
  result: SendResult | undefined,
  flags: SendFlags,
  io: CliIO,
): Promise<string | undefined> {
  try {
    await budget.close();
    return undefined;
  } catch (e) {
    if (!result) throw e;
    const text = `the message was sent, but closing the rate-limit budget failed: ${e instanceof Error ? e.message : String(e)}`;
    sayWarning(flags, io, text);
    return text;
  }
}

/** The sent message said in each mode (JSON on stdout, a line, or nothing under -q), and the GitHub outputs. */
function sayResult(
  result: SendResult,
  flags: SendFlags,
  io: CliIO,
  stdinBody: StdinDecision | undefined,
  choice: TransportChoice | undefined,
): number {
  if (flags.json ?? false)
    io.stdout.write(
      `${JSON.stringify({ ...resultJson(result, stdinBody), ...(choice ? { reason: choice.reason } : {}) })}\n`,
    );
  else if (!flags.quiet) {
    reportSent(io, result);
  }
  if (flags.githubOutput) {
    const problem = writeGitHubOutputs(io.env, { message_id: result.messageId });
    if (problem) sayWarning(flags, io, problem);
  }
  return 0;
}

/** The message sent now: through the budget and retries, stopped by Ctrl-C or SIGTERM, and said. */
async function sendNow(ctx: NowContext): Promise<number> {
  const { transport, message, config, flags, io, env, trace, stdinBody, choice } = ctx;
  const json = flags.json ?? false;
  // Off (-q, --json, -v) it would say nothing: not made, so stderr is not made for it either.
  const progress = !flags.quiet && !json && !trace ? new Progress(io, true) : undefined;
  const sending = `sending over ${transport.name}...`;
  // The delivery path (budget, retries) is loaded only by a send that goes out now: a dry run or a
  // queued message never needs it.
  const [{ abortableSleep, deliver }, { openBudget }] = await Promise.all([
    import("../../limits/deliver.js"),
    import("../budget.js"),
  ]);
  const budget = await openBudget(flags, config.apiKey, env, {
    ...(config.caFile ? { caFile: config.caFile } : {}),
    ...(trace ? { trace } : {}),
  });
  let result: SendResult | undefined;
  let lateWarning: string | undefined;
  const stop = stopSendOnSignals(message, io, json);
  try {
    progress?.begin(sending);
    result = await deliver(transport, message, {
      signal: stop.signal,
      ...budget.options,
      onWait: sendWaitReporter(flags, io, trace, progress),
      sleep: async (ms, signal) => {
        await abortableSleep(ms, signal);
        progress?.resume(sending);
      },
      // Said as it happens (also under -q: the message was sent, but something needs a look).
      onWarning: (text) => sayWarning(flags, io, text),
      ...(trace ? { trace } : {}),
    });
  } catch (e) {
    const stoppedBy = stop.stoppedBy();
    if (!stoppedBy) throw e;
    progress?.stop();
    return reportError(e, io, { json, verbose: flags.verbose ?? false, exit: stoppedBy === "SIGTERM" ? 143 : 130 });
  } finally {
    stop.off();
    progress?.stop();
    // A failure to close before anything was accepted replaces the outcome: it is thrown from here.
    lateWarning = await closeBudgetAfterSend(budget, result, flags, io);
  }
  if (lateWarning) result = { ...result, warnings: [...(result.warnings ?? []), lateWarning] };
  return sayResult(result, flags, io, stdinBody, choice);
}

/**
 * --queue auto|always: the message goes through the outbox, with the transport send chose and
 * its own key; sent at once, or queued (a success, exit 0: `mailsend queue` shows it).
 */
async function sendQueued(
  message: Message,
  transport: TransportName,
  mode: string,
  flags: SendFlags,
  io: CliIO,
  trace: ((line: string) => void) | undefined,
): Promise<number> {
  // The outbox is loaded only by a send that queues.
  const { queueMessage } = await import("../../outbox/queue-message.js");
  const { result: r, envelope } = await queueMessage(message, transport, mode, {
    env: io.env,
    profile: flags.profile,
    trace,
  });
  if (r.status === "sent") {
    if (flags.json) io.stdout.write(`${JSON.stringify(resultJson(r.result))}\n`);
    else if (!flags.quiet) reportSent(io, r.result);
    return 0;
  }
  if (flags.json)
    io.stdout.write(
      `${JSON.stringify({ ok: true, queued: true, id: r.id, reason: r.reason, idempotency_key: message.idempotencyKey, recipients: envelope.to })}\n`,
    );
  else if (!flags.quiet) {
    const out = colorsFor(io.stdout, io.env);
    const { autorunOff } = await import("../../outbox/spawn.js");
    const who = autorunOff(io.env) ? "`mailsend queue run` (or the relay) delivers it" : "it goes out by itself";
    io.stdout.write(`${out.yellow("queued")} ${r.id} ${out.dim(`(${r.reason}; mailsend queue shows it, ${who})`)}\n`);
  }
  return 0;
}

/**
 * --dry-run: the transport's preview, after what auto chose and which image
 * references became which inline parts (as "#" lines, or fields of the JSON).
 */
async function preview(
  transport: Awaited<ReturnType<typeof createTransport>>,
  message: Message,
  io: CliIO,
  json: boolean,
  choice: TransportChoice | undefined,
  inlined: Inlined | undefined,
): Promise<void> {
  const sheets = inlined?.stylesheets ?? [];
  const refs = (inlined?.rewrites ?? []).map((r) => ({
    ref: r.ref,
    cid: r.cid,
    path: r.path,
    type: inlined?.sizes.get(r.cid)?.type,
    size: inlined?.sizes.get(r.cid)?.size,
  }));
  if (!json) {
    if (choice) io.stdout.write(`# --transport auto: ${choice.transport} (${choice.reason})\n`);
    for (const s of sheets)
      io.stdout.write(
        `# stylesheet ${s.ref}${s.importedBy ? ` (@import in ${s.importedBy})` : ""} -> <style> (${s.path}, ${formatSize(s.bytes)})\n`,
      );
    for (const r of refs)
      io.stdout.write(`# inline image ${r.ref} -> cid:${r.cid} (${r.path}, ${r.type}, ${formatSize(r.size ?? 0)})\n`);
    await transport.preview(message, io.stdout, { json });
    return;
  }
  let out = "";
  await transport.preview(message, { write: (c: string | Buffer) => (out += c.toString()) }, { json });
  const obj = JSON.parse(out) as Record<string, unknown>;
  io.stdout.write(
    `${JSON.stringify({ ...obj, ...(choice ? { reason: choice.reason } : {}), ...(sheets.length ? { stylesheets: sheets } : {}), ...(refs.length ? { inline_images: refs } : {}) })}\n`,
  );
}
