/**
 * Which failures are retried, in one table. A retry is made only when the
 * message surely did not reach the service, or when the service refused it
 * for a passing reason, or when it may have arrived but carries an
 * idempotency key the service de-duplicates on.
 */
import type { ErrorCode, MailsendError } from "../core/errors.js";

export type RetryVerdict = "retry" | "retry-if-idempotent" | "never";

const POLICY: Record<ErrorCode, RetryVerdict> = {
  // Nothing reached the service.
  connection_failed: "retry",
  timeout: "retry",
  // The service said "not now".
  rate_limited: "retry",
  temporary_failure: "retry",
  // 5xx: 502/503/504 mean the request did not get through; other 5xx may have been half-done.
  service_error: "retry-if-idempotent",
  outcome_unknown: "retry-if-idempotent",
  protocol_error: "never",
  // Resending the same thing gets the same answer.
  usage: "never",
  invalid_address: "never",
  invalid_header: "never",
  invalid_message: "never",
  invalid_json: "never",
  invalid_eml: "never",
  rejected: "never",
  too_large: "never",
  // The message went to the other recipients: a resend would reach them twice.
  recipients_refused: "never",
  file_not_found: "never",
  file_unreadable: "never",
  empty_input: "never",
  internal: "never",
  // A fault of this machine: a person must free space or fix a mode first.
  local_write_failed: "never",
  local_io_failed: "never",
  auth_failed: "never",
  key_revoked: "never",
  config_missing: "never",
  config_invalid: "never",
  tls_mismatch: "never",
  tls_untrusted: "never",
};

export function retryVerdict(code: ErrorCode): RetryVerdict {
  return POLICY[code];
}

export function shouldRetry(err: MailsendError, hasIdempotencyKey: boolean): boolean {
  const v = POLICY[err.code];
  if (v === "retry") return true;
  if (v === "retry-if-idempotent") {
    // Without an HTTP status: an SMTP server's permanent (5xx) reply, which a retry gets again.
    if (err.code === "service_error" && err.status === undefined) return false;
    // 502/503/504 never reached the application; otherwise only an idempotency key makes it safe.
    if (err.code === "service_error" && (err.status === 502 || err.status === 503 || err.status === 504)) return true;
    return hasIdempotencyKey;
  }
  return false;
}

export interface BackoffOptions {
  baseMs?: number;
  capMs?: number;
  random?: () => number;
}

/**
 * How long to wait before attempt `attempt` (1 = the first retry): the
 * server's Retry-After when it gave one, else exponential backoff with full
 * jitter, so that many clients refused at once do not come back at once.
 */
export function backoffMs(attempt: number, err: MailsendError, opts: BackoffOptions = {}): number {
  if (err.retryAfter !== undefined) return Math.max(0, err.retryAfter * 1000);
  const base = opts.baseMs ?? 500;
  const cap = opts.capMs ?? 30_000;
  const random = opts.random ?? Math.random;
  return Math.floor(random() * Math.min(cap, base * 2 ** (attempt - 1)));
}
