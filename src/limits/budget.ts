/**
 * Which budget a send uses: the key's hash names it; the file store serves
 * the processes of one machine, Redis (MAILSEND_RATE_LIMIT_URL) many.
 */
import { join } from "node:path";
import { DEFAULTS } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { sha256Hex } from "../core/sha256.js";
import { FileSlotStore } from "./file-store.js";
import { redisConfigFrom } from "./redis-config.js";
import { RedisSlotStore } from "./redis-store.js";
import type { Limits } from "./sliding-log.js";
import type { SlotStore } from "./store.js";
import { stateDir } from "../settings/state-dir.js";
import type { Env } from "../core/env.js";

export interface BudgetFlags {
  rateLimit?: number;
}

/**
 * The key is never stored: state is named by a hash of it. REST and SMTP
 * share the name, as they share the service's limit.
 */
export function keyHash(apiKey: string): string {
  // sha256Hex, not node:crypto: the same digest, without loading crypto for one short string.
  return sha256Hex(`mailsend-ratelimit\0${apiKey}`).slice(0, 32);
}

function whole(v: string | number | undefined, what: string, min: number): number | undefined {
  if (v === undefined || v === "") return undefined;
  const n = typeof v === "number" ? v : /^\d+$/.test(v.trim()) ? Number(v) : Number.NaN;
  if (!Number.isInteger(n) || n < min) {
    throw new MailsendError("config_invalid", `${what} must be a whole number of at least ${min}, got ${JSON.stringify(v)}`);
  }
  return n;
}

/** Requests per window; 0 switches the local budget off. The window is the service's minute unless a sandbox runs another. */
export function resolveLimits(flags: BudgetFlags, env: Env): Limits {
  const limit = whole(flags.rateLimit ?? env.MAILSEND_RATE_LIMIT, "--rate-limit / MAILSEND_RATE_LIMIT", 0) ?? DEFAULTS.rateLimit;
  const windowSeconds = whole(env.MAILSEND_RATE_WINDOW, "MAILSEND_RATE_WINDOW", 1) ?? 60;
  return { limit, windowMs: windowSeconds * 1000 };
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
export function openSlotStore(apiKey: string, limits: Limits, env: Env, settings: StoreSettings = {}): SlotStore | undefined {
  if (limits.limit === 0) return undefined;
  const hash = keyHash(apiKey);
  const redis = redisConfigFrom(env, settings);
  if (redis) return new RedisSlotStore(redis, hash, settings.trace ? { trace: settings.trace } : {});
  return new FileSlotStore({ dir: join(stateDir(env), "ratelimit"), keyHash: hash });
}
