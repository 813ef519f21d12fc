/**
 * GitHub Actions: step outputs ($GITHUB_OUTPUT) and workflow-command
 * annotations (::error::). Nothing here runs outside Actions unless asked.
 * The runner's formats are in github-core.mjs, which the Action's entry script shares.
 */
import { appendOutputs } from "./github-core.mjs";
import type { CliIO } from "./io.js";

export { annotation, escapeData, escapeProperty, formatOutputs } from "./github-core.mjs";

export function inGitHubActions(env: CliIO["env"]): boolean {
  return env.GITHUB_ACTIONS === "true";
}

/**
 * Append outputs to $GITHUB_OUTPUT (--github-output). A problem is returned as a warning, never
 * a failure: the mail is already sent.
 */
export function writeGitHubOutputs(env: CliIO["env"], outputs: Record<string, string | number>): string | undefined {
  const file = env.GITHUB_OUTPUT;
  if (!file) return "--github-output: GITHUB_OUTPUT is not set (not in a GitHub Actions step?); no outputs written";
  const problem = appendOutputs(file, outputs);
  return problem === undefined ? undefined : `--github-output: ${problem}`;
}
