import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { EXIT } from "../core/errors.js";
import { VERSION } from "../core/version.js";
import type { CliIO } from "./io.js";
import { SEND_OPTIONS, type OptionSpec } from "./options.js";
import { reportError } from "./report.js";

const SEND_EXAMPLES = `
Examples:
  # A CI notification (key and endpoint from the environment)
  export MAILSEND_API_KEY=...  MAILSEND_BASE_URL=https://api.example.com
  mailsend send --from 'CI <ci@example.com>' --to dev@example.com \\
    --subject "Build #42 passed" --text "All 311 tests passed." --attach build.log

  # Pipe an HTML report (stdin is the HTML body when no body flag is given)
  ./make-report.sh | mailsend send -f reports@example.com -t team@example.com -s "Nightly report"

  # Send an .eml file over SMTP (587, STARTTLS)
  mailsend send --transport smtp --smtp-host smtp.example.com --eml message.eml

  # See exactly what would be sent, without sending
  mailsend send -n -f a@example.com -t b@example.com -s Hi --html '<p>Hi</p>'

Exit codes: 0 sent, 64 usage, 65 bad message, 66 missing file, 69 unavailable,
75 temporary (retry later), 76 outcome unknown, 77 key refused, 78 configuration.
`;

const ROOT_HELP = `
Examples:
  mailsend send -f me@example.com -t you@example.com -s Hello --text "Hi there"
  mailsend sandbox            # a local copy of the service, for trying things out
  mailsend send --help        # every option of send

Environment: MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE), MAILSEND_BASE_URL,
MAILSEND_SMTP_HOST, MAILSEND_SMTP_PORT, MAILSEND_SMTP_USER, MAILSEND_TRANSPORT.
`;

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

export function buildProgram(io: CliIO, setExit: (code: number) => void, json = false): Command {
  const program = new Command("mailsend");
  program
    .description("Send email through the service's REST endpoint or SMTP submission.")
    .version(VERSION, "-V, --version")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      outputError: (s, write) => {
        if (json) {
          const message = s.replace(/^error: /, "").trim();
          io.stderr.write(`${JSON.stringify({ error: { code: "usage", message, exit: EXIT.usage } })}\n`);
        } else write(s);
      },
    })
    .exitOverride((err: CommanderError) => {
      const ok = err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.code === "commander.help";
      throw new UsageExit(ok ? 0 : EXIT.usage);
    })
    .addHelpText("after", ROOT_HELP);

  const send = program
    .command("send")
    .description("send one message")
    .addHelpText("after", SEND_EXAMPLES);
  addOptions(send, SEND_OPTIONS);
  send.action(async (opts: Record<string, unknown>) => {
    const { runSend } = await import("./commands/send.js");
    setExit(await runSend(opts, io));
  });

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
  );
  try {
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (e) {
    if (e instanceof UsageExit) return e.exitCode;
    return reportError(e, io, { json });
  }
}
