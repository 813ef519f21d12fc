import { Command, type CommanderError } from "commander";
import { EXIT } from "../core/errors.js";
import { VERSION } from "../core/version.js";
import type { CliIO } from "./io.js";
import type { CommandContext } from "./command.js";
import { addOptions, optionHelp } from "./flags.js";
import { BATCH_OPTIONS, DOCTOR_OPTIONS, SEND_OPTIONS } from "./options.js";
import * as HELP from "./help-examples.js";
import { annotation, inGitHubActions } from "./github.js";
import { reportError } from "./report.js";
import { redactForPrint } from "../core/redact.js";
// Statically: the send command is most of what runs, and its code comes in the same chunk as the
// program (scripts/build.mjs) either way; an import() would only add a file to open.
import { runSend } from "./commands/send.js";
import { hideOptionValues, secretOptionError } from "./secret-options.js";

// The whole text (how a piped body is read, every option, the exit codes) is in the manual page.
const SEND_EXAMPLES = `
How long a send can take: an attempt gives up after --timeout (30 s) without
progress; all attempts and the waits between retries end by --deadline (60 s);
waiting for the rate limit adds at most --max-wait (300 s).
Worst case with the defaults: 60 s + 300 s = 6 min; with --no-wait, 60 s.

Each option's whole meaning and variable, how a piped body is read, the exit
codes: man mailsend-send.

Examples:
  # A CI notification (key and endpoint from the environment)
  export MAILSEND_API_KEY=...  MAILSEND_BASE_URL=https://api.example.com
  mailsend send --from 'CI <ci@example.com>' --to dev@example.com \\
    --subject "Build #42 passed" --text "All 311 tests passed." --attach build.log
  # Pipe the body: text such as df's is sent as text, a page as HTML
  df -h | mailsend send -f cron@example.com -t ops@example.com -s "disk on $(hostname)"
  # Send an .eml file over SMTP (587, STARTTLS)
  mailsend send --transport smtp --smtp-host smtp.example.com --eml message.eml
  # See what a profile of the config file would send, without sending
  mailsend send --profile work -n -t dev@example.com -s Hi --html '<p>Hi</p>'
`;

const BATCH_EXAMPLES = `
Input rows use the API's field names (from, to, subject, html, name, reply_to,
headers, attachments) plus text, cc, bcc and idempotency_key; other fields or
CSV columns are {{variables}} for the --subject / --html-file / --text-file templates.

A crash or Ctrl-C loses nothing: run the same command again and it sends only
what did not go out, with the same idempotency keys (see --journal, --resume).
Ctrl-C once lets the messages in flight finish (exit 75); a second Ctrl-C cuts
them, names the items whose outcome is unknown and exits 130.
Exit code: 0 when every item was sent, else the most serious failure's code
(67: a message went out but the SMTP server refused some of its recipients).

Examples:
  # Mail merge from a spreadsheet export: columns to, first_name, plan
  mailsend batch people.csv -f 'Billing <billing@example.com>' \\
    -s 'Your {{plan}} plan renews soon' --html-file renewal.html --results out.jsonl

  # Check every row first; nothing is sent
  mailsend batch people.csv --check -f billing@example.com -s Hi --text-file body.txt

  # JSON lines from another program, 8 at a time over SMTP (pooled connections)
  ./notifications | mailsend batch - --transport smtp --concurrency 8 --json
`;

const ROOT_HELP = `
Environment: MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE), MAILSEND_BASE_URL,
MAILSEND_SMTP_HOST, MAILSEND_SMTP_PORT, MAILSEND_SMTP_USER, MAILSEND_TRANSPORT.
Profiles of defaults in a config file: mailsend config --help.
Mail from other programs: as sendmail for those that call it (cron, mail, PHP,
git send-email; mailsend sendmail --help), mailsend relay for apps that speak
only SMTP.

Examples:
  mailsend send -f me@example.com -t you@example.com -s Hello --text "Hi there"
  mailsend sandbox            # a local copy of the service, for trying things out
  mailsend doctor             # check the settings, the key and the connections
  sudo ln -s "$(command -v mailsend)" /usr/local/sbin/sendmail   # be sendmail
  mailsend send --help        # every option of send
`;

/** A command's registration: declares it, its options, help and sub-commands, on the program. */
type Register = (program: Command, ctx: CommandContext) => void;

/** The top-level commands, in the order --help lists them. */
const COMMANDS = [
  "send",
  "batch",
  "run",
  "sandbox",
  "config",
  "inbox",
  "sendmail",
  "queue",
  "doctor",
  "relay",
  "completion",
] as const;
type CommandName = (typeof COMMANDS)[number];

/**
 * Each command's registration. A command's file is loaded only when the command is defined: a
 * run of one command defines only that command (its options, help text and action), so
 * `mailsend send` loads none of the others. The program's own help, an unknown command, `help`
 * and completion (which lists them all) see every command.
 */
