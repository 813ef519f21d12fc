/**
 * Directories mailsend keeps mail and state in must be its user's alone, as OpenSSH's StrictModes
 * and Postfix's queue require: otherwise another local user could read what is written there, or
 * put a message of their own in the queue for this user's key to send. Each directory of a chain
 * (the state dir, the outbox, its queue/, tmp/ and failed/) is owned by this user or root (or,
 * for root working in a daemon user's state dir, by that user: the owner of the chain's first
 * directory), is writable by no one else, and, where the chain says so, is not a symbolic link.
 * The system's config file, which every user without one of their own reads, is held to the same
 * rule with root as its only owner (checkRootOnly); both say what is wrong in the same words.
 */
import type { Stats } from "node:fs";
import { MailsendError } from "./errors.js";

// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { lstatSync, statSync } = process.getBuiltinModule("node:fs");

export interface ChainDir {
  path: string;
  /** What it is, for the message ("outbox directory"). */
  what: string;
  /** A link in its place is refused (queue/, tmp/, failed/: a link there would lead root's writes elsewhere). */
  noLink?: boolean;
}

export interface ChainVerdict {
  /** Every directory there is owned by this user or root: nobody else can change them later. */
  ownOnly: boolean;
}

const quote = (p: string) => `'${p.replace(/'/g, "'\\''")}'`;
/** A file mode as chmod takes it ("0755"). */
export const octal = (m: number) => (m & 0o7777).toString(8).padStart(4, "0");

/** Why users other than the owner of `st` could change `path`, and the chmod that stops them. */
function writableByOthers(path: string, st: Stats): { why: string; fix: string } | undefined {
  if (!(st.mode & 0o022)) return undefined;
  return {
    why: `can be written by ${st.mode & 0o002 ? "any user" : "its group"} (mode ${octal(st.mode)}, owner uid ${st.uid})`,
    fix: `chmod go-w ${quote(path)}`,
  };
}

function refuse(d: ChainDir, why: string, fix: string): MailsendError {
  return new MailsendError("config_invalid", `the ${d.what} ${d.path} ${why}: mailsend keeps no mail or state there`, {
    hint: `Another local user could read or change what is written there. ${fix}`,
    local: true,
  });
}

/**
 * Checks the directories of `chain` that exist (a missing one ends it: it is made 0700 by this
 * user when needed). Throws a config error (78) naming the path, its owner and mode, and the
 * chmod/chown that fixes it.
 */
export function checkDirChain(chain: readonly ChainDir[]): ChainVerdict {
  const me = process.geteuid?.();
  if (me === undefined) return { ownOnly: true };
  let daemon: number | undefined;
  let ownOnly = true;
  for (const d of chain) {
    let st: Stats;
    try {
      st = lstatSync(d.path);
      if (st.isSymbolicLink()) {
        if (d.noLink)
          throw refuse(
            d,
            "is a symbolic link",
            `Replace it with a directory of its own: rm ${quote(d.path)} && mkdir -m 700 ${quote(d.path)}`,
          );
        st = statSync(d.path);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") break;
      if (e instanceof MailsendError) throw e;
      // One that cannot be looked at is reported by whatever then reads or writes it.
      break;
    }
    if (!st.isDirectory()) break;
    // Root in a daemon user's state dir: that user's directories are as good as root's own.
    if (me === 0 && daemon === undefined) daemon = st.uid;
    const mine = st.uid === me || st.uid === 0;
    if (!mine && st.uid !== daemon) {
      throw refuse(
        d,
        `is owned by uid ${st.uid}, not this user (uid ${me})`,
        `Give it to this user: chown ${me} ${quote(d.path)} && chmod 700 ${quote(d.path)}`,
      );
    }
    const writable = writableByOthers(d.path, st);
    if (writable) throw refuse(d, writable.why, `Take that away: ${writable.fix} (chmod 700 keeps it private too)`);
    if (!mine) ownOnly = false;
  }
  return { ownOnly };
}

export interface RootEntry {
  path: string;
  /** What it is, for the message ("system config file"). */
  what: string;
  /** Its status: of the opened file (fstat) for the file read, so what is judged is what is read. */
  st: Stats;
}

/**
 * A file every user reads (the system's config file) is trusted only when root alone can change
 * it: each of `entries` (the file, its directory, a symbolic link in its place) owned by root and
 * writable by no group or other user. Otherwise a local user could choose every other user's
 * server, sender or key file. Throws a config error (78) naming the path, its owner and mode, and
 * the chown/chmod that fixes it.
 */
export function checkRootOnly(entries: readonly RootEntry[]): void {
  for (const { path, what, st } of entries) {
    const owner = st.uid === 0 ? undefined : `is owned by uid ${st.uid}, not root (mode ${octal(st.mode)})`;
    const writable = st.isSymbolicLink() ? undefined : writableByOthers(path, st);
    if (!owner && !writable) continue;
    const fix = owner
      ? `Give it to root: chown${st.isSymbolicLink() ? " -h" : ""} root: ${quote(path)}${writable ? ` && ${writable.fix}` : ""}`
      : `Take that away: ${writable!.fix}`;
    throw new MailsendError(
      "config_invalid",
      `the ${what} ${path} ${owner ?? writable!.why}: mailsend does not read it`,
      {
        hint: `Every user without a config file of their own reads it, so only root may be able to change it. ${fix}`,
        local: true,
      },
    );
  }
}
