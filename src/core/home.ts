/**
 * `~` at the start of a path taken from an environment variable, as a shell
 * would have expanded it on the command line: `MAILSEND_API_KEY_FILE=~/key`
 * in a crontab, a systemd unit or a CI `env:` block reaches mailsend with
 * the tilde still in it. Only `~` and `~/…` (the user's own home, from HOME
 * as the shell takes it); `~other/…` is left as it is.
 */
import { homedir } from "node:os";
import { join } from "node:path";

export function expandHome(path: string, env: Record<string, string | undefined>): string {
  if (path !== "~" && !path.startsWith("~/")) return path;
  const home = env.HOME || homedir();
  return path === "~" ? home : join(home, path.slice(2));
}
