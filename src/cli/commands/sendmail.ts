/**
 * `mailsend sendmail [options] [recipient...]`, and the same program started
 * under the name `sendmail` (or `mailq`): one message from stdin, delivered at
 * once when that is quick, else kept in the outbox and delivered by a runner.
 * Like sendmail it prints nothing when the message went out.
 */
import type { Command } from "commander";
import type { CommandContext } from "../command.js";
import type { CliIO } from "../io.js";
import { colorsFor } from "../io.js";
import { MailsendError, toMailsendError } from "../../core/errors.js";
import { reportError } from "../report.js";
import { parseSendmailArgs, type SendmailArgs } from "../../sendmail/args.js";
// Statically: the build puts all of these in the sendmail front end's own chunks either way
// (scripts/build.mjs), and an import() would only add a file to open on every call.
import { VERSION } from "../../core/version.js";
import { loadSettings } from "../../settings/profile.js";
import { queueModeFrom, submitStoppable } from "../../outbox/submit.js";
import { Outbox } from "../../outbox/store.js";
import { maxMessageSize, readSendmailInput } from "../../sendmail/submission.js";
import { loadAliases, withProfileAliases } from "../../sendmail/aliases.js";
import { aliasesFor, completeLocalMessage } from "../../sendmail/local.js";
import { autorunOff } from "../../outbox/spawn.js";
import { runQueueList, runQueueRun } from "../queue-actions.js";

export const SENDMAIL_HELP = `Usage: sendmail [options] [recipient...]
       mailsend sendmail [options] [recipient...]

Reads one message (RFC 5322: header lines, a blank line, the body) from stdin
and sends it, as sendmail does for cron, mail/s-nail, git send-email and PHP's
mail(). It is delivered at once when the rate limit allows (within a few
seconds), else kept in the outbox and delivered later by a background runner:
the command then exits 0 and says so in one line on stderr.

Options (those of sendmail that mail programs pass):
  -t               recipients from the To, Cc and Bcc headers, plus the arguments
  -i, -oi          a line with a lone "." does not end the message
  -f <addr>, -r <addr>
                   the envelope sender (and the From header when there is none)
  -F <name>        the sender's full name, for a From header the message lacks
  -v               say what was done (headers added, transport, where it went)
  -bm              deliver (the default)
  -bs              one SMTP session on stdin and stdout (Symfony Mailer's and
                   Laravel's "sendmail -bs"): each message is answered 250
                   once it is sent or in the outbox; no AUTH, no TLS
  -bp              list the outbox (as mailq; same as mailsend queue)
  -bi              check the aliases file (as newaliases: there is no database
                   to rebuild, mailsend reads the file as it is)
  -q               deliver what is queued now, deferred mail too (as Postfix's
                   sendmail -q; mailsend queue run keeps each message's retry time)
  -B <type>, -o<x> (-oem, -odi, -odb ...), -Am, -Ac, -N <dsn>, -R <ret>, -V <envid>,
  -L <tag>, -h <n>, -m, -n, -U, -c, -G
                   accepted and ignored (-v names them)
  --queue always|auto|never
                   auto (default): deliver at once, else queue; always: queue;
                   never: deliver now or fail, as mailsend send does [env MAILSEND_QUEUE]
  --profile <name> the config file's profile to use

Local names (root, a user name) are mapped through the aliases file that
MAILSEND_ALIASES or the profile's "aliases" names (the /etc/aliases format).
The message gets a Date, a Message-ID and a From (-f/-F, else MAILSEND_FROM or
the profile's from) when it has none; Bcc (and a saved message's Return-Path
and Content-Length) is removed from what is sent.

Exit codes: 0 sent or queued, 64 usage or no recipients, 65 bad message or
address or too large (MAILSEND_MAX_SIZE, default 10M less 4k), 66 empty input,
75 temporary (the outbox cannot be written), 77 key refused, 78 configuration.

Examples:
  ln -s "$(command -v mailsend)" /usr/local/sbin/sendmail
  printf 'Subject: disk\\n\\n%s\\n' "$(df -h)" | sendmail -i ops@example.com
  sendmail -t -i < message.eml
  mailsend sendmail -t -i < message.eml   # the same without the symlink
  mailsend sendmail -bp                   # the outbox, as mailq does
`;

