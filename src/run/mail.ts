/**
 * The alert a run sends: a subject that says what happened in the inbox's list, a body with
 * what a person needs to act (command, host, user, times, status, the output's tail, the CI run),
 * and the whole output attached when the tail does not show it all. HTML, its output in a <pre>
 * block: the one body both REST and SMTP carry whole; or the text --template makes.
 */
import { basename } from "node:path";
import type { Mailbox } from "../core/address.js";
import { formatAge, formatSize } from "../core/size.js";
import { escapeHtml, type Attachment, type Message } from "../core/message.js";
import type { AlertMail } from "./alert.js";
import type { ChildOutcome } from "./child.js";
import type { CiRun } from "./ci.js";
import type { KeptOutput } from "./output.js";

export interface AlertFacts {
  /** The job's name: --id, or the command line. */
  id: string;
  /** --id was given (then it names the job in the subject). */
  named: boolean;
  command: string;
  /** The command line, quoted as a shell would take it back. */
  commandLine: string;
  host: string;
  user?: string;
  outcome: ChildOutcome;
  output: KeptOutput;
  /** --timeout, for the words of a job it stopped. */
  timeoutMs: number;
  quietForMs: number;
  ci?: CiRun;
}

export interface AlertAddressing {
  from: Mailbox;
  to: Mailbox[];
  subject?: string;
  idempotencyKey: string;
}

/** What happened to the job, in a few words: "exit 3", "killed by SIGTERM", "timed out after 5m". */
export function statusWords(o: ChildOutcome, timeoutMs: number): string {
  if (o.startError) return o.startError.endsWith("command not found") ? "command not found" : "could not start";
  if (o.timedOut) return `timed out after ${formatAge(timeoutMs)}${o.killed ? ", killed" : ""}`;
  if (o.signal) return `killed by ${o.signal}`;
  return `exit ${o.status}`;
}

