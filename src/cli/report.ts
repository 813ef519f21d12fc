/**
 * The one place where an error becomes output and an exit code.
 */
import { toMailsendError } from "../core/errors.js";
import { annotation, inGitHubActions } from "./github.js";
import { colorsFor, type CliIO } from "./io.js";

export function reportError(e: unknown, io: CliIO, opts: { json: boolean; verbose?: boolean }): number {
  const err = toMailsendError(e);
  if (opts.json) {
    io.stderr.write(`${JSON.stringify({ error: err.toJSON() })}\n`);
  } else {
    const c = colorsFor(io.stderr, io.env);
    io.stderr.write(`${c.red("error:")} ${err.message}\n`);
    if (err.hint) io.stderr.write(`${c.dim("hint:")} ${err.hint}\n`);
    if (err.code === "internal" && opts.verbose && err.cause instanceof Error && err.cause.stack) {
      io.stderr.write(`${err.cause.stack}\n`);
    }
  }
  // In GitHub Actions the error also shows on the run's summary page. On stderr, so
  // stdout stays data (--json); error messages never hold the key.
  if (inGitHubActions(io.env)) io.stderr.write(annotation("error", err.message, err.hint));
  return err.exitCode;
}

export function warn(io: CliIO, message: string): void {
  const c = colorsFor(io.stderr, io.env);
  io.stderr.write(`${c.yellow("warning:")} ${message}\n`);
}
