/**
 * One sandbox per data dir: two writers would interleave index lines and
 * hand out the same port in the export lines. The lock holds the pid; a lock
 * whose process is gone is taken over.
 */
import { readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { processAlive } from "../core/pid.js";
import { localFileError, MailsendError } from "../core/errors.js";


export function acquireLock(path: string, dir: string): () => void {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: "wx", mode: 0o600 });
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          unlinkSync(path);
        } catch {}
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
        // Created but not written (a full disk): take it back, so no empty lock is left behind.
        try {
          unlinkSync(path);
        } catch {}
        throw localFileError(e, path, "write", "sandbox lock");
      }
      const pid = Number.parseInt(readFileSync(path, "utf8"), 10);
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid)) {
        throw new MailsendError("config_invalid", `another sandbox (pid ${pid}) is already running with the data dir ${dir}`, {
          hint: "Stop it first, or give this one its own --dir.",
        });
      }
      try {
        unlinkSync(path);
      } catch {}
    }
  }
  throw new MailsendError("internal", `could not take the sandbox lock ${path}`);
}
