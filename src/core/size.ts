import { MailsendError } from "./errors.js";

/**
 * A byte count as people read it, in one unit system wherever mailsend shows
 * one (the CLI's inbox, the web inbox's pages and its script): powers of
 * 1024, named B, KiB and MiB.
 */
export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A duration as people read it, rounded to one unit: 45s, 12m, 3h, 2d (`mailsend queue`, doctor). */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/**
 * The size of a message as SMTP carries it: every line ends in CRLF on the wire, so a bare LF
 * (a message piped from a Unix program) counts two bytes. What a size limit is checked against:
 * counting the LF input as it is would take a message the server then refuses as too large.
 */
export function wireSize(raw: Uint8Array): number {
  let n = raw.length;
  let i = raw.indexOf(0x0a);
  while (i >= 0) {
    if (i === 0 || raw[i - 1] !== 0x0d) n++;
    i = raw.indexOf(0x0a, i + 1);
  }
  return n;
}

/**
 * What the service takes (send's --max-size, 10 MiB), less room for the headers delivery adds
 * (X-Idempotency-Key, Date, Message-ID): a larger message would be queued only to fail later.
 */
const MAX_SIZE = "MAILSEND_MAX_SIZE";

export const DEFAULT_MAX_SIZE = 10 * 1024 * 1024 - 4096;

/** MAILSEND_MAX_SIZE: bytes, or with a K/M suffix (KiB, MiB). */
export function maxMessageSize(env: Record<string, string | undefined>): number {
  const v = env.MAILSEND_MAX_SIZE?.trim();
  if (!v) return DEFAULT_MAX_SIZE;
  const m = /^(\d+)\s*([kKmM])?i?[bB]?$/.exec(v);
  if (!m) {
    throw new MailsendError(
      "config_invalid",
      (s) => `${s.env(MAX_SIZE)} must be a size in bytes (or with K or M), got ${JSON.stringify(v.slice(0, 40))}`,
      {
        hint: (s) => `For example ${s.env(MAX_SIZE)}=5M; the default is 10M, what the service takes.`,
      },
    );
  }
  const unit = m[2]?.toLowerCase() === "m" ? 1024 * 1024 : m[2]?.toLowerCase() === "k" ? 1024 : 1;
  return Number(m[1]) * unit;
}

export function tooLarge(limit: number): MailsendError {
  return new MailsendError(
    "too_large",
    `the message is larger than the limit of ${formatSize(limit)}; nothing was sent or queued`,
    {
      hint: (s) =>
        `Send large files as a link instead; ${s.env(MAX_SIZE)} changes the limit (the service has its own).`,
    },
  );
}

/** Refuses (too_large, exit 65) a message whose size on the wire (wireSize) is over `limit`. */
export function checkWireSize(raw: Uint8Array, limit: number): void {
  if (raw.length > limit || wireSize(raw) > limit) throw tooLarge(limit);
}
