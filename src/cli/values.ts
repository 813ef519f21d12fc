/**
 * Durations and sizes as options and variables give them: apart from flags.ts, so that what uses
 * them without commander (sendmail's queue run, mailq) does not load it.
 */
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";

/** 5d, 12h, 30m, 90s, or seconds. */
export function parseDuration(v: string, what: string): number {
  const ms = durationMs(v);
  if (ms === undefined)
    throw new MailsendError("usage", `${what} must be a duration such as 90s, 30m, 12h, 5d, got ${JSON.stringify(v)}`);
  return ms;
}

/** "26214400", "25M", "25MB", "512k", "1G" (binary units, as mail servers mean them). */
export function parseSize(v: string, flag = "--max-size", min = 1024): number {
  const m = /^(\d+)\s*([kmg]?)(i?b)?$/i.exec(v.trim());
  const n = m ? Number(m[1]) * 1024 ** ["", "k", "m", "g"].indexOf(m[2]!.toLowerCase()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw new MailsendError(
      "usage",
      `${flag} ${JSON.stringify(v)}: expected a size of at least ${min} bytes, e.g. 26214400, 25M or 512k`,
    );
  }
  return n;
}