export async function runSendmail(
  argv: readonly string[],
  io: CliIO,
  invokedAs: "sendmail" | "mailq" | "newaliases" = "sendmail",
): Promise<number> {
  let args: SendmailArgs;
  try {
    args = parseSendmailArgs(argv, invokedAs);
  } catch (e) {
    return reportError(e, io, { json: false });
  }
  if (args.mode === "help") {
    io.stdout.write(SENDMAIL_HELP);
    return 0;
  }
  if (args.mode === "version") {
    io.stdout.write(`mailsend ${VERSION} (sendmail mode)\n`);
    return 0;
  }
  const c = colorsFor(io.stderr, io.env);
  const note: Note = (line) => io.stderr.write(`${c.dim(`mailsend: ${line}`)}\n`);
  try {
    const settings = loadSettings(args.profile, io.env);
    // A profile's aliases path is relative to the config file, like its api_key_file.
    const env = withProfileAliases({ ...settings.env }, io.env, settings.profile);
    const subIO: CliIO = { ...io, env };
    if (args.verbose) for (const i of args.ignored) note(`ignored ${i}`);

    if (args.mode === "list") return await runQueueList({ postfix: true }, subIO);
    if (args.mode === "flush") return await flushOutbox(subIO, args.verbose, note);
    if (args.mode === "aliases") return await checkAliases(env, args.verbose, note);

    const mode = queueModeFrom(args.queue, env);
    const maxSize = maxMessageSize(env);
    if (args.mode === "smtp")
      return await smtpOnStdio(subIO, mode, maxSize, settings.profile?.name, args.verbose ? note : undefined);
    return await sendFromStdin(args, subIO, { mode, maxSize, profile: settings.profile?.name }, note);
  } catch (e) {
    // Said to callers without send's flags: the variables they can set.
    return reportError(withSendmailKeyHint(toMailsendError(e).in("sendmail")), io, {
      json: false,
      verbose: args.verbose,
    });
  }
}

/** Says one line on stderr, dimmed, as "mailsend: <line>". */
type Note = (line: string) => void;

/** `sendmail -q`: as Postfix's, deferred mail is tried now, not at its next retry (queue run keeps those). */
async function flushOutbox(io: CliIO, verbose: boolean, note: Note): Promise<number> {
  const flushed = await Outbox.fromEnv(io.env).flush();
  if (verbose && flushed > 0) note(`${flushed} deferred message${flushed === 1 ? "" : "s"} due now`);
  return await runQueueRun({ verbose }, io);
}

/** newaliases / -bi: nothing to build (the file is read as it is at each use); a broken file is said now. */
async function checkAliases(env: CliIO["env"], verbose: boolean, note: Note): Promise<number> {
  const table = await loadAliases(env);
  if (verbose)
    note(
      table
        ? `${table.path}: ${table.entries.size} aliases (read as it is at each use; there is no database to rebuild)`
        : "no aliases file is set (MAILSEND_ALIASES or the profile's aliases)",
    );
  return 0;
}

