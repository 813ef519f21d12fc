import { Option, type Command } from "commander";
import type { CommandContext } from "../command.js";
import { wholeNumber } from "../flags.js";
import { examples } from "../help-examples.js";
import {
  runQueueCheck,
  runQueueList,
  runQueuePurge,
  runQueueRetry,
  runQueueRm,
  runQueueRun,
} from "../queue-actions.js";

function registerCheck(queue: Command, { io, setExit }: CommandContext): void {
  queue
    .command("check")
    .description(
      "a monitoring check (Nagios, Icinga): one status line with performance data; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN",
    )
    .addHelpText(
      "after",
      `
WARNING when the oldest queued message is older than --warning-age, when
--warning-count or more are queued, or when failed/ holds a message (mail given
up: mailsend queue --failed); CRITICAL past --critical-age or --critical-count.
${examples([
  "mailsend queue check                     # QUEUE OK - 0 queued, 0 failed, oldest - | queued=0;;;0 ...",
  "mailsend queue check --warning-age 30m --critical-age 2h --warning-count 100 --critical-count 1000",
  "mailsend queue check --json | jq .status",
])}`,
    )
    .option("--warning-age <duration>", "WARNING when the oldest queued message is older (default 1h)")
    .option("--critical-age <duration>", "CRITICAL when it is older (default 4h)")
    .addOption(new Option("--warning-count <n>", "WARNING when this many or more are queued").argParser(wholeNumber))
    .addOption(new Option("--critical-count <n>", "CRITICAL when this many or more are queued").argParser(wholeNumber))
    .option("--json", "print the counts, the status and its reasons as one JSON object")
    .action(async (_opts: unknown, cmd: Command) => setExit(await runQueueCheck(cmd.optsWithGlobals(), io)));
}

const QUEUE_HELP = `
Mail handed to mailsend by sendmail, the relay or send --queue waits here
($MAILSEND_STATE_DIR/outbox) until it is delivered, exactly once, within the
key's budget. A background runner starts by itself when mail is queued
(MAILSEND_QUEUE_AUTORUN=0 turns that off where a service runs the queue).
Temporary failures (and a key the service refuses: fix it, the backlog goes)
are retried with backoff for up to 5 days (--max-age), then moved to failed/
with the reason; a message the service refuses goes there at once.

${examples([
  "mailsend queue                          # what is waiting, and why",
  "mailsend queue --failed --json",
  "mailsend queue run                      # deliver what is due now, then exit (cron, a timer)",
  "mailsend queue run --watch              # keep delivering (a systemd service)",
  "mailsend queue retry --all              # everything due now, failed/ included",
  "mailsend queue rm <id>",
  "mailsend queue purge --failed",
  "mailsend queue check --warning-age 1h    # for Nagios, Icinga: exit 0/1/2/3",
]).trimStart()}`;

/** `mailsend queue` (the list) and its sub-commands ls, run, retry, rm and purge. */
export function register(program: Command, ctx: CommandContext): void {
  const { io, setExit } = ctx;
  const queue = program
    .command("queue")
    .description("the outbox: mail from sendmail, the relay and send --queue, kept on disk until delivered")
    .option("--failed", "list the messages that will not be tried again (failed/)")
    .option("--json", "print the list as one JSON array")
    .addHelpText("after", QUEUE_HELP)
    .action(async (opts: Record<string, unknown>) => setExit(await runQueueList(opts, io)));
  queue
    .command("ls")
    .description(
      "list the outbox (the default): id, age, size, attempts, next attempt, from, recipients, subject, last error",
    )
    .addHelpText(
      "after",
      examples([
        "mailsend queue ls",
        "mailsend queue ls --failed --json | jq -r '.[] | .id + \" \" + .last_error.message'",
      ]),
    )
    .option("--failed", "list failed/ instead")
    .option("--json", "print one JSON array")
    .action(async (_opts: unknown, cmd: Command) => setExit(await runQueueList(cmd.optsWithGlobals(), io)));
  registerRun(queue, ctx);
  registerChanges(queue, ctx);
  registerCheck(queue, ctx);
}

function registerRun(queue: Command, { io, setExit }: CommandContext): void {
  queue
    .command("run")
    .description("deliver what is due, then exit (cron, a systemd timer); --watch keeps delivering as mail arrives")
    .addHelpText(
      "after",
      examples([
        "mailsend queue run                 # what is due now, then exit (cron: */5 * * * *)",
        "mailsend queue run --watch         # as a service: MAILSEND_QUEUE_AUTORUN=0 for the callers",
        "mailsend queue run --json | jq -c 'select(.event == \"failed\")'",
      ]),
    )
    .option("--watch", "keep running: deliver as messages arrive and as the budget frees up (a systemd service)")
    .addOption(new Option("--drain", "stay until the outbox is empty (the background runner)").hideHelp())
    .addOption(new Option("--concurrency <n>", "messages in flight at once (default 4)").argParser(wholeNumber))
    .option(
      "--max-age <duration>",
      "give up on a message after this long in the outbox (default 5d) [env MAILSEND_QUEUE_MAX_AGE]",
    )
    .option("--json", "one JSON line per event on stdout")
    .option("-v, --verbose", "show each connection's protocol trace (the key redacted)")
    .option("-q, --quiet", "say only what failed")
    .action(async (_opts: unknown, cmd: Command) => setExit(await runQueueRun(cmd.optsWithGlobals(), io)));
}

/** retry, rm and purge: the sub-commands that change what the outbox holds. */
function registerChanges(queue: Command, { io, setExit }: CommandContext): void {
  queue
    .command("retry")
    .description("make a message due now, bringing it back from failed/")
    .addHelpText(
      "after",
      examples(["mailsend queue retry 0mwv1vzcp0gbbf144ad", "mailsend queue retry --all && mailsend queue run"]),
    )
    .argument("[id]", "the message's id (from mailsend queue)")
    .option("--all", "every queued and failed message")
    .option("--json", 'print {"retried":n}')
    .action(async (id: string | undefined, _opts: unknown, cmd: Command) =>
      setExit(await runQueueRetry(id, cmd.optsWithGlobals(), io)),
    );
  queue
    .command("rm")
    .description("delete messages from the outbox (queued or failed): they are not sent")
    .addHelpText(
      "after",
      examples([
        "mailsend queue rm 0mwv1vzcp0gbbf144ad",
        "mailsend queue rm $(mailsend queue ls --json | jq -r '.[].id')   # empty it",
      ]),
    )
    .argument("<id...>", "the messages' ids")
    .option("--json", 'print {"removed":n}')
    .action(async (ids: string[], _opts: unknown, cmd: Command) =>
      setExit(await runQueueRm(ids, cmd.optsWithGlobals(), io)),
    );
  queue
    .command("purge")
    .description("delete every failed message (failed/)")
    .addHelpText(
      "after",
      examples(["mailsend queue purge --failed", "mailsend queue ls --failed && mailsend queue purge --failed"]),
    )
    .option("--failed", "required: what to purge")
    .option("--json", 'print {"removed":n}')
    .action(async (_opts: unknown, cmd: Command) => setExit(await runQueuePurge(cmd.optsWithGlobals(), io)));
}
