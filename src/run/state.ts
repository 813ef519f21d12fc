/**
 * Each job's alert state, in the state dir beside the budget's (<state>/run/<hash of the id>.json),
 * read, decided on and written under the job's lock: two runs of one job ending together see each
 * other's mail, so they do not both send one.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../core/atomic.js";
import { localFileError, MailsendError } from "../core/errors.js";
import { tryLock } from "../core/lock.js";
import type { Env } from "../core/env.js";
import { stateDir } from "../settings/state-dir.js";
import { ensurePrivateDir } from "../limits/private-dir.js";
import { redisConfigFrom } from "../limits/redis-config.js";
import type { JobState } from "./alert.js";

/** A job's id as its state is named: the id itself may be a long command line with any characters. */
function jobHash(id: string): string {
  return createHash("sha256").update(`mailsend-run\0${id}`).digest("hex").slice(0, 32);
}

export function jobStatePath(env: Env, id: string): string {
  return join(stateDir(env), "run", `${jobHash(id)}.json`);
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
export async function withJobState<T>(
  env: Env,
  id: string,
  update: (prev: JobState | undefined) => Promise<{ next: JobState; result: T }>,
): Promise<T> {
  // Where the budget is shared (Redis), so are the jobs' states: a job run on many machines alerts once.
  const redis = redisConfigFrom(env, env.MAILSEND_CA_FILE ? { caFile: env.MAILSEND_CA_FILE } : {});
  if (redis) {
    const { withRedisJobState } = await import("./state-redis.js");
    return withRedisJobState(redis, jobHash(id), update);
  }
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

/** The job's lock (core/lock.ts: its holder's pid, taken over when that process is gone); waits, bounded, for a live holder. */
async function lockJob(path: string): Promise<() => void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let attempt = 0; Date.now() < deadline && attempt < 10_000; attempt++) {
    const a = tryLock(path, { what: "job lock" });
    if ("release" in a) return a.release;
    if ("retry" in a) continue;
    await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
  }
  throw new MailsendError("temporary_failure", `the job lock ${path} stays held`, {
    hint: `Another mailsend run of this job is deciding its mail; if none runs, remove ${path}.`,
  });
}
