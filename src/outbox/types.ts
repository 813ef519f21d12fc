import type { Envelope } from "../core/envelope.js";

/** Written once, with the message; never changed. */
export interface OutboxMeta {
  v: 1;
  id: string;
  createdAt: number;
  envelope: Envelope;
  /** The same key on every attempt: the service never delivers the message twice. */
  idempotencyKey: string;
  source: "sendmail" | "relay" | "send" | "run" | "notice";
  size: number;
  profile?: string;
  transport?: "rest" | "smtp" | "auto";
  subject?: string;
  /** The From header as written, for `queue ls`. */
  headerFrom?: string;
  /** The Message-ID was added by mailsend (sendmail, the relay), not written by the program. */
  stampedMessageId?: true;
}

export interface OutboxError {
  code: string;
  message: string;
  exit: number;
  at: number;
}

/** Rewritten after every attempt. */
export interface OutboxState {
  attempts: number;
  /** ms since the epoch; 0 = due now. */
  nextAttemptAt: number;
  lastError?: OutboxError;
  failedAt?: number;
  /** When a notice of each kind was queued about it (outbox/notices.ts): never a second one. */
  notices?: { failed?: number; delayed?: number };
}

export interface QueuedMessage {
  meta: OutboxMeta;
  raw: Buffer;
  state: OutboxState;
}
