/**
 * Files mailsend writes where another user may own the directory: root running `queue retry`,
 * `queue run` or sendmail in a daemon user's state dir (PHP-FPM's www-data, nobody). There it must
 * not be led by a symbolic link that user planted to write a file of that user's choosing, and
 * what it makes must stay readable by that user, whose runner and sends go on using it.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { chownSync, constants, fchownSync, lstatSync, mkdirSync, openSync } = process.getBuiltinModule("node:fs");
import { dirname } from "node:path";

/**
 * Whom a file root makes in `dir` goes to: the directory's owner when that is another user, and
 * only when the directory is that user's alone. One others can write (a 1777 or 0777 dir), or a
 * link standing for it, is not a daemon user's state dir: what root writes there stays root's.
 */
export function dirOwner(dir: string): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.mode & 0o022) return undefined;
    return st.uid !== 0 ? { uid: st.uid, gid: st.gid } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Opens `path` for writing without following a link at its end: "new" makes it (fails if anything
 * is there), "append" adds to it (making it if missing). A file root makes in another user's
 * directory is given to that user.
 */
export function openOwned(path: string, how: "new" | "append", mode = 0o600): number {
  const { O_WRONLY, O_CREAT, O_EXCL, O_APPEND, O_NOFOLLOW } = constants;
  const fd = openSync(path, O_WRONLY | O_CREAT | (O_NOFOLLOW ?? 0) | (how === "new" ? O_EXCL : O_APPEND), mode);
  const owner = dirOwner(dirname(path));
  if (owner) {
    try {
      fchownSync(fd, owner.uid, owner.gid);
    } catch {
      // Left root's: the other user's runner says it cannot read it, and nothing is lost.
    }
  }
  return fd;
}

/**
 * mkdir -p, mode 0700; the directories it made are given to the owner of the one they were made
 * in when root makes them in another user's (a state dir's ratelimit/ or outbox/). Returns the
 * first directory made, as mkdirSync does.
 */
export function mkdirOwned(dir: string, mode = 0o700): string | undefined {
  const made = mkdirSync(dir, { recursive: true, mode });
  const owner = made === undefined ? undefined : dirOwner(dirname(made));
  if (owner) {
    for (let d = dir; ; d = dirname(d)) {
      try {
        chownSync(d, owner.uid, owner.gid);
      } catch {}
      if (d === made || dirname(d) === d) break;
    }
  }
  return made;
}