const REGISTRATIONS: Record<CommandName, () => Register | Promise<Register>> = {
  send: () => registerSend,
  batch: () => registerBatch,
  sandbox: async () => (await import("./commands/sandbox.js")).register,
  config: async () => (await import("./commands/config.js")).register,
  inbox: async () => (await import("./commands/inbox.js")).register,
  sendmail: async () => (await import("./commands/sendmail.js")).register,
  queue: async () => (await import("./commands/queue.js")).register,
  run: async () => (await import("./commands/run.js")).register,
  doctor: () => registerDoctor,
  relay: async () => (await import("./commands/relay.js")).register,
  completion: async () => (await import("./commands/completion.js")).register,
};

/** Commander's own errors (unknown option, missing value) are usage errors: 64. */
class UsageExit extends Error {
  constructor(readonly exitCode: number) {
    super("usage");
  }
}

/** The program with the commands `ctx.argv` needs (every one when it names none, or completion). */
export async function buildProgram(ctx: CommandContext): Promise<Command> {
  const program = rootProgram(ctx);
  const first = ctx.argv[0];
  const one = COMMANDS.find((name) => name === first && name !== "completion");
  const registrations = await Promise.all((one ? [one] : COMMANDS).map((name) => REGISTRATIONS[name]()));
  for (const register of registrations) register(program, ctx);
  return program;
}

/** The root: version, help, how commander's errors are shown and exit, the check for stray words. */
function rootProgram({ io, json, argv }: CommandContext): Command {
  const program = new Command("mailsend");
  program
    // Words no option takes are named by the preAction hook below (stray.ts), with the quoted form.
    .allowExcessArguments(true)
    .hook("preAction", async (_program, action) => {
      if (action.args.length <= action.registeredArguments.length) return;
      const { strayArgumentError } = await import("./stray.js");
      const e = strayArgumentError(action, argv);
      if (e) throw e;
    })
    .description("Send email through the service's REST endpoint or SMTP submission.")
    .configureHelp({ optionDescription: optionHelp })
    .version(VERSION, "-V, --version")
    // Under --json, stderr carries only the error object.
    .showHelpAfterError(json ? false : "(run with --help for usage)")
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      outputError: (raw, write) => {
        // Never the value of an unknown --opt=value, nor a key pasted as an option's argument.
        const s = redactForPrint(hideOptionValues(raw));
        const message = s.replace(/^error: /, "").trim();
        // send's -n / --dry-run is the first thing tried on batch, whose dry run is --check.
        const hint =
          argv[0] === "batch" && /^error: unknown option '(-n|--dry-run)(=|')/.test(s)
            ? "batch's dry run is --check: it validates every row and sends nothing"
            : undefined;
        if (json) {
          io.stderr.write(
            `${JSON.stringify({ error: { code: "usage", message, exit: EXIT.usage, ...(hint ? { hint } : {}) } })}\n`,
          );
        } else write(hint ? `${s.trimEnd()}\nhint: ${hint}\n` : s);
        if (inGitHubActions(io.env)) io.stderr.write(annotation("error", message));
      },
    })
    .exitOverride((err: CommanderError) => {
      // --help and --version exit 0; everything else commander stops on (no command,
      // unknown option, missing value) is a usage error.
      throw new UsageExit(err.exitCode === 0 ? 0 : EXIT.usage);
    })
    .addHelpText("after", ROOT_HELP);
  return program;
}

function registerSend(program: Command, { io, setExit }: CommandContext): void {
  const send = program.command("send").description("send one message").addHelpText("after", SEND_EXAMPLES);
  addOptions(send, SEND_OPTIONS);
  send.action(async (opts: Record<string, unknown>) => {
    setExit(await runSend(opts, io));
  });
}

function registerBatch(program: Command, { io, setExit }: CommandContext): void {
  const batch = program
    .command("batch")
    .description("send many messages from JSON lines, a JSON array or CSV, resumable after a crash")
    .argument("<file>", "the input file, or - for stdin")
    .addHelpText("after", BATCH_EXAMPLES);
  addOptions(batch, BATCH_OPTIONS);
  batch.action(async (file: string, opts: Record<string, unknown>) => {
    const { runBatchCommand } = await import("./commands/batch.js");
    setExit(await runBatchCommand(file, opts, io));
  });
}

function registerDoctor(program: Command, { io, setExit }: CommandContext): void {
  const doctor = program
    .command("doctor")
    .description("check the configuration, the key, TLS and both transports, without sending mail")
    .addHelpText("after", HELP.DOCTOR_HELP);
  addOptions(doctor, DOCTOR_OPTIONS);
  doctor.action(async (opts: Record<string, unknown>) => {
    const { runDoctorCommand } = await import("./commands/doctor.js");
    setExit(await runDoctorCommand(opts, io));
  });
}

export async function run(argv: string[], io: CliIO): Promise<number> {
  let code = 0;
  const json = argv.includes("--json");
  try {
    const setExit = (c: number) => {
      code = c;
    };
    const program = await buildProgram({ io, setExit, json, argv });
    // --api-key KEY, --token=KEY, --password KEY: refused, saying where a key goes.
    const secret = secretOptionError(argv);
    if (secret) throw secret;
    if (argv[0] === "help" && argv.length >= 2 && !argv[1]!.startsWith("-")) {
      const { unknownHelpTopic } = await import("./stray.js");
      const e = unknownHelpTopic(program, argv[1]!);
      if (e) throw e;
    }
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (e) {
    if (e instanceof UsageExit) return e.exitCode;
    return reportError(e, io, { json });
  }
}
