/**
 * The job states in the budget's Redis (MAILSEND_RATE_LIMIT_URL), so that a job run on many
 * machines alerts once: the same decision as in the state dir, under a lock held in Redis (a
 * token with an expiry, so a run killed while holding it stops holding it within LOCK_MS).
 */
import { randomUUID } from "node:crypto";
import { MailsendError } from "../core/errors.js";
import type { RedisConfig } from "../limits/redis-config.js";
import { RedisSlotStore } from "../limits/redis-store.js";
import type { JobState } from "./alert.js";

const LOCK_MS = 15_000;
const LOCK_WAIT_MS = 10_000;
/** A job not run for this long is forgotten (its next run is "unknown"). */
const KEEP_MS = 90 * 86_400_000;

/** Takes the lock and reads the state: {1, state or false}, or {0} while another holds it. */
const LOCK = `if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('GET', KEYS[1])}
end
return {0}`;

/** Writes the state and gives the lock back, if it is still this run's. */
const SAVE = `if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[2], 1)
return 1`;

/** Gives the lock back without writing (the update failed). */
const UNLOCK = `if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('PEXPIRE', KEYS[2], 1) end
return 1`;

function parse(text: unknown): JobState | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const s = JSON.parse(text) as JobState;
    return s && s.v === 1 && (s.status === "ok" || s.status === "failed") ? s : undefined;
  } catch {
    return undefined;
  }
}

export async function withRedisJobState<T>(
  config: RedisConfig,
  hash: string,
  update: (prev: JobState | undefined) => Promise<{ next: JobState; result: T }>,
): Promise<T> {
  const store = new RedisSlotStore(config, hash);
  const keys = [`mailsend:run:${hash}`, `mailsend:run:${hash}:lock`];
  const token = randomUUID();
  try {
    let prev: JobState | undefined;
    for (let waited = 0; ; waited += 25) {
      const r = (await store.evalKeys("check", LOCK, keys, [token, LOCK_MS])) as [number, unknown?];
      if (r[0] === 1) {
        prev = parse(r[1]);
        break;
      }
      if (waited >= LOCK_WAIT_MS)
        throw new MailsendError("temporary_failure", `the job's lock in Redis (${keys[1]}) stays held`, {
          hint: "Another mailsend run of this job is deciding its mail; the lock expires by itself within 15 s.",
        });
      await new Promise((r) => setTimeout(r, 25));
    }
    let out: { next: JobState; result: T };
    try {
      out = await update(prev);
    } catch (e) {
      await store.evalKeys("record", UNLOCK, keys, [token]).catch(() => {});
      throw e;
    }
    await store.evalKeys("record", SAVE, keys, [token, JSON.stringify(out.next), KEEP_MS]);
    return out.result;
  } finally {
    await store.close();
  }
}
