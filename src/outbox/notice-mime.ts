/**
 * A delivery status notification as RFC 3464 writes one: multipart/report with a readable text
 * part first, the machine-readable message/delivery-status, and the original's header
 * (text/rfc822-headers; never its body, which may be large or private). Pure: the facts in, the
 * bytes out, with CRLF line ends.
 */
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const randomBytes = (n: number) => process.getBuiltinModule("node:crypto").randomBytes(n);
import { formatMailbox, type Mailbox } from "../core/address.js";
import { rfc5322Date } from "../sendmail/submission.js";

export interface NoticeRecipient {
  address: string;
  /** RFC 3463 status, such as 5.3.4 or 4.4.7. */
  status: string;
  /** The Diagnostic-Code field's value, "smtp; 552 5.3.4 ..." or "x-mailsend; ...". */
  diagnostic: string;
}

export interface NoticeFacts {
  kind: "failed" | "delayed";
  /** This machine's name, for Reporting-MTA and the Message-ID. */
  host: string;
  from: Mailbox;
  to: Mailbox[];
  /** The original's header block, as queued. */
  originalHeader: Buffer;
  originalSubject?: string;
  originalMessageId?: string;
  /** The outbox's id of the original, so a person can find it (mailsend queue). */
  outboxId: string;
  queuedAt: number;
  lastAttemptAt: number;
  attempts: number;
  /** What the last attempt ran into, in words. */
  lastError: string;
  recipients: NoticeRecipient[];
  /** delayed: when the outbox gives up. */
  retryUntil?: number;
}

const CRLF = "\r\n";
const ascii = (s: string) => /^[\x00-\x7f]*$/.test(s);
const date = (ms: number) => rfc5322Date(new Date(ms));

/** Lines of base64 (RFC 2045: at most 76 characters). */
function base64Lines(b: Buffer): string {
  return (b.toString("base64").match(/.{1,76}/g) ?? []).join(CRLF);
}

/** One line without control characters, for a header or a DSN field. */
export function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
}

function readable(f: NoticeFacts): string {
  const who = f.recipients.map((r) => `  <${r.address}>: ${r.diagnostic.replace(/^[^;]*;\s*/, "")}`).join("\n");
  const subject = f.originalSubject !== undefined ? `"${oneLine(f.originalSubject)}"` : "(no subject)";
  const head =
    f.kind === "failed"
      ? [
          `This is the mail system at ${f.host}.`,
          "",
          `Your message ${subject} could not be delivered to the recipients below, and will not be tried again.`,
        ]
      : [
          `This is the mail system at ${f.host}.`,
          "",
          `Your message ${subject} has not been delivered yet to the recipients below. This is a warning only: it is still being tried, and you need not send it again.`,
        ];
  const tail = [
    "",
    `Recipients:`,
    who,
    "",
    `First queued:  ${date(f.queuedAt)}`,
    `Last attempt:  ${date(f.lastAttemptAt)} (attempt ${f.attempts})`,
    ...(f.retryUntil !== undefined ? [`Tried until:   ${date(f.retryUntil)}`] : []),
    `Last error:    ${oneLine(f.lastError)}`,
    `Outbox id:     ${f.outboxId}${f.kind === "failed" ? " (in failed/: mailsend queue --failed shows it, mailsend queue retry sends it again)" : ""}`,
    "",
    "The headers of your message are attached.",
    "",
  ];
  return [...head, ...tail].join("\n");
}

function deliveryStatus(f: NoticeFacts): string {
  const message = [
    `Reporting-MTA: dns; ${f.host}`,
    `X-Mailsend-Queue-ID: ${f.outboxId}`,
    `Arrival-Date: ${date(f.queuedAt)}`,
  ];
  const perRecipient = f.recipients.map((r) =>
    [
      `Final-Recipient: rfc822; ${r.address}`,
      `Action: ${f.kind}`,
      `Status: ${r.status}`,
      `Diagnostic-Code: ${oneLine(r.diagnostic)}`,
      `Last-Attempt-Date: ${date(f.lastAttemptAt)}`,
      ...(f.retryUntil !== undefined ? [`Will-Retry-Until: ${date(f.retryUntil)}`] : []),
    ].join(CRLF),
  );
  return [message.join(CRLF), ...perRecipient].join(CRLF + CRLF) + CRLF;
}

/** A mailbox for a header written by hand: a display name that is not ASCII is left out rather than encoded. */
function headerMailbox(m: Mailbox): string {
  return formatMailbox(
    m.name && ascii(m.name) ? { name: oneLine(m.name), address: m.address } : { address: m.address },
  );
}

/** The notice, as the bytes the outbox queues. */
export function noticeMime(f: NoticeFacts): Buffer {
  const boundary = `=_mailsend_report_${randomBytes(12).toString("hex")}`;
  const text = readable(f).replace(/\r?\n/g, CRLF);
  const textPart = ascii(text)
    ? [`Content-Type: text/plain; charset=utf-8`, `Content-Transfer-Encoding: 7bit`, "", text]
    : [
        `Content-Type: text/plain; charset=utf-8`,
        `Content-Transfer-Encoding: base64`,
        "",
        base64Lines(Buffer.from(text, "utf8")),
      ];
  const original = f.originalHeader
    .toString("latin1")
    .replace(/\r?\n/g, CRLF)
    .replace(/(\r\n)*$/, CRLF);
  const subject = f.kind === "failed" ? "Undelivered Mail Returned to Sender" : "Delayed Mail (still being retried)";
  const header = [
    `From: ${headerMailbox(f.from)}`,
    `To: ${f.to.map(headerMailbox).join(", ")}`,
    `Subject: ${subject}`,
    `Date: ${date(f.lastAttemptAt)}`,
    `Message-ID: <${Date.now().toString(36)}.${randomBytes(6).toString("hex")}.notice@${f.host}>`,
    ...(f.originalMessageId ? [`In-Reply-To: ${f.originalMessageId}`, `References: ${f.originalMessageId}`] : []),
    // RFC 3834: an automatic answer, which nothing answers in turn.
    `Auto-Submitted: auto-replied`,
    `MIME-Version: 1.0`,
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
  ];
  const before = [
    header.join(CRLF),
    "",
    "This is a MIME-encapsulated delivery status notification.",
    `--${boundary}`,
    ...textPart,
    `--${boundary}`,
    `Content-Type: message/delivery-status`,
    "",
    deliveryStatus(f),
    `--${boundary}`,
    `Content-Type: text/rfc822-headers${ascii(original) ? "" : `${CRLF}Content-Transfer-Encoding: 8bit`}`,
    "",
    "",
  ].join(CRLF);
  // The original's header goes byte for byte (latin1 both ways), whatever its charset.
  return Buffer.concat([
    Buffer.from(before, "utf8"),
    Buffer.from(original, "latin1"),
    Buffer.from(`${CRLF}--${boundary}--${CRLF}`, "utf8"),
  ]);
}
