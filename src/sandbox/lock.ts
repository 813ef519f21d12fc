/**
 * One sandbox per data dir: two writers would interleave index lines and
 * hand out the same port in the export lines. The lock holds the pid; a lock
 * whose process is gone is taken over. It is written to a temp file and
 * link()ed into place, so no start ever sees it empty (and takes it for a
 * dead one's while its owner is still writing it).
 *
 * A lock holding this process's own pid is a dead process's (a container's pid 1 of an earlier
 * run) unless this process holds it: createSandbox() can start two sandboxes in one process, so
 * the locks it holds are kept in HELD.
 */
import { linkSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { processAlive } from "../core/pid.js";
import { localFileError, MailsendError } from "../core/errors.js";

const HELD = new Set<string>();

export function acquireLock(path: string, dir: string): () => void {
  const held = resolve(path);
  if (HELD.has(held)) {
    throw new MailsendError("config_invalid", `another sandbox of this process is already running with the data dir ${dir}`, {
      hint: "Close it first, or give this one its own --dir.",
    });
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    const tmp = `${path}.${process.pid}.tmp`;
    try {
      try {
        writeFileSync(tmp, `${process.pid}\n`, { mode: 0o600 });
        try {
          linkSync(tmp, path);
        } catch (e) {
          // A file system without hard links: an exclusive create, as before.
          if (!["EPERM", "ENOTSUP", "ENOSYS", "EOPNOTSUPP"].includes((e as NodeJS.ErrnoException).code ?? "")) throw e;
          writeFileSync(path, `${process.pid}\n`, { flag: "wx", mode: 0o600 });
        }
      } finally {
        try {
          unlinkSync(tmp);
        } catch {}
      }
      let released = false;
      HELD.add(held);
      return () => {
        if (released) return;
        released = true;
        HELD.delete(held);
        try {
          unlinkSync(path);
        } catch {}
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw localFileError(e, path, "write", "sandbox lock");
      let pid = Number.NaN;
      try {
        pid = Number.parseInt(readFileSync(path, "utf8"), 10);
      } catch {
        continue; // released meanwhile
      }
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
