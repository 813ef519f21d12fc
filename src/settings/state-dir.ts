/**
 * Where mailsend keeps its state on this machine (the budget, the outbox, batch journals).
 */
import { dirname, join } from "node:path";
import { expandHome, homeDir } from "../core/home.js";
import type { Env } from "../core/env.js";

/**
 * Where mailsend keeps its state (the budget, the outbox, batch journals): MAILSEND_STATE_DIR, else
 * the platform's place under the home. On Linux and other Unixes, a user whose home it cannot
 * write (a daemon's: PHP-FPM runs as www-data, whose home /var/www is root's), or whose home does
 * not exist, gets a private directory of its own in /var/tmp instead (fallbackStateDir), so its
 * mail is not refused.
 */
export function stateDir(
  env: Env,
  platform = process.platform,
  fallback: () => string | undefined = fallbackStateDir,
): string {
  if (env.MAILSEND_STATE_DIR) return expandHome(env.MAILSEND_STATE_DIR, env);
  const preferred = homeStateDir(env, platform);
  if (platform === "win32" || platform !== process.platform) return preferred;
  // A home that does not exist (nobody's /nonexistent) is not made: that user has no home to write.
  const underHome = platform === "darwin" || !env.XDG_STATE_HOME;
  if ((!underHome || process.getBuiltinModule("node:fs").existsSync(homeDir(env))) && writableOrMakeable(preferred))
    return preferred;
  return fallback() ?? preferred;
}

/** The platform's state dir under the home. */
function homeStateDir(env: Env, platform: NodeJS.Platform): string {
  const home = homeDir(env);
  if (platform === "win32") return join(env.LOCALAPPDATA || join(home, "AppData", "Local"), "mailsend", "state");
  if (platform === "darwin") return join(home, "Library", "Application Support", "mailsend", "state");
  return join(env.XDG_STATE_HOME || join(home, ".local", "state"), "mailsend");
}

/**
 * The other default state dir (the home's while the /var/tmp one is in use, or the reverse) when
 * it exists: mail queued there while the home could (not) be written waits in it, where no runner
 * of this user looks. Undefined with MAILSEND_STATE_DIR, or when there is no other.
 */
export function otherStateDir(env: Env, root = FALLBACK_STATE_ROOT): string | undefined {
  const uid = process.getuid?.();
  if (env.MAILSEND_STATE_DIR || uid === undefined) return undefined;
  const fallback = join(root, `mailsend-${uid}`);
  const other = stateDir(env) === fallback ? homeStateDir(env, process.platform) : fallback;
  // Only a dir this user made for itself: one someone else made in /var/tmp is not our mail.
  return ownPrivateDir(other, uid) ? other : undefined;
}

const writable = new Map<string, boolean>();

/** Whether this user can write `dir`, or make it (the nearest directory above it that exists is writable). */
function writableOrMakeable(dir: string): boolean {
  let known = writable.get(dir);
  if (known !== undefined) return known;
  const fs = process.getBuiltinModule("node:fs");
  let at = dir;
  for (let i = 0; i < 64 && !fs.existsSync(at); i++) at = dirname(at);
  try {
    fs.accessSync(at, fs.constants.W_OK | fs.constants.X_OK);
    known = true;
  } catch {
    known = false;
  }
  writable.set(dir, known);
  return known;
}

/**
 * Whether `dir` is a mount that does not outlive its service or the boot (/proc/self/mountinfo): a
 * subdirectory of another file system mounted there (its root is not "/"), as systemd's PrivateTmp
 * mounts a service's own /tmp and /var/tmp, or a tmpfs (TemporaryFileSystem=, a DynamicUser's). A
 * /var/tmp of its own disk partition is neither. False where there is no mountinfo (not Linux).
 */
export function ephemeralMount(dir: string, mountinfo?: string): boolean {
  let text = mountinfo;
  if (text === undefined) {
    try {
      text = process.getBuiltinModule("node:fs").readFileSync("/proc/self/mountinfo", "utf8");
    } catch {
      return false;
    }
  }
  return text.split("\n").some((line) => {
    const f = line.split(" ");
    if (f[4] !== dir) return false;
    const fsType = line.split(" - ")[1]?.split(" ")[0];
    return f[3] !== "/" || fsType === "tmpfs";
  });
}

/** The root of the state dirs of users who cannot write their home (/var/tmp: kept across reboots, unlike /tmp). */
export const FALLBACK_STATE_ROOT = "/var/tmp";

/**
 * `/var/tmp/mailsend-<uid>`: made 0700 by this user, used only when it is a real directory (not a
 * link) of this user that no one else can enter, so another user cannot have made it first to read
 * the mail. Undefined when that cannot be had (the caller then reports the home's dir, as before).
 */
export function fallbackStateDir(root = FALLBACK_STATE_ROOT): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const fs = process.getBuiltinModule("node:fs");
  // systemd's PrivateTmp (PHP-FPM's unit has it) mounts a /var/tmp of the service's own, removed
  // when the service stops, and a tmpfs there is gone at the next boot: mail queued there would go
  // with it. Not used then.
  if (ephemeralMount(root)) return undefined;
  const dir = join(root, `mailsend-${uid}`);
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return undefined;
  }
  return ownPrivateDir(dir, uid) ? dir : undefined;
}

/** A real directory (not a link) of this user that no one else can enter. */
function ownPrivateDir(dir: string, uid: number): boolean {
  try {
    const st = process.getBuiltinModule("node:fs").lstatSync(dir);
    return st.isDirectory() && st.uid === uid && (st.mode & 0o077) === 0;
  } catch {
    return false;
  }
}
