/**
 * The public types of the programmatic API (`import { send } from "mailsend"`).
 * They are written out here, rather than re-exported from the internals, so
 * that the published declarations stay small and name no internal module.
 */
import type { ErrorCode, ExitClass, MailsendError } from "../core/errors.js";
import type { Counts } from "../batch/counts.js";

/** An attachment given as bytes: a Buffer/Uint8Array, or a base64 string (the REST API's form). */
export interface ContentAttachment {
  filename: string;
  content: Uint8Array | string;
  /** Used over SMTP only; the REST send request carries just filename and content. */
  contentType?: string | undefined;
}

/** An attachment read from a file (streamed over SMTP, read once over REST). */
export interface PathAttachment {
  path: string;
  /** Defaults to the file's base name. */
  filename?: string | undefined;
  /** Used over SMTP only. */
  contentType?: string | undefined;
}

export type AttachmentInput = ContentAttachment | PathAttachment;

/**
 * One message in the REST API's shape (from, to, subject, html, name,
 * reply_to, headers, attachments), plus `text`, and `cc`/`bcc` for SMTP.
 */
export interface MessageInput {
  /** "ops@example.com" or "Ops <ops@example.com>". */
  from: string;
  /** One address, a comma-separated list, or an array of either. */
  to: string | string[];
  /** SMTP only: over REST a message with cc or bcc is refused (a usage error, exit 64). */
  cc?: string | string[] | undefined;
  /** SMTP only; never appears in the message's headers. */
  bcc?: string | string[] | undefined;
  subject: string;
  /** At least one of html and text. Over REST, a text-only body is sent as escaped `<pre>` HTML, and text beside html is not sent. */
  html?: string | undefined;
  text?: string | undefined;
  /** The sender's display name; overrides a name given in `from`. */
  name?: string | undefined;
  reply_to?: string | undefined;
  /** Custom headers (not From/To/Subject/Content-Type...). */
  headers?: Record<string, string> | undefined;
  attachments?: AttachmentInput[] | undefined;
}

/** SMTP submission settings. */
export interface SmtpOptions {
  host: string;
  /** Default 587. */
  port?: number | undefined;
  /** Default: "implicit" on port 465, else "starttls". Port 465 with starttls, or 587 with implicit, is refused. */
  tls?: "starttls" | "implicit" | undefined;
  /** AUTH user name (the key is the password). Default "mailsend". */
  user?: string | undefined;
  /** A proxy for the SMTP connection: socks5://[user:password@]host:port (also socks4://) or http://host:port (CONNECT). Default: MAILSEND_SMTP_PROXY from `env`, else none. */
  proxy?: string | undefined;
}

/** Where and how to connect. */
export interface ConnectionOptions {
  /**
   * Default: the `transport` option, else MAILSEND_TRANSPORT from `env`, else
   * "smtp" when `smtp` is given and `baseUrl` is not, else "rest".
   */
  transport?: "rest" | "smtp" | undefined;
  /** The REST service's base URL: mail is POSTed to `<baseUrl>/send`. */
  baseUrl?: string | undefined;
  smtp?: SmtpOptions | undefined;
  /** The API key. It is never written into an error, a trace line, or a state file. */
  apiKey?: string | undefined;
  /** A file holding the API key (instead of `apiKey`). */
  apiKeyFile?: string | undefined;
  /** PEM file of extra CA certificates to trust (the sandbox's `caFile`). */
  caFile?: string | undefined;
  /** Skip TLS certificate verification. Not for production. */
  insecure?: boolean | undefined;
  /**
   * An HTTP proxy for REST (http://[user:password@]host:port), or "none". Default: from `env`
   * (HTTPS_PROXY / HTTP_PROXY / NO_PROXY and their lower-case forms, MAILSEND_PROXY), when given.
   */
  proxy?: string | undefined;
  /** Per request/connection timeout in milliseconds. Default 30000. */
  timeoutMs?: number | undefined;
  /**
   * Environment variables to fill in what the options leave unset, as the CLI
   * does (MAILSEND_BASE_URL, MAILSEND_API_KEY, MAILSEND_API_KEY_FILE,
   * MAILSEND_SMTP_HOST, MAILSEND_RATE_LIMIT, ...; NODE_EXTRA_CA_CERTS as
   * `caFile`). Pass `process.env` to use the process's own. Without it, the
   * environment is not read at all.
   */
  env?: Record<string, string | undefined> | undefined;
}

