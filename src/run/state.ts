/**
 * Each job's alert state, in the state dir beside the budget's (<state>/run/<hash of the id>.json),
 * read, decided on and written under the job's lock: two runs of one job ending together see each
 * other's mail, so they do not both send one.
 */
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { localFileError, MailsendError } from "../core/errors.js";
import { processHolds, processStartTime } from "../core/pid.js";
import { sha256Hex } from "../core/sha256.js";
import { stateDir, type Env } from "../limits/budget.js";
import { ensurePrivateDir } from "../limits/private-dir.js";
import { writeFileAtomic } from "../sandbox/fsutil.js";
import type { JobState } from "./alert.js";

export function jobStatePath(env: Env, id: string): string {
  return join(stateDir(env), "run", `${sha256Hex(id).slice(0, 32)}.json`);
}

/** The job's state, or undefined when there is none (first run) or it cannot be read as one (then "unknown"). */
function readState(path: string): JobState | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw localFileError(e, path, "read", "job state");
  }
  try {
    const s = JSON.parse(text) as JobState;
    return s && s.v === 1 && (s.status === "ok" || s.status === "failed") ? s : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs `update` on the job's state under its lock and writes what it returns. The lock is held
 * for as long as a decision and the queueing of one mail take, well under a second.
 */
export async function withJobState<T>(env: Env, id: string, update: (prev: JobState | undefined) => Promise<{ next: JobState; result: T }>): Promise<T> {
  const path = jobStatePath(env, id);
  ensurePrivateDir(join(path, ".."));
  const release = await lockJob(`${path}.lock`);
  try {
    const { next, result } = await update(readState(path));
    try {
      writeFileAtomic(path, `${JSON.stringify(next)}\n`);
    } catch (e) {
      throw localFileError(e, path, "write", "job state");
    }
    return result;
  } finally {
    release();
  }
}

const LOCK_WAIT_MS = 10_000;

/**
 * The job's lock: a file made exclusively, holding "<pid> <start time>"; one whose holder no
 * longer runs is taken over. Waits (bounded) for a live holder.
 */
async function lockJob(path: string): Promise<() => void> {
  const line = `${process.pid} ${processStartTime() ?? ""}`.trim();
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let attempt = 0; Date.now() < deadline && attempt < 1000; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      try {
        writeSync(fd, `${line}\n`);
      } finally {
        closeSync(fd);
      }
      return () => {
        try {
          unlinkSync(path);
        } catch {}
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw localFileError(e, path, "write", "job lock");
    }
    if (holderGone(path)) continue;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new MailsendError("temporary_failure", `the job lock ${path} stays held`, { hint: `Another mailsend run of this job is deciding its mail; if none runs, remove ${path}.` });
}

function mtimeOf(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/** Removes a lock whose holder does not run (killed with -9); true when it did. */
function holderGone(path: string): boolean {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return true;
  }
  const m = /^(\d+)(?: (\d+))?\n/.exec(text);
  // No content: being written, unless it is older than any write takes (a crash between create and write).
  if (!m ? Math.abs(Date.now() - mtimeOf(path)) < 5_000 : processHolds(Number(m[1]), m[2])) return false;
  try {
    if (readFileSync(path, "utf8") === text) unlinkSync(path);
  } catch {}
  return true;
}
