/**
 * GitHub Actions: step outputs ($GITHUB_OUTPUT) and workflow-command
 * annotations (::error::). Nothing here runs outside Actions unless asked.
 */
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import type { CliIO } from "./io.js";

export function inGitHubActions(env: CliIO["env"]): boolean {
  return env.GITHUB_ACTIONS === "true";
}

/** A workflow command's message: %, CR and LF are escaped, as the runner unescapes them. */
export function escapeData(s: string): string {
  return s.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

/** A workflow command's property value: also ":" and ",", which separate properties. */
export function escapeProperty(s: string): string {
  return escapeData(s).replace(/:/g, "%3A").replace(/,/g, "%2C");
}

/** `::error title=mailsend::message` (the hint, if any, on a second line of the annotation). */
export function annotation(kind: "error" | "warning", message: string, hint?: string): string {
  const text = hint ? `${message}\n${hint}` : message;
  return `::${kind} title=${escapeProperty("mailsend")}::${escapeData(text)}\n`;
}

/**
 * Lines for $GITHUB_OUTPUT: name=value, or the delimiter form when a value
 * holds a line break (a value from a server may), with a delimiter that does
 * not occur in it.
 */
export function formatOutputs(outputs: Record<string, string | number>): string {
  let out = "";
  for (const [name, raw] of Object.entries(outputs)) {
    const value = String(raw);
    if (!/[\r\n]/.test(value)) {
      out += `${name}=${value}\n`;
      continue;
    }
    let delimiter = `ghadelimiter_${randomUUID()}`;
    while (value.includes(delimiter)) delimiter = `ghadelimiter_${randomUUID()}`;
    out += `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
  }
  return out;
}

/**
 * Append outputs to $GITHUB_OUTPUT. The mail is already sent when this runs,
 * so a problem here is a warning (returned), never a failure that would make
 * a pipeline send it again.
 */
export function writeGitHubOutputs(env: CliIO["env"], outputs: Record<string, string | number>): string | undefined {
  const file = env.GITHUB_OUTPUT;
  if (!file) return "--github-output: GITHUB_OUTPUT is not set (not in a GitHub Actions step?); no outputs written";
  try {
    appendFileSync(file, formatOutputs(outputs));
    return undefined;
  } catch (e) {
    return `--github-output: cannot append to GITHUB_OUTPUT (${(e as NodeJS.ErrnoException).code ?? String(e)}); no outputs written`;
  }
}
