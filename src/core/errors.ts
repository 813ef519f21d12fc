/**
 * Every failure mailsend reports is a MailsendError with a stable `code`.
 * The exit status is derived from the code through EXIT_CLASS, in this one
 * table, so that the CLI, the batch runner and the library agree.
 */
import { SAY, type Front, type Say, type Words } from "./setting-names.js";

/** A message or hint: plain, or words that name settings (each front end says them its own way). */
export type Text = string | Words;

/** The text as `front` says it. */
export function said(text: Text, front: Front = "cli"): string {
  return typeof text === "string" ? text : text(SAY[front]);
}

export const EXIT = {
  ok: 0,
  usage: 64,
  dataerr: 65,
  noinput: 66,
  nouser: 67,
  unavailable: 69,
  software: 70,
  cantcreat: 73,
  ioerr: 74,
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
  dataerr:
    "bad message data: invalid address, header with CR/LF, bad JSON/EML; or the server refused the message (400, 413, SMTP 550/552/554)",
  nouser:
    "some recipients were refused (SMTP RCPT), the message went to the others: the output names the refused ones; resend only to those, after checking them",
  noinput:
    "an input is missing, unreadable or empty: an attachment or body file, a body piped on stdin that was empty, a sandbox data dir, a stored message",
  unavailable: "service unavailable: connection refused, DNS failure, 5xx",
  software: "internal error (a bug in mailsend)",
  cantcreat:
    "a local file cannot be created or written: the state dir, outbox, journal or results file (disk full, read-only, permission)",
  ioerr:
    "a local file could not be read or synced (an I/O error of this machine), or a batch journal is damaged (see --fresh)",
  tempfail: "temporary failure, safe to retry later: rate limited (429), SMTP 4xx, timeout before sending",
  protocol:
    "unexpected answer, or outcome unknown: the connection broke after the message was handed over; check before resending",
  noperm: "the key was refused: wrong (401, SMTP 535), revoked or expired (403); Redis or proxy credentials refused",
  config: "configuration: no API key, no base URL/SMTP host, port/TLS mismatch, untrusted certificate",
};

/**
 * When several things failed (a batch), the exit status is the first of
 * these that occurred: what needs a person's attention before what only
 * needs another try.
 */
const SEVERITY: readonly ExitClass[] = [
  "software",
  "config",
  "noperm",
  "protocol",
  "cantcreat",
  "ioerr",
  "unavailable",
  "noinput",
  "dataerr",
  "nouser",
  "usage",
  "tempfail",
];

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
  recipients_refused: "nouser",
  file_not_found: "noinput",
  file_unreadable: "noinput",
  empty_input: "noinput",
  connection_failed: "unavailable",
  service_error: "unavailable",
  internal: "software",
  local_write_failed: "cantcreat",
  local_io_failed: "ioerr",
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
  hint?: Text;
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
  /** recipients_refused: the message went to `accepted`; the server refused `refused`. */
  partial?: PartialDelivery;
  /**
   * The refusal came from this machine's own setup (the shared budget's Redis, a proxy), not
   * from the service: the message is not at fault, so an outbox keeps it until that is fixed.
   */
  local?: boolean;
  /**
   * The setting the error is about, by its name in src/core/setting-names.ts (baseUrl, smtpPort, ...):
   * each front end says that name in its own words (a flag, a variable, an option).
   */
  setting?: string;
}

/** A message the server took for some recipients and refused for others (SMTP RCPT). */
export interface PartialDelivery {
  messageId: string;
  accepted: string[];
  refused: Array<{ address: string; reply: string }>;
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
  /** Set for recipients_refused: who got the message and who did not. */
  readonly partial: PartialDelivery | undefined;
  /** See ErrorDetails.local. */
  readonly local: boolean;
  /** See ErrorDetails.setting. */
  readonly setting: string | undefined;
  /** The message and hint as written, for a front end other than the CLI to say (`in`). */
  readonly #words: { message: Text; hint: Text | undefined };

  /** A message or hint given as words is said in the CLI's terms here; `in(front)` says it another way. */
  constructor(code: ErrorCode, message: Text, details: ErrorDetails = {}) {
    super(said(message), details.cause === undefined ? undefined : { cause: details.cause });
    this.#words = { message, hint: details.hint };
    this.code = code;
    this.hint = details.hint === undefined ? undefined : said(details.hint);
    this.status = details.status;
    this.retryAfter = details.retryAfter;
    this.mayHaveBeenSent = details.mayHaveBeenSent ?? false;
    this.partial = details.partial;
    this.local = details.local ?? false;
    this.setting = details.setting;
  }

  /** The message as written (words, when it names a setting), to build another error's message on. */
  get messageWords(): Text {
    return this.#words.message;
  }

  /** The hint as written (see messageWords). */
  get hintWords(): Text | undefined {
    return this.#words.hint;
  }

