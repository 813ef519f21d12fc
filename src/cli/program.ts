import { Argument, Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { EXIT } from "../core/errors.js";
import { VERSION } from "../core/version.js";
import type { CliIO } from "./io.js";
import { BATCH_OPTIONS, DOCTOR_OPTIONS, RELAY_OPTIONS, SEND_OPTIONS, type OptionSpec } from "./options.js";
import * as HELP from "./help-examples.js";
import { annotation, inGitHubActions } from "./github.js";
import { reportError } from "./report.js";
// Statically: the send command is most of what runs, and its code comes in the same chunk as the
// program (scripts/build.mjs) either way; an import() would only add a file to open.
import { runSend } from "./commands/send.js";
import { hideOptionValues, secretOptionError } from "./secret-options.js";
import { addSandboxOptions, DIR_OPTION, JSON_OPTION, SANDBOX_OPTIONS } from "./sandbox-options.js";

const SEND_EXAMPLES = `
A body piped on stdin without a body flag is HTML when it starts as HTML
(<!DOCTYPE html>, or an HTML element such as <p> or <table> with an end tag
later), else plain text (over REST escaped inside <pre>, over SMTP text/plain);
--stdin-type html|text decides instead, -v and --json say which was chosen.

How long a send can take: an attempt gives up after --timeout (30 s) without
progress; every attempt and the waits between retries end by --deadline (60 s),
an attempt still running then is stopped; waiting for the rate limit adds at
most --max-wait (300 s). Worst case with the defaults: 60 s + 300 s = 6 min;
with --no-wait, 60 s.

Exit codes: 0 sent (or queued), 64 usage, 65 bad message, 66 missing file,
67 some recipients refused (SMTP), 69 unavailable, 70 internal error (a bug),
73 cannot write a local file, 74 local I/O error, 75 temporary (retry later),
76 outcome unknown, 77 key refused, 78 configuration.

Examples:
  # A CI notification (key and endpoint from the environment)
  export MAILSEND_API_KEY=...  MAILSEND_BASE_URL=https://api.example.com
  mailsend send --from 'CI <ci@example.com>' --to dev@example.com \\
    --subject "Build #42 passed" --text "All 311 tests passed." --attach build.log

  # Pipe the body (no body flag): text such as df's is sent as text, a page as HTML
  df -h | mailsend send -f cron@example.com -t ops@example.com -s "disk on $(hostname)"
  ./make-report.sh | mailsend send -f reports@example.com -t team@example.com -s "Nightly report"

  # Send an .eml file over SMTP (587, STARTTLS)
  mailsend send --transport smtp --smtp-host smtp.example.com --eml message.eml

  # A Markdown body (raw HTML in it escaped); in GitHub Actions, the id as a step output
  mailsend send -f ci@example.com -t dev@example.com -s "Build #42" \\
    --markdown-file summary.md --github-output

  # With the settings of a profile of the config file (mailsend config --help)
  mailsend send --profile work -t dev@example.com -s Hi --text ok

  # See exactly what would be sent, without sending
  mailsend send -n -f a@example.com -t b@example.com -s Hi --html '<p>Hi</p>'
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

const CONFIG_HELP = `
The config file (mailsend config path) holds named profiles: defaults for the
connection, the sender and the rate limit, and WHERE the key is (api_key_env or
api_key_file), never the key. Flags beat the environment, which beats the profile.
The profile used: --profile, else MAILSEND_PROFILE, else the file's "profile",
else one named "default".

Examples:
  mailsend config set --profile work base_url https://api.example.com
  mailsend config set --profile work api_key_env WORK_MAILSEND_KEY
  mailsend config set --profile work from 'CI <ci@example.com>'
  mailsend config set profile work           # the default profile
  mailsend config list
  mailsend send --profile work -t dev@example.com -s Hi --text ok
`;

const SANDBOX_HELP = `
While it runs: POST /_sandbox/faults {"failRate":0.5,"failStatus":503} changes the faults,
DELETE /_sandbox/faults clears them, GET /_sandbox/stats counts answers per channel.

Examples:
  mailsend sandbox                              # ports 8025 (HTTP), 2587 (STARTTLS), 2465 (TLS)
  mailsend sandbox --http-port 0 --smtp-port 0 --smtps-port 0 --json   # free ports, one JSON line
  mailsend sandbox --rate-limit 5 --fail-rate 0.2 --latency 300        # test a script's retries
  mailsend sandbox keys add --label ci --expires 30d
  mailsend inbox && mailsend inbox show <id> --raw
`;

/** The top-level commands, in the order --help lists them. */
const COMMANDS = ["send", "batch", "sandbox", "config", "inbox", "sendmail", "queue", "doctor", "relay", "completion"] as const;

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError("expected a whole number");
  return Number(value);
}

export function addOptions(cmd: Command, specs: readonly OptionSpec[]): Command {
  for (const spec of specs) {
    const desc = spec.env ? `${spec.description} [env ${spec.env}]` : spec.description;
    const opt = new Option(spec.flags, desc);
    if (spec.choices) opt.choices(spec.choices);
    if (spec.repeatable) opt.argParser(collect);
    else if (spec.int) opt.argParser(wholeNumber);
    cmd.addOption(opt);
  }
  return cmd;
}

/** Commander's own errors (unknown option, missing value) are usage errors: 64. */
class UsageExit extends Error {
  constructor(readonly exitCode: number) {
    super("usage");
  }
}

export function buildProgram(io: CliIO, setExit: (code: number) => void, json = false, argv: readonly string[] = []): Command {
  const program = new Command("mailsend");
  // A run of one command defines only that command (its options, help text and action):
  // defining all ten with their ~200 options cost every send ~10 ms. The program's own help, an
  // unknown command, `help` and completion (which lists them all) see every command.
  const only = argv[0] !== undefined && (COMMANDS as readonly string[]).includes(argv[0]) && argv[0] !== "completion" ? argv[0] : undefined;
  const defines = (name: (typeof COMMANDS)[number]) => only === undefined || only === name;
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
    .version(VERSION, "-V, --version")
    // Under --json, stderr carries only the error object.
    .showHelpAfterError(json ? false : "(run with --help for usage)")
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      outputError: (raw, write) => {
        // Never the value of an unknown --opt=value, nor a key pasted as an option's argument.
        const s = hideOptionValues(raw);
        const message = s.replace(/^error: /, "").trim();
        // send's -n / --dry-run is the first thing tried on batch, whose dry run is --check.
        const hint = argv[0] === "batch" && /^error: unknown option '(-n|--dry-run)(=|')/.test(s) ? "batch's dry run is --check: it validates every row and sends nothing" : undefined;
        if (json) {
          io.stderr.write(`${JSON.stringify({ error: { code: "usage", message, exit: EXIT.usage, ...(hint ? { hint } : {}) } })}\n`);
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

  if (defines("send")) {
    const send = program
      .command("send")
      .description("send one message")
      .addHelpText("after", SEND_EXAMPLES);
    addOptions(send, SEND_OPTIONS);
    send.action(async (opts: Record<string, unknown>) => {
      setExit(await runSend(opts, io));
    });
  }

  if (defines("batch")) {
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

  if (defines("sandbox")) {
    const sandbox = program
      .command("sandbox")
      .description("run a local copy of the service: REST, SMTP, keys, limits, stored mail, web inbox")
      .addHelpText("after", SANDBOX_HELP);
    addSandboxOptions(sandbox, SANDBOX_OPTIONS);
    sandbox.action(async (opts: Record<string, unknown>) => {
      const { runSandbox } = await import("./commands/sandbox.js");
      setExit(await runSandbox(opts, io));
    });
    const keys = sandbox.command("keys").description("manage the sandbox's API keys (stored hashed)");
    // --dir may come before `keys` (the sandbox's option) or after it.
    const keyOpts = (cmd: Command) => cmd.optsWithGlobals() as Record<string, unknown>;
    const keysAdd = keys.command("add").description("make a key and print it (the only time it is shown)");
    addSandboxOptions(keysAdd, [
      DIR_OPTION,
      { flags: "--label <text>", description: "what the key is for" },
      { flags: "--expires <when>", description: "a duration (90s, 15m, 12h, 30d, 2w) or a date (2027-01-31)" },
      { flags: "--save", description: "also write it to <dir>/api-key (mode 0600), the file MAILSEND_API_KEY_FILE points at" },
      JSON_OPTION,
    ]);
    keysAdd.action(async (_opts: unknown, cmd: Command) => {
      const { runKeysAdd } = await import("./commands/sandbox.js");
      setExit(await runKeysAdd(keyOpts(cmd), io));
    });
    const keysList = keys.command("list").description("list keys: id, state, label, dates (never the keys)");
    addSandboxOptions(keysList, [DIR_OPTION, JSON_OPTION]);
    keysList.action(async (_opts: unknown, cmd: Command) => {
      const { runKeysList } = await import("./commands/sandbox.js");
      setExit(await runKeysList(keyOpts(cmd), io));
    });
    const keysRevoke = keys.command("revoke").description("revoke a key by id; it fails on REST and SMTP from then on").argument("<id>");
    addSandboxOptions(keysRevoke, [DIR_OPTION, JSON_OPTION]);
    keysRevoke.action(async (id: string, _opts: unknown, cmd: Command) => {
      const { runKeysRevoke } = await import("./commands/sandbox.js");
      setExit(await runKeysRevoke(id, keyOpts(cmd), io));
    });
    // Every command's --help ends with examples (help-examples.ts).
    keys.addHelpText("after", HELP.KEYS_HELP);
    keysAdd.addHelpText("after", HELP.KEYS_ADD_HELP);
    keysList.addHelpText("after", HELP.KEYS_LIST_HELP);
    keysRevoke.addHelpText("after", HELP.KEYS_REVOKE_HELP);
  }

  if (defines("config")) {
    const config = program.command("config").description("show or change the config file's profiles (never a key)").addHelpText("after", CONFIG_HELP);
    const profileOption = () => new Option("--profile <name>", "the profile to act on (default: MAILSEND_PROFILE, the file's default, else \"default\")");
    const configOpts = (cmd: Command) => cmd.optsWithGlobals() as Record<string, unknown>;
    const configExamples = (...lines: string[]) => `\nExamples:\n${lines.map((l) => `  ${l}`).join("\n")}\n`;
    config.addOption(profileOption());
    config
      .command("path")
      .description("print the config file's path ($MAILSEND_CONFIG, $XDG_CONFIG_HOME/mailsend/config.json or ~/.config/mailsend/config.json)")
      .addHelpText("after", configExamples("mailsend config path", '$EDITOR "$(mailsend config path)"'))
      .action(async (_opts: unknown, cmd: Command) => {
        const { runConfigPath } = await import("./commands/config.js");
        setExit(await runConfigPath(configOpts(cmd), io));
      });
    config
      .command("list")
      .description("print every profile's settings as profile.key=value (with --profile: that profile's)")
      .addOption(profileOption())
      .option("--json", "print the file's profiles as one JSON object")
      .addHelpText("after", configExamples("mailsend config list                 # profile=work, work.base_url=https://...", "mailsend config list --profile work", "mailsend config list --json | jq '.profiles | keys'"))
      .action(async (_opts: unknown, cmd: Command) => {
        const { runConfigList } = await import("./commands/config.js");
        setExit(await runConfigList(configOpts(cmd), io));
      });
    config
      .command("get")
      .description("print one setting of the profile (exit 1 when it is not set); `get profile` prints the default profile")
      .argument("<key>")
      .addOption(profileOption())
      .option("--json", 'print {"key","value"}')
      .addHelpText("after", configExamples("mailsend config get base_url               # of the default profile", "mailsend config get --profile work api_key_env", "mailsend config get profile                # the default profile's name"))
      .action(async (key: string, _opts: unknown, cmd: Command) => {
        const { runConfigGet } = await import("./commands/config.js");
        setExit(await runConfigGet(key, configOpts(cmd), io));
      });
    config
      .command("set")
      .description("set one setting of the profile (creating the file and the profile); `set profile <name>` sets the default")
      .argument("<key>")
      .argument("<value>")
      .addOption(profileOption())
      .addHelpText(
        "after",
        configExamples(
          "mailsend config set --profile work base_url https://api.example.com",
          "mailsend config set --profile work api_key_env WORK_MAILSEND_KEY   # the variable's NAME",
          "mailsend config set --profile home api_key_file ~/.secrets/mailsend",
          "mailsend config set profile work            # make work the default",
        ),
      )
      .action(async (key: string, value: string, _opts: unknown, cmd: Command) => {
        const { runConfigSet } = await import("./commands/config.js");
        setExit(await runConfigSet(key, value, configOpts(cmd), io));
      });
    config
      .command("unset")
      .description("remove one setting from the profile; `unset profile` removes the default")
      .argument("<key>")
      .addOption(profileOption())
      .addHelpText("after", configExamples("mailsend config unset --profile work rate_limit", "mailsend config unset profile               # no default profile"))
      .action(async (key: string, _opts: unknown, cmd: Command) => {
        const { runConfigUnset } = await import("./commands/config.js");
        setExit(await runConfigUnset(key, configOpts(cmd), io));
      });
  }

  if (defines("inbox")) {
    const inbox = program.command("inbox").description("list the messages a sandbox stored");
    addSandboxOptions(inbox, [DIR_OPTION, { flags: "--limit <n>", description: "newest n only", parse: "int" }, JSON_OPTION]);
    inbox.action(async (opts: Record<string, unknown>) => {
      const { runInbox } = await import("./commands/inbox.js");
      setExit(await runInbox(opts, io));
    });
    const inboxShow = inbox.command("show").description("show one stored message").argument("<id>", "an id from `mailsend inbox`, or the Message-ID an SMTP send printed");
    addSandboxOptions(inboxShow, [DIR_OPTION, { flags: "--raw", description: "print the .eml exactly as stored" }, JSON_OPTION]);
    inboxShow.action(async (id: string, _opts: unknown, cmd: Command) => {
      const { runInboxShow } = await import("./commands/inbox.js");
      setExit(await runInboxShow(id, cmd.optsWithGlobals(), io));
    });
    inbox.addHelpText("after", HELP.INBOX_HELP);
    inboxShow.addHelpText("after", HELP.INBOX_SHOW_HELP);
  }

  if (defines("sendmail")) {
    // sendmail's getopt-style options are its own (src/input/sendmail-args.ts): main.ts hands
    // `mailsend sendmail ...` over before commander. Hidden from the command list and completion:
    // programs call it, people type `send` (which it would share a prefix with).
    program
      .command("sendmail", { hidden: true })
      .description("read one message on stdin and send or queue it, as sendmail does (also when started as `sendmail` or `mailq`)")
      .argument("[args...]", "sendmail's options and the recipients (mailsend sendmail --help)")
      .helpOption(false)
      .allowUnknownOption(true)
      .action(async () => {
        const { runSendmail } = await import("./commands/sendmail.js");
        setExit(await runSendmail(argv.slice(argv.indexOf("sendmail") + 1), io));
      });
  }

  if (defines("queue")) {
    const queue = program
      .command("queue")
      .description("the outbox: mail from sendmail, the relay and send --queue, kept on disk until delivered")
      .option("--failed", "list the messages that will not be tried again (failed/)")
      .option("--json", "print the list as one JSON array")
      .addHelpText("after", HELP.QUEUE_HELP)
      .action(async (opts: Record<string, unknown>) => {
        const { runQueueList } = await import("./commands/queue.js");
        setExit(await runQueueList(opts, io));
      });
    queue
      .command("ls")
      .description("list the outbox (the default): id, age, size, attempts, next attempt, from, recipients, subject, last error")
      .addHelpText("after", HELP.QUEUE_LS_HELP)
      .option("--failed", "list failed/ instead")
      .option("--json", "print one JSON array")
      .action(async (_opts: unknown, cmd: Command) => {
        const { runQueueList } = await import("./commands/queue.js");
        setExit(await runQueueList(cmd.optsWithGlobals(), io));
      });
    queue
      .command("run")
      .description("deliver what is due, then exit (cron, a systemd timer); --watch keeps delivering as mail arrives")
      .addHelpText("after", HELP.QUEUE_RUN_HELP)
      .option("--watch", "keep running: deliver as messages arrive and as the budget frees up (a systemd service)")
      .addOption(new Option("--drain", "stay until the outbox is empty (the background runner)").hideHelp())
      .addOption(new Option("--concurrency <n>", "messages in flight at once (default 4)").argParser(wholeNumber))
      .option("--max-age <duration>", "give up on a message after this long in the outbox (default 5d) [env MAILSEND_QUEUE_MAX_AGE]")
      .option("--json", "one JSON line per event on stdout")
      .option("-v, --verbose", "show each connection's protocol trace (the key redacted)")
      .option("-q, --quiet", "say only what failed")
      .action(async (_opts: unknown, cmd: Command) => {
        const { runQueueRun } = await import("./commands/queue.js");
        setExit(await runQueueRun(cmd.optsWithGlobals(), io));
      });
    queue
      .command("retry")
      .description("make a message due now, bringing it back from failed/")
      .addHelpText("after", HELP.QUEUE_RETRY_HELP)
      .argument("[id]", "the message's id (from mailsend queue)")
      .option("--all", "every queued and failed message")
      .option("--json", "print {\"retried\":n}")
      .action(async (id: string | undefined, _opts: unknown, cmd: Command) => {
        const { runQueueRetry } = await import("./commands/queue.js");
        setExit(await runQueueRetry(id, cmd.optsWithGlobals(), io));
      });
    queue
      .command("rm")
      .description("delete messages from the outbox (queued or failed): they are not sent")
      .addHelpText("after", HELP.QUEUE_RM_HELP)
      .argument("<id...>", "the messages' ids")
      .option("--json", "print {\"removed\":n}")
      .action(async (ids: string[], _opts: unknown, cmd: Command) => {
        const { runQueueRm } = await import("./commands/queue.js");
        setExit(await runQueueRm(ids, cmd.optsWithGlobals(), io));
      });
    queue
      .command("purge")
      .description("delete every failed message (failed/)")
      .addHelpText("after", HELP.QUEUE_PURGE_HELP)
      .option("--failed", "required: what to purge")
      .option("--json", "print {\"removed\":n}")
      .action(async (_opts: unknown, cmd: Command) => {
        const { runQueuePurge } = await import("./commands/queue.js");
        setExit(await runQueuePurge(cmd.optsWithGlobals(), io));
      });
  }

  if (defines("doctor")) {
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

  if (defines("relay")) {
    const relay = program
      .command("relay")
      .description("a local SMTP server for apps that only speak SMTP: each message is queued in the outbox (fsynced) before 250, then delivered")
      .addHelpText(
        "after",
        `
Apps (Jenkins, Grafana, Gitea, a printer) are given host 127.0.0.1, port 2525,
no TLS and no authentication. Each message is answered "250 2.0.0 queued as
<id>" only once it is on disk; the relay then delivers it through the key's
budget (mailsend queue shows what waits). SIGTERM/SIGINT: no new mail, the
deliveries in flight finish, the rest stays queued for the next start.
Replies: 552 over --max-size, 554 a message that cannot be delivered as it is,
451 this machine's settings cannot deliver it (e.g. a text-only body with REST
only), 553 at RCPT a recipient that is not a valid address, 452 the outbox
cannot be written (disk full), 421 over --max-clients.