/** What send() calls while it waits: for a rate-limit slot, or before a retry. */
export interface WaitInfo {
  reason: "budget" | "retry";
  ms: number;
  /** The attempt about to be made (1 = the first). */
  attempt: number;
  /** The failure being retried. */
  error?: MailsendError;
}

/** The shared rate-limit budget and the retry policy (the same as the CLI's). */
export interface DeliveryOptions {
  /** Retries after the first attempt (only when the message surely did not arrive, or carries an idempotency key). Default 3. */
  retries?: number | undefined;
  /** Longest total time to wait for rate-limit slots and between retries, in ms. Default 300000. */
  maxWaitMs?: number | undefined;
  /** false: fail at once (rate_limited, exit 75) instead of waiting for a slot. Default true. */
  wait?: boolean | undefined;
  /**
   * Longest time for all the attempts and the waits between them, in ms, from
   * the first attempt (an attempt still running then is stopped); the wait for
   * a rate-limit slot is bounded by maxWaitMs alone. 0: none. Default 60000.
   */
  deadlineMs?: number | undefined;
  /** Requests per window for this key, shared with every mailsend process on this machine; 0 switches the local budget off. Default 60. */
  rateLimit?: number | undefined;
  /** The budget's window in ms. Default 60000 (the service's minute). */
  rateWindowMs?: number | undefined;
  /**
   * Where the budget's state file lives. Default: the platform's state dir, as for the CLI
   * ($XDG_STATE_HOME/mailsend, else ~/.local/state/mailsend on Linux), so the library and
   * `mailsend` processes of one key share one budget. MAILSEND_STATE_DIR is read from `env`
   * when that option is given.
   */
  stateDir?: string | undefined;
  /**
   * Share the budget across machines through Redis or Valkey instead of a local file:
   * redis://[user:password@]host[:port][/db], rediss:// (TLS, verified against Node's CAs and
   * `caFile`), or redis-sentinel://host1:26379,host2:26379/mymaster[/db]. The password may come
   * from a file named by MAILSEND_RATE_LIMIT_PASSWORD_FILE in `env` instead.
   */
  rateLimitUrl?: string | undefined;
  /** Abort waits and (over REST) the request in flight. */
  signal?: AbortSignal | undefined;
  onWait?: ((info: WaitInfo) => void) | undefined;
  /**
   * Called for what does not stop a send but should be known: a damaged
   * budget state file, or a failure to record a message the service accepted
   * (send() still resolves: the message was sent; its result's `warnings`
   * hold the same texts). The library prints nothing itself.
   */
  onWarning?: ((text: string) => void) | undefined;
  /** Protocol trace lines, with the key redacted. */
  trace?: ((line: string) => void) | undefined;
}

export interface SendOptions extends ConnectionOptions, DeliveryOptions {
  /** Stable across retries; resending with the same key is de-duplicated by the service. Default: a random UUID. */
  idempotencyKey?: string | undefined;
}

/** What a successful send() returns: the same result the CLI reports. */
export type { SendResult } from "../core/transport.js";

/** Every field optional, and `undefined` taken as absent (under exactOptionalPropertyTypes too). */
type OptionalFields<T> = { [K in keyof T]?: T[K] | undefined };

/** One item of sendBatch(): a message, with its own idempotency key if wanted and template variables. */
export interface BatchItem extends OptionalFields<MessageInput> {
  /** Default: derived from the journal (stable across resumes), else unique per run. */
  idempotency_key?: string | undefined;
  /** Variables for the `template` option's {{placeholders}}. */
  vars?: Record<string, unknown> | undefined;
}

