/**
 * One sandbox per data dir: two writers would interleave index lines and hand out the same port in
 * the export lines. The lock is core/lock.ts's: a dead sandbox's is taken over, and createSandbox()
 * can start two sandboxes in one process, so a second one with the same dir is refused.
 */
import { MailsendError } from "../core/errors.js";
import { tryLock } from "../core/lock.js";

export function acquireLock(path: string, dir: string): () => void {
  for (let attempt = 0; attempt < 3; attempt++) {
    const a = tryLock(path, { what: "sandbox lock" });
    if ("release" in a) return a.release;
    if ("retry" in a) continue;
    const { pid, here } = a.holder;
    if (here) {
      throw new MailsendError(
        "config_invalid",
        `another sandbox of this process is already running with the data dir ${dir}`,
        {
          hint: (s) => `Close it first, or give this one its own ${s.pick({ cli: "--dir", api: "options.dir" })}.`,
        },
      );
    }
    throw new MailsendError(
      "config_invalid",
      `another sandbox${pid !== undefined ? ` (pid ${pid})` : ""} is already running with the data dir ${dir}`,
      {
        hint: (s) => `Stop it first, or give this one its own ${s.pick({ cli: "--dir", api: "options.dir" })}.`,
      },
    );
  }
  throw new MailsendError("internal", `could not take the sandbox lock ${path}`);
}