Examples:
  mailsend relay                                   # 127.0.0.1:2525
  mailsend relay --listen [::1]:2525 -v            # IPv6 loopback, one line per message
  printf '%s' 'a long password' | mailsend relay hash-password grafana >> /etc/mailsend/relay-users
  mailsend relay --listen 0.0.0.0:2525 --auth-file /etc/mailsend/relay-users \\
    --tls-cert /etc/ssl/relay.pem --tls-key /etc/ssl/relay.key
  swaks --server 127.0.0.1:2525 --from ci@example.com --to dev@example.com
`,
      );
    addOptions(relay, RELAY_OPTIONS);
    relay.action(async (opts: Record<string, unknown>) => {
      const { runRelay } = await import("./commands/relay.js");
      setExit(await runRelay(opts, io));
    });
    relay
      .command("hash-password")
      .description("read a password on stdin (or the terminal, not echoed) and print the user:scrypt$... line for --auth-file")
      .argument("[user]", "the user name to put in front of the hash")
      .option("--json", 'print {"user","hash"}')
      .addHelpText("after", "\nExamples:\n  printf '%s' 'a long password' | mailsend relay hash-password jenkins >> relay-users\n  mailsend relay hash-password gitea >> relay-users      # asks for it\n")
      .action(async (user: string | undefined, opts: Record<string, unknown>) => {
        const { runRelayHashPassword } = await import("./commands/relay.js");
        setExit(await runRelayHashPassword(user, opts, io));
      });
  }

  if (defines("completion")) {
    program
      .command("completion")
      .description("print a shell completion script for bash, zsh or fish")
      .addArgument(new Argument("<shell>", "bash, zsh or fish").choices(["bash", "zsh", "fish"]))
      .addHelpText("after", HELP.COMPLETION_HELP)
      .action(async (shell: "bash" | "zsh" | "fish") => {
        const { runCompletion } = await import("./commands/completion.js");
        setExit(await runCompletion(shell, program, io));
      });
  }

  return program;
}

export async function run(argv: string[], io: CliIO): Promise<number> {
  let code = 0;
  const json = argv.includes("--json");
  const program = buildProgram(
    io,
    (c) => {
      code = c;
    },
    json,
    argv,
  );
  try {
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
