/** Counters per channel, for GET /_sandbox/stats (tests assert on them). */
export interface ChannelStats {
  /** Messages stored (each counted once). */
  accepted: number;
  /** Idempotent retries answered with the first answer, nothing stored. */
  duplicates: number;
  /** Requests refused for any reason, rate limit included. */
  refused: number;
  /** Of the refused: over the rate limit (429 / SMTP 451). */
  rateLimited: number;
  /** Of the refused: authentication failures (401/403 / SMTP 535). */
  authFailed: number;
  /** Injected failures and dropped connections. */
  faults: number;
}

export type Channel = "rest" | "smtp";

function empty(): ChannelStats {
  return { accepted: 0, duplicates: 0, refused: 0, rateLimited: 0, authFailed: 0, faults: 0 };
}

export class Stats {
  readonly rest = empty();
  readonly smtp = empty();

  count(channel: Channel, what: keyof ChannelStats): void {
    this[channel][what]++;
  }

  toJSON(): { rest: ChannelStats; smtp: ChannelStats } {
    return { rest: { ...this.rest }, smtp: { ...this.smtp } };
  }
}
