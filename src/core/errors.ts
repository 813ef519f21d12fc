/**
 * Every failure mailsend reports is a MailsendError with a stable `code`.
 * The exit status is derived from the code through EXIT_CLASS, in this one
 * table, so that the CLI, the batch runner and the library agree.
 */

export const EXIT = {
  ok: 0,
  usage: 64,
  dataerr: 65,
  noinput: 66,
  unavailable: 69,
  software: 70,
  tempfail: 75,
  protocol: 76,
  noperm: 77,
  config: 78,
} as const;

export type ExitClass = keyof typeof EXIT;

/** What each exit status tells a script; also printed in the README. */
export const EXIT_MEANING: Record<ExitClass, string> = {
  ok: "sent",
  usage: "usage: unknown flag, missing --to/--from/--subject/body, cc/bcc over REST",
  dataerr: "bad message data: invalid address, header with CR/LF, bad JSON/EML; or the server refused the message (400, 413, SMTP 550/552/554)",
  noinput: "an input is missing or unreadable: an attachment or body file, a sandbox data dir, a stored message",
  unavailable: "service unavailable: connection refused, DNS failure, 5xx",
  software: "internal error (a bug in mailsend)",
  tempfail: "temporary failure, safe to retry later: rate limited (429), SMTP 4xx, timeout before sending",
  protocol: "unexpected answer, or outcome unknown: the connection broke after the message was handed over; check before resending",
  noperm: "the key was refused: wrong (401, SMTP 535), revoked or expired (403)",
  config: "configuration: no API key, no base URL/SMTP host, port/TLS mismatch, untrusted certificate",
};

/**
 * When several things failed (a batch), the exit status is the first of
 * these that occurred: what needs a person's attention before what only
 * needs another try.
 */
const SEVERITY: readonly ExitClass[] = ["software", "config", "noperm", "protocol", "unavailable", "noinput", "dataerr", "usage", "tempfail"];

export function worstExitClass(classes: Iterable<ExitClass>): ExitClass {
  const seen = new Set(classes);
  return SEVERITY.find((c) => seen.has(c)) ?? "ok";
}

const EXIT_CLASS = {
  usage: "usage",
  invalid_address: "dataerr",
  invalid_header: "dataerr",
  invalid_message: "dataerr",
  invalid_json: "dataerr",
  invalid_eml: "dataerr",
  rejected: "dataerr",
  too_large: "dataerr",
  file_not_found: "noinput",
  file_unreadable: "noinput",
  connection_failed: "unavailable",
  service_error: "unavailable",
  internal: "software",
  rate_limited: "tempfail",
  temporary_failure: "tempfail",
  timeout: "tempfail",
  protocol_error: "protocol",
  outcome_unknown: "protocol",
  auth_failed: "noperm",
  key_revoked: "noperm",
  config_missing: "config",
  config_invalid: "config",
  tls_mismatch: "config",
  tls_untrusted: "config",
} as const; // (not `satisfies`: the published declarations, emitted file by file, would lose the codes; exitClass's return type checks the values)

export type ErrorCode = keyof typeof EXIT_CLASS;

export interface ErrorDetails {
  /** What the user can do next; shown on its own line in human mode. */
  hint?: string;
  cause?: unknown;
  /** HTTP status or SMTP reply code of the server answer behind the error. */
  status?: number;
  /** Seconds the server asked us to wait (429, SMTP 421/451). */
  retryAfter?: number;
  /**
   * Whether the message may have reached the service. Only errors raised
   * before any byte of the message was handed over are `false`.
   */
  mayHaveBeenSent?: boolean;
}

export class MailsendError extends Error {
  override readonly name = "MailsendError";
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  readonly status: number | undefined;
  readonly retryAfter: number | undefined;
  readonly mayHaveBeenSent: boolean;
  /** How many times the message was tried before this error was final. */
  attempts?: number;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.hint = details.hint;
    this.status = details.status;
    this.retryAfter = details.retryAfter;
    this.mayHaveBeenSent = details.mayHaveBeenSent ?? false;
  }

  get exitClass(): ExitClass {
    return EXIT_CLASS[this.code];
  }

  get exitCode(): number {
    return EXIT[this.exitClass];
  }

  toJSON(): { code: ErrorCode; message: string; exit: number; hint?: string; status?: number; attempts?: number } {
    return {
      code: this.code,
      message: this.message,
      exit: this.exitCode,
      ...(this.hint ? { hint: this.hint } : {}),
      ...(this.status !== undefined ? { status: this.status } : {}),
      ...(this.attempts !== undefined ? { attempts: this.attempts } : {}),
    };
  }
}

export function isMailsendError(e: unknown): e is MailsendError {
  return e instanceof MailsendError;
}

/** Anything that is not a MailsendError is a bug of ours: exit 70. */
export function toMailsendError(e: unknown): MailsendError {
  if (isMailsendError(e)) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new MailsendError("internal", `internal error: ${message}`, {
    cause: e,
    hint: "This is a bug in mailsend. Run again with --verbose and report the output (it never contains your key).",
  });
}

export function exitCodeFor(code: ErrorCode): number {
  return EXIT[EXIT_CLASS[code]];
}