/** One line, without control characters, of a reasonable length. */
function oneLine(s: string, max: number): string {
  const t = s.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

export function alertSubject(f: AlertFacts, mail: AlertMail): string {
  const name = f.named ? f.id : basename(f.command);
  const what =
    mail.kind === "failed"
      ? `failed (${statusWords(f.outcome, f.timeoutMs)})`
      : mail.kind === "recovered"
        ? "recovered"
        : "succeeded";
  return oneLine(`[${f.host}] ${name} ${what}`, 200);
}

/** The message, ready for the outbox; `text`: the body from --template, instead of the HTML one. */
export function alertMessage(f: AlertFacts, mail: AlertMail, a: AlertAddressing, text?: string): Message {
  const attachment = outputAttachment(f.output);
  return {
    from: a.from,
    to: a.to,
    cc: [],
    bcc: [],
    subject: a.subject !== undefined ? oneLine(a.subject, 400) : alertSubject(f, mail),
    ...(text !== undefined ? { text } : { html: alertHtml(f, mail, attachment !== undefined) }),
    attachments: attachment ? [attachment] : [],
    // RFC 3834: made by a program, so no auto-reply and no bounce notice answers it.
    headers: [
      ["Auto-Submitted", "auto-generated"],
      ["X-Mailsend-Job", oneLine(f.id, 200)],
    ],
    idempotencyKey: a.idempotencyKey,
  };
}

/** The kept output, when the body's tail does not show all of it. */
function outputAttachment(o: KeptOutput): Attachment | undefined {
  // Nothing kept (--attach-limit 0), or the body shows it all.
  if (o.kept.length === 0 || (o.cutBytes === 0 && o.tailLines >= o.totalLines)) return undefined;
  const note =
    o.cutBytes > 0
      ? Buffer.from(
          `[mailsend: the first ${formatSize(o.cutBytes)} of ${formatSize(o.totalBytes)} were cut; what follows is the end]\n`,
        )
      : Buffer.alloc(0);
  return {
    filename: "output.txt",
    contentType: "text/plain; charset=utf-8",
    source: { kind: "bytes", data: Buffer.concat([note, o.kept]) },
  };
}

function row(name: string, value: string | undefined): string {
  return value === undefined
    ? ""
    : `<tr><th align="left" valign="top">${escapeHtml(name)}</th><td>${escapeHtml(value)}</td></tr>\n`;
}

function alertHtml(f: AlertFacts, mail: AlertMail, attached: boolean): string {
  const o = f.outcome;
  const status = o.code !== undefined && !o.timedOut ? `${o.code}` : `${o.status} (${statusWords(o, f.timeoutMs)})`;
  const table =
    row("Command", f.commandLine) +
    (f.named ? row("Job", f.id) : "") +
    row("Host", f.host) +
    row("User", f.user) +
    row("Started", new Date(o.startedAt).toISOString()) +
    row("Ended", new Date(o.endedAt).toISOString()) +
    row("Duration", duration(o.endedAt - o.startedAt)) +
    row("Exit status", status) +
    (o.forwarded ? row("Signal", `${o.forwarded} was sent to mailsend run and passed on to the job`) : "") +
    (o.timedOut
      ? row("Timeout", `stopped after ${formatAge(f.timeoutMs)} with SIGTERM${o.killed ? ", then SIGKILL" : ""}`)
      : "") +
    (f.ci
      ? row("CI", f.ci.system) + row("CI run", f.ci.url) + row("Commit", f.ci.commit) + row("Branch", f.ci.branch)
      : "");
  return `<!DOCTYPE html>
<html><body>
<p>${escapeHtml(headline(f, mail))}</p>
${history(mail, f.quietForMs)}<table cellpadding="2">
${table}</table>
${outputHtml(f.output, attached)}</body></html>
`;
}

function headline(f: AlertFacts, mail: AlertMail): string {
  const cmd = f.commandLine;
  if (mail.kind === "failed") return `${cmd} failed on ${f.host}: ${statusWords(f.outcome, f.timeoutMs)}.`;
  if (mail.kind === "recovered") return `${cmd} succeeded on ${f.host} again.`;
  return `${cmd} succeeded on ${f.host}.`;
}

/** What the mail stands for beyond this run: failures kept quiet, the streak a recovery ends. */
function history(mail: AlertMail, quietForMs: number): string {
  const lines: string[] = [];
  const at = (ms: number | undefined) => (ms === undefined ? "" : new Date(ms).toISOString());
  if (mail.kind === "failed" && mail.unmailed > 0) {
    lines.push(
      `This mail stands for ${mail.unmailed + 1} failures since ${at(mail.unmailedSince)}: ${mail.unmailed} of them were not mailed (one mail per ${formatAge(quietForMs)}, --quiet-for).`,
    );
  }
  if (mail.kind === "failed" && mail.streak > 1)
    lines.push(`Failing since ${at(mail.streakSince)}: ${mail.streak} failed runs in a row.`);
  if (mail.kind === "failed" && mail.previous === "unknown")
    lines.push("Previous state: unknown (no earlier run of this job is known).");
  if (mail.kind === "recovered")
    lines.push(
      `It had failed since ${at(mail.streakSince)} (${mail.streak} failed run${mail.streak === 1 ? "" : "s"}).`,
    );
  return lines.map((l) => `<p>${escapeHtml(l)}</p>\n`).join("");
}

function outputHtml(o: KeptOutput, attached: boolean): string {
  if (o.totalBytes === 0) return "<p>No output.</p>\n";
  const shown =
    o.tailLines >= o.totalLines
      ? `Output (${o.totalLines} line${o.totalLines === 1 ? "" : "s"}):`
      : `Output: the last ${o.tailLines} of ${o.totalLines} lines${attached ? (o.cutBytes > 0 ? `; the last ${formatSize(o.kept.length)} of ${formatSize(o.totalBytes)} attached as output.txt` : "; all of it attached as output.txt") : ""}.`;
  return `<p>${escapeHtml(shown)}</p>\n<pre style="font-family: monospace; white-space: pre-wrap">${escapeHtml(o.tail)}</pre>\n`;
}

export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return formatAge(ms);
}
