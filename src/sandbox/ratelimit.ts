/**
 * The service's limit, read strictly: no more than `limit` requests
 * in ANY rolling window (a sliding log), per key, shared by REST and SMTP.
 * A token bucket would allow a burst of `limit` right after a full window;
 * the sliding log never does, which is the strictest reading of the limit.
 */

export interface RateDecision {
  ok: boolean;
  limit: number;
  /** Requests left in the current window after this one. */
  remaining: number;
  /** Seconds until one more request is allowed (0 when remaining > 0), for Retry-After. */
  retryAfter: number;
  /** Seconds until the oldest counted request leaves the window, for RateLimit-Reset. */
  reset: number;
}

class Log {
  times: number[] = [];
  head = 0;

  prune(cutoff: number): void {
    while (this.head < this.times.length && this.times[this.head]! <= cutoff) this.head++;
    // Compact now and then so the array does not grow for ever.
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
  }

  get count(): number {
    return this.times.length - this.head;
  }

  get oldest(): number | undefined {
    return this.times[this.head];
  }
}

export class SlidingLogLimiter {
  readonly #logs = new Map<string, Log>();
  limit: number;
  readonly windowMs: number;

  constructor(limit: number, windowMs = 60_000) {
    this.limit = limit;
    this.windowMs = windowMs;
  }

  #log(key: string, now: number): Log {
    let log = this.#logs.get(key);
    if (!log) {
      log = new Log();
      this.#logs.set(key, log);
    }
    log.prune(now - this.windowMs);
    return log;
  }

  #decision(log: Log, ok: boolean, now: number): RateDecision {
    const remaining = Math.max(0, this.limit - log.count);
    const untilOldestLeaves = log.oldest === undefined ? 0 : Math.max(0, log.oldest + this.windowMs - now);
    const reset = Math.ceil(untilOldestLeaves / 1000);
    return { ok, limit: this.limit, remaining, retryAfter: remaining > 0 ? 0 : Math.max(1, reset), reset };
  }

  /** Would one more request pass? Counts nothing. */
  peek(key: string, now = Date.now()): RateDecision {
    const log = this.#log(key, now);
    return this.#decision(log, log.count < this.limit, now);
  }

  /** Count one request if the window has room; refused ones are not counted. */
  take(key: string, now = Date.now()): RateDecision {
    const log = this.#log(key, now);
    if (log.count >= this.limit) return this.#decision(log, false, now);
    log.times.push(now);
    return this.#decision(log, true, now);
  }
}
