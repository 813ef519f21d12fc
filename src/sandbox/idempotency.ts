/**
 * Idempotency-Key (REST) and X-Idempotency-Key (SMTP): within 24 h, a second
 * request with the same key under the same API key gets the first answer
 * and stores nothing. Only successes are remembered: a refused request had
 * no effect, so its retry is a new attempt. Requests with the same key that
 * arrive while the first is in flight wait for it instead of racing it.
 */

export interface Replay {
  id: string;
  messageId: string;
  /** sha256 of the REST body; a different body under the same key is an error. */
  requestHash?: string;
  at: number;
}

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

export class IdempotencyCache {
  readonly #entries = new Map<string, Replay>();
  readonly #locks = new Map<string, Promise<void>>();
  readonly ttlMs: number;

  constructor(ttlMs = IDEMPOTENCY_TTL_MS) {
    this.ttlMs = ttlMs;
  }

  static scope(keyId: string, key: string): string {
    return `${keyId}\u0000${key}`;
  }

  get(scope: string, now = Date.now()): Replay | undefined {
    const e = this.#entries.get(scope);
    if (e && now - e.at >= this.ttlMs) {
      this.#entries.delete(scope);
      return undefined;
    }
    return e;
  }

  set(scope: string, replay: Replay): void {
    this.#entries.delete(scope);
    this.#entries.set(scope, replay);
    this.#sweep(Date.now());
  }

  /** Entries are kept in insertion (= time) order: drop expired ones from the front. */
  #sweep(now: number): void {
    for (const [k, v] of this.#entries) {
      if (now - v.at < this.ttlMs) break;
      this.#entries.delete(k);
    }
  }

  /** Serialize work on one scope; returns the release function. */
  async lock(scope: string): Promise<() => void> {
    const prev = this.#locks.get(scope);
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = (prev ?? Promise.resolve()).then(() => mine);
    this.#locks.set(scope, tail);
    await prev;
    return () => {
      release();
      if (this.#locks.get(scope) === tail) this.#locks.delete(scope);
    };
  }
}
