/**
 * The state dir and its subdirectories hold journals and results (addresses,
 * subjects): made 0700, and a faulty one reported as a fault of this machine
 * (73 with the path and the errno in words), not as a bug.
 */
import { mkdirSync, statSync } from "node:fs";
import { localFileError } from "../core/errors.js";

/**
 * Make `dir` (and its missing parents) with mode 0700. Returns a warning when
 * it already existed with access for the group or others.
 */
export function ensurePrivateDir(dir: string, what = "state directory"): string | undefined {
  let made: string | undefined;
  try {
    made = mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw localFileError(e, dir, "write", what);
  }
  if (made !== undefined || process.platform === "win32") return undefined;
  try {
    const mode = statSync(dir).mode & 0o777;
    if (mode & 0o077) {
      return `the ${what} ${dir} can be read by other users (mode ${mode.toString(8).padStart(4, "0")}) and holds addresses and subjects; run: chmod 700 '${dir.replace(/'/g, "'\\''")}'`;
    }
  } catch {}
  return undefined;
}