/** One message piped in: completed (From, Date, Message-ID, local names), then sent at once or queued. */
async function sendFromStdin(
  args: SendmailArgs,
  io: CliIO,
  how: { mode: ReturnType<typeof queueModeFrom>; maxSize: number; profile: string | undefined },
  note: Note,
): Promise<number> {
  const env = io.env;
  if (io.stdin.isTTY && args.verbose)
    note('reading the message from the terminal; end it with a line holding "." (or Ctrl-D)');
  const input = await readSendmailInput(io.stdin, { ignoreDots: args.ignoreDots, maxSize: how.maxSize });
  const fixed = completeLocalMessage(
    input,
    {
      ...(args.from !== undefined ? { envelopeFrom: args.from } : {}),
      ...(args.fullName !== undefined ? { fullName: args.fullName } : {}),
      readRecipients: args.readRecipients,
      recipients: args.recipients,
    },
    await aliasesFor(env),
    env,
  );
  if (args.verbose) {
    for (const n of fixed.notes) note(n);
    note(`envelope: from ${fixed.envelope.from} to ${fixed.envelope.to.join(", ")}`);
  }
  // Stopped during the at-once attempt (a timeout, systemd, Ctrl-C), the message stays queued.
  const result = await submitStoppable(fixed.raw, fixed.envelope, {
    mode: how.mode,
    env,
    source: "sendmail",
    stampedMessageId: fixed.stampedMessageId,
    ...(how.profile !== undefined ? { profile: how.profile } : {}),
    ...(args.verbose ? { trace: (line: string) => note(line) } : {}),
  });
  if (result.status === "queued") {
    const who = autorunOff(env)
      ? "`mailsend queue run` (or the relay) delivers it"
      : "it is delivered in the background";
    io.stderr.write(
      `mailsend: queued as ${result.id} (${result.reason.replace(/\s+/g, " ")}); ${who}, see it with: mailsend queue\n`,
    );
    return 0;
  }
  if (args.verbose) {
    const r = result.result;
    note(`sent over ${r.transport} to ${fixed.envelope.to.join(", ")} (message id ${r.messageId})`);
    for (const w of r.warnings ?? []) note(`warning: ${w}`);
  }
  return 0;
}

/**
 * No key: sendmail's stdin is the message, so the key cannot be piped, and the programs that call it
 * (cron, PHP) seldom pass a shell's variables on: a file, named where that program's user looks.
 */
function withSendmailKeyHint(e: MailsendError): MailsendError {
  if (e.code !== "config_missing" || e.setting !== "apiKey") return e;
  return new MailsendError(e.code, e.message, {
    cause: e,
    setting: e.setting,
    hint:
      "sendmail's stdin is the message, so the key comes from a file: set MAILSEND_API_KEY_FILE to a file holding it (readable by the user the calling program runs as), " +
      "or name it in that user's profile (mailsend config set api_key_file <path>). To try mailsend locally, start `mailsend sandbox`.",
  });
}

/**
 * `sendmail -bs` (src/relay/stdio-session.ts). The exit code is 0 once the session ended: what was
 * refused was said to the program in the session.
 */
async function smtpOnStdio(
  io: CliIO,
  mode: ReturnType<typeof queueModeFrom>,
  maxSize: number,
  profile: string | undefined,
  note: ((line: string) => void) | undefined,
): Promise<number> {
  const { serveSendmailSession, sessionAliases } = await import("../../relay/stdio-session.js");
  const local = await sessionAliases(io.env);
  // SIGTERM, SIGINT, SIGHUP (the program's timeout, systemd): a message being sent at once stays
  // queued for a runner and is answered 250 as queued, then the session ends; killed as it stood,
  // the message would wait in the outbox under a hold nobody ends. A second signal does not wait.
  const stop = new AbortController();
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  const onSignal = (sig: NodeJS.Signals) => {
    if (!stop.signal.aborted) return stop.abort(new MailsendError("temporary_failure", "interrupted by a signal"));
    for (const s of signals) process.off(s, onSignal);
    process.kill(process.pid, sig);
  };
  for (const s of signals) process.on(s, onSignal);
  try {
    await serveSendmailSession({
      input: io.stdin,
      output: io.stdout,
      maxSize,
      env: io.env,
      mode,
      profile,
      note,
      stop: stop.signal,
      local,
    });
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
  return 0;
}

/**
 * `mailsend sendmail ...` is handed over before commander (main.ts): its getopt-style options
 * are its own (src/sendmail/args.ts). Hidden from the command list and completion:
 * programs call it, people type `send` (which it would share a prefix with).
 */
export function register(program: Command, { io, setExit, argv }: CommandContext): void {
  program
    .command("sendmail", { hidden: true })
    .description(
      "read one message on stdin and send or queue it, as sendmail does (also when started as `sendmail` or `mailq`)",
    )
    .argument("[args...]", "sendmail's options and the recipients (mailsend sendmail --help)")
    .helpOption(false)
    .allowUnknownOption(true)
    .action(async () => setExit(await runSendmail(argv.slice(argv.indexOf("sendmail") + 1), io)));
}
