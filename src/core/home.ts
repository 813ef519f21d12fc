/**
 * `~` at the start of a path taken from an environment variable, as a shell
 * would have expanded it on the command line: `MAILSEND_API_KEY_FILE=~/key`
 * in a crontab, a systemd unit or a CI `env:` block reaches mailsend with
 * the tilde still in it. Only `~` and `~/…` (the user's own home, from HOME
 * as the shell takes it); `~other/…` is left as it is.
 */
import { join } from "node:path";

export function expandHome(path: string, env: Record<string, string | undefined>): string {
  if (path !== "~" && !path.startsWith("~/")) return path;
  const home = homeDir(env);
  return path === "~" ? home : join(home, path.slice(2));
}

/**
 * HOME, else the account's home directory. node:os is looked up only then: HOME is nearly always
 * set, and importing os would load it in every send (the build loads a built-in with its importer).
 */
export function homeDir(env: Record<string, string | undefined>): string {
  return env.HOME || process.getBuiltinModule("node:os").homedir();
}
