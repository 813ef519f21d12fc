/**
 * Queued mail goes out by itself: when a message is queued and no runner
 * holds the outbox, a runner is started in the background, detached from the
 * caller's terminal and process group (cron and PHP return at once), logging
 * to the outbox's runner.log. It drains the outbox and exits when it is empty.
 */
import { closeSync, realpathSync } from "node:fs";
import { openOwned } from "../core/owned.js";
import { isSingleExecutable } from "../core/sea.js";
import { join } from "node:path";
import { runnerHoldsOutbox } from "./runner-lock.js";
import { Outbox } from "./store.js";
import type { Env } from "../core/env.js";

/**
 * The command that runs mailsend again: Node and the entry script, whatever name it was called by
 * (a `sendmail` symlink); or the single executable itself, started under the name `mailsend` (its
 * argv[0], which it reads as the name it was called by) even when the file is named sendmail.
 */
function selfCommand(): { file: string; args: string[]; argv0?: string } {
  if (isSingleExecutable()) return { file: process.execPath, args: [], argv0: "mailsend" };
  const argv1 = process.argv[1];
  if (!argv1) throw new Error("no entry script");
  return { file: process.execPath, args: [realpathSync(argv1)] };
}

export function autorunOff(env: Env): boolean {
  const v = (env.MAILSEND_QUEUE_AUTORUN ?? "").trim().toLowerCase();
  return v === "0" || v === "false" || v === "no" || v === "off";
}

/**
 * Start a background runner unless one holds the outbox (or the setting says
 * a service runs the queue). Returns the log's path when one was started.
 */
export async function kickRunner(env: Env, outbox: Outbox = Outbox.fromEnv(env)): Promise<string | undefined> {
  if (autorunOff(env)) return undefined;
  if (runnerHoldsOutbox(outbox)) return undefined;
  const log = join(outbox.dir, "runner.log");
  let fd: number | undefined;
  try {
    try {
      fd = openOwned(log, "append");
    } catch {
      // A log it cannot write (another user's, a link): the runner goes all the same, unlogged.
    }
    const self = selfCommand();
    // node:child_process only here: loading it costs every command that queues nothing.
    const { spawn } = process.getBuiltinModule("node:child_process");
    const child = spawn(self.file, [...self.args, "queue", "run", "--drain"], {
      ...(self.argv0 ? { argv0: self.argv0 } : {}),
      detached: true,
      stdio: fd === undefined ? "ignore" : ["ignore", fd, fd],
      env: { ...env, MAILSEND_OUTBOX_DIR: outbox.dir },
      cwd: "/",
    });
    child.on("error", () => {});
    child.unref();
    return log;
  } catch {
    // The mail is safe in the outbox; `mailsend queue run` delivers it.
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