/** Defaults for every item of a batch; subject, html and text are templates ({{name}}, HTML-escaped in html). */
export interface BatchTemplate {
  from?: string | undefined;
  name?: string | undefined;
  reply_to?: string | undefined;
  subject?: string | undefined;
  html?: string | undefined;
  text?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** File paths attached to every message (read once). */
  attachments?: string[] | undefined;
}

export type BatchItemStatus = "sent" | "partial" | "failed" | "invalid" | "skipped" | "unknown";

/** Why an item was not sent: the MailsendError that send() would have rejected with, as data. */
export interface BatchItemError {
  code: ErrorCode;
  message: string;
  /** What to do next, when there is something to say (as MailsendError's `hint`). */
  hint?: string;
  exitCode: number;
  exitClass: ExitClass;
}

export interface BatchItemResult {
  /** 0-based position of the item in the input. */
  index: number;
  /**
   * sent; partial (sent, but the SMTP server refused some recipients: see
   * `refused`; never resent); failed (not sent); invalid (never tried: bad data); skipped (sent by
   * an earlier run of the same journal); unknown (may have been sent: the
   * connection broke after hand-over).
   */
  status: BatchItemStatus;
  recipients: string[];
  messageId?: string;
  idempotencyKey?: string;
  attempts?: number;
  /** partial: the recipients the server refused, with its reply. */
  refused?: Array<{ address: string; reply: string }>;
  /** Sent, but recording it (journal, budget) failed: never a reason to send it again. */
  warnings?: string[];
  error?: BatchItemError;
}

/** The items' counts (total, sent, failed, invalid, skipped, unknown, partial), with how the batch ended. */
export interface BatchSummary extends Counts {
  /** The CLI's exit code for this batch: 0 when every item was sent (or skipped), else the most serious failure's; 75 when aborted. */
  exitCode: number;
  elapsedMs: number;
  /** True when `signal` stopped the batch before every item was tried. */
  aborted: boolean;
  /** The journal's path, when one was kept. */
  journal?: string;
}

export interface BatchResult {
  summary: BatchSummary;
  /** In completion order (not input order); empty when `collectResults` is false. */
  results: BatchItemResult[];
}

export interface SendBatchOptions extends ConnectionOptions, Omit<DeliveryOptions, "trace"> {
  /** Messages in flight at once, over a pool of as many connections. 1 to 64, default 4. */
  concurrency?: number | undefined;
  /** Defaults and templates for every item. */
  template?: BatchTemplate | undefined;
  /**
   * A file recording each item's state (fsynced before and after its send).
   * Run the same items with the same journal again and the items already
   * sent are skipped, the ones in doubt are resent with the same idempotency
   * key. Without it, nothing is written.
   */
  journal?: string | undefined;
  /** Start the journal over (the old one is kept beside it). */
  fresh?: boolean | undefined;
  /** Validate every item and send nothing (no key needed). */
  check?: boolean | undefined;
  /** Stop at the first invalid or failed item. */
  failFast?: boolean | undefined;
  /** Called for each item as it is settled. */
  onResult?: ((result: BatchItemResult) => void) | undefined;
  /**
   * Called before anything is sent for what the items as a whole suggest is
   * a mistake (e.g. a template placeholder that is also a send request's
   * field: a `name` variable is the sender's display name); and as it
   * happens for book-keeping that failed after an item was accepted (the
   * item is still "sent", with the text in its `warnings`). The library
   * prints nothing itself.
   */
  onWarning?: ((text: string) => void) | undefined;
  /** Keep every item's result in BatchResult.results (default true; false for very large batches). */
  collectResults?: boolean | undefined;
}

export interface SandboxOptions {
  /** The data dir (keys, messages, TLS material). Default: a new temporary dir, removed by close(). */
  dir?: string | undefined;
  /** Default 127.0.0.1. */
  host?: string | undefined;
  /** Ports; 0 (the default) picks free ones. */
  httpPort?: number | undefined;
  smtpPort?: number | undefined;
  smtpsPort?: number | undefined;
  /** Requests per window per key (default 60). */
  rateLimit?: number | undefined;
  /** The limit's window in ms (default 60000). */
  rateWindowMs?: number | undefined;
  /** Largest message in bytes (default 10 MiB). */
  maxSize?: number | undefined;
}

