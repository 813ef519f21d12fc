/**
 * `mailsend run [options] -- <command> [args...]`: runs a job (a cron line, a systemd unit, a CI
 * step) and mails when it fails, or changes, through the outbox. Its exit status is the job's.
 */
import type { Command } from "commander";
import { MailsendError } from "../../core/errors.js";
import type { CommandContext } from "../command.js";
import { addOptions } from "../flags.js";
import { parseDuration, parseSize } from "../values.js";
import { examples } from "../help-examples.js";
import { shellWord, type CliIO } from "../io.js";
import { RUN_OPTIONS } from "../options.js";
import { reportError, warn } from "../report.js";

interface RunFlags {
  to?: string[];
  from?: string;
  subject?: string;
  template?: string;
  profile?: string;
  on?: "failure" | "change" | "always";
  id?: string;
  quietFor?: string;
  timeout?: string;
  killAfter?: string;
  tail?: number;
  attachLimit?: string;
  verbose?: boolean;
}

const RUN_HELP = `
The job's stdout and stderr pass through as they come and are kept (the end of
them, in bounded memory) for the mail: the last lines in the body, the whole
output attached up to --attach-limit. The exit status is the job's (a signal:
128 + n). The mail goes into the outbox and out by the background runner: the
job never waits for the rate limit or the service, and with the service down
the mail waits in the outbox (mailsend queue shows it).

One failure, one mail: the same job (--id) failing again within --quiet-for
sends nothing more; the next mail says how many failures it stands for. The
state lives in the state dir (MAILSEND_STATE_DIR), or in the budget's Redis
(MAILSEND_RATE_LIMIT_URL). SIGINT and SIGTERM sent to mailsend run go to the
job's process group.

Exit codes: the job's; 64 usage or no --to, 78 no sender (MAILSEND_FROM), 66 an
unreadable --template, 65 a placeholder in it no run fills: all before the job
runs. A mail that cannot be queued is said on stderr.
${examples([
  "# crontab: mail ops when the backup fails, once an hour at most",
  "*/5 * * * * mailsend run --to ops@example.com -- /usr/local/bin/backup.sh",
  "# a failure, and one mail when it works again",
  "mailsend run --on change --id nightly-sync -t ops@example.com -- ./sync.sh --full",
  "# stop a job that hangs",
  "mailsend run --timeout 30m -t ops@example.com -- pg_dump -f /backup/db.sql app",
]).trimStart()}`;

/** The options as run's domain function takes them; usage errors (64) before the job runs. */
async function runOptions(command: string[], f: RunFlags) {
  const [cmd, ...args] = command;
  if (!cmd)
    throw new MailsendError("usage", "name the command to run after --", {
      hint: "mailsend run --to ops@example.com -- /usr/local/bin/backup.sh",
    });
  if (f.id !== undefined && f.id.trim() === "") throw new MailsendError("usage", "--id must not be empty");
  const template =
    f.template !== undefined ? await (await import("../../run/template.js")).loadRunTemplate(f.template) : undefined;
  return {
    command: cmd,
    args,
    commandLine: command.map(shellWord).join(" "),
    ...(f.id !== undefined ? { id: f.id } : {}),
    on: f.on ?? "failure",
    quietForMs: parseDuration(f.quietFor ?? "1h", "--quiet-for"),
    timeoutMs: f.timeout !== undefined ? parseDuration(f.timeout, "--timeout") : 0,
    graceMs: parseDuration(f.killAfter ?? "10s", "--kill-after"),
    to: f.to ?? [],
    ...(f.from !== undefined ? { from: f.from } : {}),
    ...(f.subject !== undefined ? { subject: f.subject } : {}),
    ...(template ? { template } : {}),
    ...(f.profile !== undefined ? { profile: f.profile } : {}),
    tailLines: f.tail ?? 50,
    attachLimit:
      f.attachLimit !== undefined
        ? f.attachLimit.trim() === "0"
          ? 0
          : parseSize(f.attachLimit, "--attach-limit")
        : 1024 * 1024,
  } as const;
}

export async function runRunCommand(command: string[], flags: RunFlags, io: CliIO): Promise<number> {
  let status: number;
  try {
    const { runJob } = await import("../../run/job.js");
    const r = await runJob(await runOptions(command, flags), io);
    status = r.status;
    for (const w of r.warnings) warn(io, w);
    if (r.mailError)
      reportError(
        new MailsendError(
          r.mailError.code,
          `the job's mail could not be queued: ${r.mailError.message}`,
          r.mailError.hint ? { hint: r.mailError.hint } : {},
        ),
        io,
        { json: false },
      );
    else if (flags.verbose)
      io.stderr.write(
        r.queued
          ? `mailsend run: queued ${r.queued.kind} mail ${r.queued.id}: ${r.queued.subject}\n`
          : `mailsend run: exit ${r.status}, nothing to mail\n`,
      );
  } catch (e) {
    return reportError(e, io, { json: false });
  }
  return status;
}

export function register(program: Command, { io, setExit }: CommandContext): void {
  const run = program
    .command("run")
    .description("run a command and mail its output when it fails (cron, systemd, CI); exits with its status")
    .usage("[options] -- <command> [args...]")
    .argument("<command...>", "the command and its arguments, after --")
    .addHelpText("after", RUN_HELP);
  addOptions(run, RUN_OPTIONS);
  run.action(async (command: string[], opts: RunFlags) => setExit(await runRunCommand(command, opts, io)));
}
