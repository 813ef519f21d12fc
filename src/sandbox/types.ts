/**
 * The contract between the sandbox's store and its readers (the web inbox,
 * `mailsend inbox`). The key itself is never stored: `keyId` names it.
 */
/**
 * The domain of the Message-ID header the sandbox gives a REST message
 * (<id@this>); the REST answer's message_id is the bare id.
 */
export const MESSAGE_ID_DOMAIN = "sandbox.mailsend.invalid";

export interface StoredAttachment {
  filename: string;
  contentType: string;
  size: number;
}

export interface StoredMessage {
  /** Sortable by arrival (time-based), safe in a URL and a file name. */
  id: string;
  receivedAt: string;
  channel: "rest" | "smtp";
  keyId: string;
  /**
   * The envelope as the client gave it: over SMTP the MAIL FROM and RCPT TO
   * addresses as sent (an IDN domain in the A-labels the client wrote), over
   * REST the request's addresses.
   */
  envelope: { from: string; to: string[] };
  /** SMTP, when it differs from `envelope`: the same addresses with A-label domains in Unicode, for a reader. */
  envelopeUnicode?: { from: string; to: string[] };
  from: string;
  to: string[];
  subject: string;
  /** Bytes of the stored .eml. */
  size: number;
  attachments: StoredAttachment[];
  /** REST message_id / the Message-ID header. */
  messageId: string;
  idempotencyKey?: string;
}

export interface MessageStore {
  /** Newest first. */
  list(opts?: { limit?: number }): Promise<StoredMessage[]>;
  get(id: string): Promise<StoredMessage | undefined>;
  /** The .eml bytes exactly as stored. */
  raw(id: string): Promise<Buffer | undefined>;
  /** Called after each message is stored (durably). Returns an unsubscribe function. */
  subscribe(listener: (m: StoredMessage) => void): () => void;
}