/** A message the sandbox accepted. */
export interface SandboxMessage {
  id: string;
  receivedAt: string;
  channel: "rest" | "smtp";
  /** The envelope as the client gave it: over SMTP the MAIL FROM and RCPT TO addresses as sent (A-labels as written). */
  envelope: { from: string; to: string[] };
  /** SMTP, when it differs from `envelope`: the same addresses with A-label domains in Unicode. */
  envelopeUnicode?: { from: string; to: string[] };
  from: string;
  to: string[];
  subject: string;
  size: number;
  attachments: Array<{ filename: string; contentType: string; size: number }>;
  messageId: string;
  idempotencyKey?: string;
}

/** An attachment of a message the sandbox received; its bytes when asked for. */
export interface SandboxAttachment {
  filename: string;
  contentType: string;
  size: number;
  content(): Buffer;
}

/** A received message with its parts read: what search(), waitFor() and latest() give. */
export interface SandboxMail extends Omit<SandboxMessage, "attachments"> {
  cc: string[];
  /** The text part, decoded (null when the message has none). */
  text: string | null;
  html: string | null;
  /** Its links, each once: the HTML part's <a href>s first, then the URLs of the text. */
  links: string[];
  attachments: SandboxAttachment[];
}

export interface WaitForOptions {
  /** Milliseconds, or a duration such as "30s" (default 30 s). */
  timeout?: number | string;
  /** Wait until this many messages match; then waitFor() resolves with an array of them. */
  count?: number;
}

/**
 * What waitFor() rejects with at its timeout (code "timeout"): the message says what it waited
 * for and lists the closest messages it saw (the same recipient, or the same subject).
 */
export interface SandboxWaitError extends MailsendError {
  query: string;
  count: number;
  matched: SandboxMessage[];
  closest: SandboxMessage[];
}

export interface MailSandbox {
  dir: string;
  /** For `baseUrl`: POST <baseUrl>/send. */
  baseUrl: string;
  /** The web inbox. */
  inboxUrl: string;
  smtp: { host: string; port: number; tls: "starttls" };
  smtps: { host: string; port: number; tls: "implicit" };
  /** The sandbox's first key. */
  apiKey: string;
  /** The sandbox's CA certificate (PEM), for `caFile`. */
  caFile: string;
  /**
   * The variables that point the mailsend CLI at this sandbox (for a child process), with
   * MAILSEND_STATE_DIR in the sandbox's dir (the same as `options().stateDir`).
   */
  env: Record<string, string>;
  /**
   * Options for send()/sendBatch() that reach this sandbox (REST unless "smtp" or "smtps" is asked
   * for). Their `stateDir` (the rate-limit budget's file) is in the sandbox's dir, removed with a
   * temporary one: a sandbox's key is its own, so nothing outside shares its budget.
   */
  options(transport?: "rest" | "smtp" | "smtps"): SendOptions;
  /** The messages received, newest first. */
  messages(): Promise<SandboxMessage[]>;
  /**
   * The messages matching a query, newest first: to:, from:, cc:, subject:, has:attachment,
   * filename:, after:/before: (a date or a duration such as 10m), is:rest, is:smtp, words and
   * "quoted phrases" (subject and body), `-` before a term negates it; terms are ANDed.
   */
  search(query: string): Promise<SandboxMail[]>;
  /**
   * Resolves with the newest message matching `query` as soon as there is one (one stored already
   * counts); with `count`, with the matching messages (newest first) once there are that many.
   * Rejects with a SandboxWaitError at the timeout. Reacts to arrival: no polling.
   */
  waitFor(query: string, options?: WaitForOptions & { count?: undefined }): Promise<SandboxMail>;
  waitFor(query: string, options: WaitForOptions & { count: number }): Promise<SandboxMail[]>;
  /** The newest message, if any. */
  latest(): Promise<SandboxMail | undefined>;
  /** A received message's .eml bytes (`"latest"`: the newest message's). */
  raw(id: string): Promise<Buffer | undefined>;
  /** Stop the servers (and remove the data dir if it was a temporary one). */
  close(): Promise<void>;
}