  /** The same error, its message and hint in `front`'s words (itself when they name no setting). */
  in(front: Front): MailsendError {
    return reworded(this, (_, which) => said(which === "message" ? this.#words.message : this.#words.hint!, front));
  }

  get exitClass(): ExitClass {
    return EXIT_CLASS[this.code];
  }

  get exitCode(): number {
    return EXIT[this.exitClass];
  }

  toJSON(): {
    code: ErrorCode;
    message: string;
    exit: number;
    hint?: string;
    status?: number;
    attempts?: number;
    message_id?: string;
    accepted?: string[];
    refused?: Array<{ address: string; reply: string }>;
  } {
    return {
      code: this.code,
      message: this.message,
      exit: this.exitCode,
      ...(this.hint ? { hint: this.hint } : {}),
      ...(this.status !== undefined ? { status: this.status } : {}),
      ...(this.attempts !== undefined ? { attempts: this.attempts } : {}),
      ...(this.partial
        ? { message_id: this.partial.messageId, accepted: this.partial.accepted, refused: this.partial.refused }
        : {}),
    };
  }
}

/** The same error with its message and hint put in other words (the sandbox's); everything else kept. */
export function reworded(e: MailsendError, reword: (text: string, which: "message" | "hint") => string): MailsendError {
  const message = reword(e.message, "message");
  const hint = e.hint === undefined ? undefined : reword(e.hint, "hint");
  if (message === e.message && hint === e.hint) return e;
  const out = new MailsendError(e.code, message, {
    ...(hint !== undefined ? { hint } : {}),
    ...(e.cause !== undefined ? { cause: e.cause } : {}),
    ...(e.status !== undefined ? { status: e.status } : {}),
    ...(e.retryAfter !== undefined ? { retryAfter: e.retryAfter } : {}),
    ...(e.partial ? { partial: e.partial } : {}),
    mayHaveBeenSent: e.mayHaveBeenSent,
    local: e.local,
    ...(e.setting !== undefined ? { setting: e.setting } : {}),
  });
  if (e.attempts !== undefined) out.attempts = e.attempts;
  if (e.stack) out.stack = e.stack.replace(e.message, message);
  return out;
}

export function isMailsendError(e: unknown): e is MailsendError {
  return e instanceof MailsendError;
}

/** Errno codes that are always a fault of this machine's files, never a bug. */
const LOCAL_FAULTS = new Set(["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EIO"]);

/**
 * Anything that is not a MailsendError is a bug of ours: exit 70. Except a
 * file system's refusal that reached here unnamed (a full disk, a read-only
 * or foreign directory): that is 73/74 with its path, whatever wrote it.
 */
export function toMailsendError(e: unknown): MailsendError {
  if (isMailsendError(e)) return e;
  const errno = e as NodeJS.ErrnoException | undefined;
  if (
    errno &&
    typeof errno.code === "string" &&
    LOCAL_FAULTS.has(errno.code) &&
    (typeof errno.path === "string" || ["ENOSPC", "EDQUOT", "EROFS", "EIO"].includes(errno.code))
  ) {
    const reading =
      errno.code === "EIO" || errno.syscall === "read" || errno.syscall === "fsync" || errno.syscall === "fdatasync";
    const action = reading ? (errno.syscall === "read" ? "read" : "sync") : "write";
    if (errno.path !== undefined) return localFileError(e, errno.path, action);
    // A write to an open file names no path: what failed is still this machine's disk.
    return new MailsendError(
      action === "write" ? "local_write_failed" : "local_io_failed",
      `cannot ${action} a local file: ${errnoWords(errno.code)}`,
      {
        cause: e,
        hint: "A disk of this machine refused (the state dir, the temp dir or an output file): free space or fix it, then run again.",
      },
    );
  }
  const message = e instanceof Error ? e.message : String(e);
  return new MailsendError("internal", `internal error: ${message}`, {
    cause: e,
    hint: (s) =>
      `This is a bug in mailsend. ${s.pick({
        cli: "Run again with --verbose and report the output (it never contains your key).",
        api: "Pass a trace function to see the exchange, and report it (it never contains your key).",
      })}`,
  });
}

export function exitCodeFor(code: ErrorCode): number {
  return EXIT[EXIT_CLASS[code]];
}

/** The errno codes of local file faults, in words a user can act on. */
const ERRNO_WORDS: Record<string, string> = {
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ENOENT: "no such file or directory",
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "it is a directory",
  EEXIST: "it already exists",
  EMFILE: "too many open files",
  ENFILE: "too many open files on the system",
  EIO: "input/output error",
  ENAMETOOLONG: "file name too long",
};

export function errnoWords(code: string | undefined): string {
  return (code && ERRNO_WORDS[code]) ?? code ?? "unknown error";
}

/**
 * A fault of this machine while writing (73) or reading/syncing (74) a local
 * file: the path, the errno in words and what to do. Never "internal" (70).
 */
export function localFileError(
  e: unknown,
  path: string,
  action: "write" | "read" | "sync",
  what = "file",
): MailsendError {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const words = errnoWords(code);
  const hint =
    code === "ENOSPC" || code === "EDQUOT"
      ? `Free space on the file system that holds ${path}, then run again.`
      : code === "EROFS"
        ? (s: Say) => `The file system is mounted read-only; point ${s.env("stateDir")} at a writable directory.`
        : code === "EACCES" || code === "EPERM"
          ? (s: Say) =>
              `Check the owner and mode of ${path} and its directory, or point ${s.env("stateDir")} at a directory you own.`
          : undefined;
  return new MailsendError(
    action === "write" ? "local_write_failed" : "local_io_failed",
    `cannot ${action} the ${what} ${path}: ${words}`,
    {
      cause: e,
      ...(hint ? { hint } : {}),
    },
  );
}
