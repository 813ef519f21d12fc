import type { Mailbox } from "./address.js";
import type { HeaderList } from "./headers.js";

/** Where an attachment's bytes come from. Files are streamed, never read whole. */
export type AttachmentSource = { kind: "file"; path: string; size: number } | { kind: "bytes"; data: Buffer };

export interface Attachment {
  filename: string;
  source: AttachmentSource;
  /** Only used over SMTP; REST carries just content and filename. */
  contentType?: string;
  /**
   * An inline part (multipart/related, Content-Disposition: inline) that the
   * HTML references as `cid:<cid>`; the Content-ID without its <>. SMTP only:
   * the REST send request has no way to say it (src/transports/choose.ts).
   */
  cid?: string;
}

/**
 * One logical message, validated, independent of the transport.
 * Every builder in src/input produces this; every transport consumes it.
 */
export interface Message {
  from: Mailbox;
  to: Mailbox[];
  cc: Mailbox[];
  bcc: Mailbox[];
  replyTo?: Mailbox;
  subject: string;
  html?: string;
  text?: string;
  attachments: Attachment[];
  headers: HeaderList;
  /** Stable across retries of this message (REST Idempotency-Key, SMTP X-Idempotency-Key). */
  idempotencyKey: string;
  /**
   * An RFC 5322 message to submit over SMTP as it is (from --eml), already
   * without its Bcc header. The fields above are still filled from it.
   */
  raw?: Buffer;
  /**
   * The SMTP envelope when it is not the headers' (mail handed over by
   * sendmail or the relay): MAIL FROM and RCPT TO use it as it is.
   */
  envelope?: { from: string; to: string[] };
  /**
   * Of a raw message: bytes its charset does not explain (Latin-1 text in a message that says
   * UTF-8 or nothing), which decoding turned into U+FFFD. The fields above have "\uFFFD" for them;
   * only the raw message (SMTP) carries them as they were.
   */
  undecodable?: boolean;
  /**
   * The text is the plain version of the HTML (a Markdown body's source): REST, which carries
   * only the HTML, loses no content, so --transport auto prefers SMTP for it but does not need it.
   */
  textIsPlainHtml?: boolean;
  /**
   * Of a raw message: it carries a Message-ID its program wrote (not one mailsend added). REST
   * would replace it (the service stamps its own), so replies to it would not thread: with SMTP
   * configured too, --transport auto sends it by SMTP.
   */
  ownMessageId?: boolean;
}

/**
 * Recipients of one message the service takes (the sandbox's; RFC 5321 has every server take at
 * least 100). More would be refused in part after the caller was told the message was taken.
 */
export const MAX_RECIPIENTS = 100;

export function allRecipients(m: Message): Mailbox[] {
  return [...m.to, ...m.cc, ...m.bcc];
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** REST carries only HTML: a text body is escaped and kept preformatted. */
export function textAsHtml(text: string): string {
  return `<pre>${escapeHtml(text)}</pre>`;
}
