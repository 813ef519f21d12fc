import type { Message } from "./message.js";

export type TransportName = "rest" | "smtp";

export interface SendResult {
  transport: TransportName;
  /** REST: the service's message_id. SMTP: the Message-ID header of what was submitted. */
  messageId: string;
  recipients: string[];
  idempotencyKey: string;
  /** REST: HTTP status. */
  status?: number;
  /** SMTP: the server's final reply to DATA, e.g. "250 2.0.0 Ok: queued as 1234". */
  smtpResponse?: string;
  attempts: number;
  /** Time spent waiting for a rate-limit slot and before retries, in ms (0 when none). */
  waitedMs?: number;
  /**
   * What went wrong after the service accepted the message (recording it in
   * the budget, a journal, a results file): the message WAS sent; these are
   * warnings, never a reason to send it again.
   */
  warnings?: string[];
}

export interface SendContext {
  /** Protocol trace for --verbose. Lines are redacted before they get here. */
  trace?: (line: string) => void;
  signal?: AbortSignal;
  /**
   * The delivery deadline (already `signal`, which also follows the caller's
   * own signal): for a wrapper that replaces `signal` with its own, so the
   * deadline still ends the attempt.
   */
  deadline?: AbortSignal;
  /**
   * Called once as the service's answer starts to arrive (REST: its status line and headers,
   * before the body is read). The service counted the request before that moment, so the
   * rate-limit budget counts the slot from there rather than from after the answer was read.
   */
  answered?: () => void;
}

/** Where a preview (--dry-run) is written: the CLI passes stdout. */
export interface PreviewSink {
  write(chunk: string | Buffer): unknown;
}

export interface TransportOptions {
  /**
   * Keep up to this many connections open and reuse them across messages
   * (a batch). Without it, each send opens and closes its own connection.
   */
  pool?: number;
}

export interface Transport {
  readonly name: TransportName;
  send(message: Message, ctx?: SendContext): Promise<SendResult>;
  /**
   * The rate-limit slot for `message` frees in moments: get its send ready (load what it needs,
   * open its connection) so that it goes out as the slot frees, not a connection later. Writes
   * nothing the service could take. Best effort: a send works as ever without it or after it
   * failed, and what it made is dropped by a send of another message, by close(), or soon.
   */
  prepare?(message: Message): void;
  /** Write what would go on the wire, with the key redacted. Sends nothing. */
  preview(message: Message, sink: PreviewSink, opts: { json: boolean }): Promise<void>;
  /** Release pooled connections (batch). */
  close(): Promise<void>;
}
