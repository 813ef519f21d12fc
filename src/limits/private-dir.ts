/**
 * The state dir and its subdirectories hold journals and results (addresses,
 * subjects): made 0700, and a faulty one reported as a fault of this machine
 * (73 with the path and the errno in words), not as a bug.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { existsSync, mkdirSync, statSync } = process.getBuiltinModule("node:fs");
import { dirname } from "node:path";
import { localFileError } from "../core/errors.js";
import { mkdirOwned } from "../core/owned.js";
import { checkDirChain } from "../core/trusted-dir.js";

/**
 * Make `dir` (and its missing parents) with mode 0700, refusing (78) a `dir` or a `within` (the
 * state dir it is in) that another user can write. Returns a warning when it already existed with
 * read access for the group or others.
 */
export function ensurePrivateDir(dir: string, what = "state directory", within?: string): string | undefined {
  // Nothing is made or written where another user could write too (src/core/trusted-dir.ts): before, and once made.
  const chain = [...(within ? [{ path: within, what: "state directory" }] : []), { path: dir, what }];
  checkDirChain(chain);
  let made: string | undefined;
  try {
    made = mkdirOwned(dir);
  } catch (e) {
    throw localFileError(realCause(dir, e), dir, "write", what);
  }
  checkDirChain(chain);
  if (made !== undefined || process.platform === "win32") return undefined;
  try {
    const mode = statSync(dir).mode & 0o777;
    if (mode & 0o077) {
      return `the ${what} ${dir} can be read by other users (mode ${mode.toString(8).padStart(4, "0")}) and holds addresses and subjects; run: chmod 700 '${dir.replace(/'/g, "'\\''")}'`;
    }
  } catch {}
  return undefined;
}

/**
 * Node's recursive mkdir reports ENOENT where a parent exists but refuses a child (a read-only
 * file system, EROFS; no permission, EACCES): the real reason is that of making the first
 * missing directory by itself.
 */
function realCause(dir: string, e: unknown): unknown {
  if ((e as NodeJS.ErrnoException).code !== "ENOENT") return e;
  let missing = dir;
  for (let i = 0; i < 64 && !existsSync(dirname(missing)) && dirname(missing) !== missing; i++)
    missing = dirname(missing);
  try {
    mkdirSync(missing, { mode: 0o700 });
  } catch (first) {
    return first;
  }
  return e;
}
