/**
 * Which budget a send uses: the key's hash names it; the file store serves
 * the processes of one machine, Redis (MAILSEND_RATE_LIMIT_URL) many.
 */
import { join } from "node:path";
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const createHash = (algorithm: string) => process.getBuiltinModule("node:crypto").createHash(algorithm);
import { FileSlotStore } from "./file-store.js";
import { redisConfigFrom } from "./redis-config.js";
import { RedisSlotStore } from "./redis-store.js";
import type { Limits } from "./sliding-log.js";
import type { SlotStore } from "./store.js";
import { stateDir } from "../settings/state-dir.js";
import type { Env } from "../core/env.js";

/**
 * The key is never stored: state is named by a hash of it. REST and SMTP
 * share the name, as they share the service's limit.
 */
export function keyHash(apiKey: string): string {
  return createHash("sha256").update(`mailsend-ratelimit\0${apiKey}`).digest("hex").slice(0, 32);
}

export interface StoreSettings {
  /** --ca-file: trusted beside Node's own CAs for a rediss:// budget too. */
  caFile?: string;
  /** --verbose: how the store was reached (never a password). */
  trace?: (line: string) => void;
}

/**
 * The key's budget: in Redis when MAILSEND_RATE_LIMIT_URL is set (its URL
 * is checked now, the client loaded and connected on the first operation),
 * else in a file of the state dir.
 */
export function openSlotStore(
  apiKey: string,
  limits: Limits,
  env: Env,
  settings: StoreSettings = {},
): SlotStore | undefined {
  if (limits.limit === 0) return undefined;
  const hash = keyHash(apiKey);
  const redis = redisConfigFrom(env, settings);
  if (redis) return new RedisSlotStore(redis, hash, settings.trace ? { trace: settings.trace } : {});
  const state = stateDir(env);
  return new FileSlotStore({ dir: join(state, "ratelimit"), within: state, keyHash: hash });
}
