/**
 * How an outcome becomes output: the line of a message sent, and the one place where an error
 * becomes output and an exit code.
 */
import { toMailsendError } from "../core/errors.js";
import type { SendResult } from "../core/transport.js";
import { redactForPrint } from "../core/redact.js";
import { annotation, inGitHubActions } from "./github.js";
import { colorsFor, type CliIO } from "./io.js";

export function reportError(e: unknown, io: CliIO, opts: { json: boolean; verbose?: boolean; exit?: number }): number {
  const err = toMailsendError(e);
  // Every printed word passes the one redactor (a URL's password never shows, whoever built the message).
  const message = redactForPrint(err.message);
  const hint = err.hint === undefined ? undefined : redactForPrint(err.hint);
  if (opts.json) {
    // `exit`: what the process exits with (a signal's 130 or 143 where the caller says so).
    io.stderr.write(
      `${JSON.stringify({ error: { ...err.toJSON(), message, ...(hint ? { hint } : {}), ...(opts.exit !== undefined ? { exit: opts.exit } : {}) } })}\n`,
    );
  } else {
    const c = colorsFor(io.stderr, io.env);
    io.stderr.write(`${c.red("error:")} ${message}\n`);
    if (hint) io.stderr.write(`${c.dim("hint:")} ${hint}\n`);
    if (err.code === "internal" && opts.verbose && err.cause instanceof Error && err.cause.stack) {
      io.stderr.write(`${err.cause.stack}\n`);
    }
  }
  // In GitHub Actions the error also shows on the run's summary page. On stderr, so
  // stdout stays data (--json); error messages never hold the key.
  if (inGitHubActions(io.env)) io.stderr.write(annotation("error", message, hint));
  return opts.exit ?? err.exitCode;
}

/** `sent <id> (<transport>, to <recipients>)` on stdout: what a send that went out says. */
export function reportSent(io: CliIO, result: SendResult): void {
  const out = colorsFor(io.stdout, io.env);
  // A raw .eml without a Message-ID has no id of ours to show: show the server's reply instead.
  const id = result.messageId || `(no Message-ID; the server said: ${result.smtpResponse ?? "ok"})`;
  io.stdout.write(
    `${out.green("sent")} ${id} ${out.dim(`(${result.transport}, to ${result.recipients.join(", ")})`)}\n`,
  );
}

export function warn(io: CliIO, message: string): void {
  const c = colorsFor(io.stderr, io.env);
  io.stderr.write(`${c.yellow("warning:")} ${redactForPrint(message)}\n`);
}
