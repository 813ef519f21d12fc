import type { Faults } from "./faults.js";
import type { IdempotencyCache } from "./idempotency.js";
import type { KeyStore } from "./keys.js";
import type { SlidingLogLimiter } from "./ratelimit.js";
import type { Stats } from "./stats.js";
import type { FileMessageStore } from "./store.js";

/** The state both channels share: one key store, one limiter, one mail store. */
export interface SandboxCore {
  keys: KeyStore;
  store: FileMessageStore;
  limiter: SlidingLogLimiter;
  idempotency: IdempotencyCache;
  faults: Faults;
  stats: Stats;
  /** Largest REST body / SMTP message, in bytes. */
  maxSize: number;
  smtpUser: string;
}

/** Same rule as the client's --idempotency-key. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7E]{1,255}$/;
