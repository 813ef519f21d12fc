/**
 * `mailsend run`: a job run, watched. Its exit status is the job's; its mail goes through the
 * outbox (written to disk, delivered by the background runner), so the job never waits for the
 * budget or the service, and an alert outlives a service that is down.
 */
import { randomUUID } from "node:crypto";
import { hostname, userInfo } from "node:os";
import { parseAddressValues, parseMailbox1, type Mailbox } from "../core/address.js";
import { MailsendError, toMailsendError } from "../core/errors.js";
import { makeRedactor } from "../core/redact.js";
import { loadSettings } from "../settings/profile.js";
import type { Env } from "../core/env.js";
import { decide, type AlertMail, type OnWhat } from "./alert.js";
import { runChild, type ChildOutcome } from "./child.js";
import { ciRun } from "./ci.js";
import { alertMessage, type AlertFacts } from "./mail.js";
import { OutputKeeper, type KeptOutput } from "./output.js";
import { queueAlert } from "./queue.js";
import { withJobState } from "./state.js";
import { templateBody, type RunTemplate } from "./template.js";

export interface RunJobOptions {
  command: string;
  args: readonly string[];
  /** The command line as a shell would take it back: shown in the mail, and the job's default id. */
  commandLine: string;
  /** --id; the command line when unset. */
  id?: string;
  on: OnWhat;
  quietForMs: number;
  timeoutMs: number;
  graceMs: number;
  to: readonly string[];
  from?: string;
  subject?: string;
  /** --template, read and checked: the body instead of the built-in one. */
  template?: RunTemplate;
  profile?: string;
  /** Lines of output in the body. */
  tailLines: number;
  /** The most output attached (the end of it). */
  attachLimit: number;
}

export interface RunIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Env;
}

export interface RunJobResult {
  /** The job's exit status: run's own. */
  status: number;
  outcome: ChildOutcome;
  /** The mail queued for this run, if any. */
  queued?: { id: string; subject: string; kind: AlertMail["kind"] };
  /** Why no mail could be queued though one was due (the alert is then said on stderr by the caller). */
  mailError?: MailsendError;
  /** Said to the caller: the alert waits for settings to be fixed. */
  warnings: string[];
}

/** The body's tail is at most this much of the output, whatever --tail says. */
const TAIL_BYTES = 64 * 1024;

/** The addressing of the mail, checked before the job runs: a mistake there is said at once, not after a night's job. */
function addressing(o: RunJobOptions, env: Env): { from: Mailbox; to: Mailbox[]; env: Env; profile?: string } {
  const settings = loadSettings(o.profile, env);
  if (o.to.length === 0)
    throw new MailsendError("usage", "mailsend run needs --to: who gets the job's mail", {
      hint: "mailsend run --to ops@example.com -- /usr/local/bin/backup.sh",
    });
  const to = parseAddressValues(o.to, "--to");
  const fromText = o.from ?? (settings.env.MAILSEND_FROM || undefined);
  if (!fromText)
    throw new MailsendError("config_missing", "no sender for the job's mail", {
      hint: "Give --from <address>, or set MAILSEND_FROM (or the profile's from: mailsend config set from <address>).",
    });
  const from = parseMailbox1(fromText, o.from !== undefined ? "--from" : "MAILSEND_FROM");
  return { from, to, env: settings.env, ...(settings.profile ? { profile: settings.profile.name } : {}) };
}

function currentUser(): string | undefined {
  try {
    return userInfo().username || undefined;
  } catch {
    return undefined;
  }
}

export async function runJob(o: RunJobOptions, io: RunIO): Promise<RunJobResult> {
  const mailTo = addressing(o, io.env);
  const keeper = new OutputKeeper(Math.max(o.attachLimit, TAIL_BYTES));
  const outcome = await runChild({
    command: o.command,
    args: o.args,
    env: io.env as NodeJS.ProcessEnv,
    stdout: io.stdout,
    stderr: io.stderr,
    onOutput: (chunk) => keeper.add(chunk),
    timeoutMs: o.timeoutMs,
    graceMs: o.graceMs,
  });
  if (outcome.startError) io.stderr.write(`mailsend run: ${outcome.startError}\n`);
  const output = withoutKey(keeper.result(o.tailLines, TAIL_BYTES, o.attachLimit), io.env.MAILSEND_API_KEY);
  const result: RunJobResult = { status: outcome.status, outcome, warnings: [] };
  const id = o.id ?? o.commandLine;
  try {
    const queued = await withJobState(mailTo.env, id, async (prev) => {
      // The time of the decision, under the lock: runs of one job that end together are ordered by it.
      const d = decide(prev, outcome.status !== 0, o.on, o.quietForMs, Date.now());
      if (!d.mail) return { next: d.next, result: undefined };
      const facts = alertFacts(o, id, outcome, output, io.env);
      const message = alertMessage(
        facts,
        d.mail,
        {
          from: mailTo.from,
          to: mailTo.to,
          ...(o.subject !== undefined ? { subject: o.subject } : {}),
          idempotencyKey: randomUUID(),
        },
        o.template ? templateBody(o.template, facts, d.mail) : undefined,
      );
      const q = await queueAlert(message, mailTo.env, mailTo.profile);
      result.warnings.push(...q.warnings);
      return { next: d.next, result: { id: q.id, subject: message.subject, kind: d.mail.kind } };
    });
    if (queued) result.queued = queued;
  } catch (e) {
    result.mailError = toMailsendError(e);
  }
  return result;
}

/**
 * The output without the API key this process was given (a job that prints its environment): the
 * mail, unlike the job's own log, goes to other people's inboxes.
 */
function withoutKey(output: KeptOutput, key: string | undefined): KeptOutput {
  if (!key) return output;
  const redact = makeRedactor(key);
  // latin1 maps each byte to one character and back: only the key's (ASCII) bytes change.
  return { ...output, tail: redact(output.tail), kept: Buffer.from(redact(output.kept.toString("latin1")), "latin1") };
}

function alertFacts(o: RunJobOptions, id: string, outcome: ChildOutcome, output: KeptOutput, env: Env): AlertFacts {
  const user = currentUser();
  const ci = ciRun(env);
  return {
    id,
    named: o.id !== undefined,
    command: o.command,
    commandLine: o.commandLine,
    host: hostname() || "localhost",
    ...(user ? { user } : {}),
    outcome,
    output,
    timeoutMs: o.timeoutMs,
    quietForMs: o.quietForMs,
    ...(ci ? { ci } : {}),
  };
}
