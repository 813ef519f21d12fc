import { randomUUID } from "node:crypto";
import type { Mailbox } from "../core/address.js";
import { parseMailbox1 } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import { checkHeaderName, checkSingleLine, type HeaderList } from "../core/headers.js";
import type { Message } from "../core/message.js";

type PMAddress = { name: string; address?: string | undefined; group?: PMAddress[] | undefined };

function invalid(source: string, why: string): never {
  throw new MailsendError("invalid_eml", `${source}: ${why}`, {
    hint: "Expected an RFC 5322 message: header lines (From:, To:, Subject:), a blank line, then the body.",
  });
}

function mailboxes(list: PMAddress[] | undefined, field: string, source: string): Mailbox[] {
  return (list ?? []).map((a) => {
    if (a.group) invalid(source, `${field}: address groups are not supported`);
    if (!a.address) invalid(source, `${field}: empty address`);
    const { address } = parseMailbox1(a.address, `${source} ${field}`);
    return a.name ? { name: a.name, address } : { address };
  });
}

/** Byte offset just past the blank line that ends the header section, or -1. */
function headerEnd(raw: Buffer): number {
  const crlf = raw.indexOf("\r\n\r\n");
  const lf = raw.indexOf("\n\n");
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return crlf + 4;
  return lf >= 0 ? lf + 2 : -1;
}

/**
 * Remove every occurrence of a header field (with its folded continuation
 * lines) from the header section, leaving the rest byte for byte.
 */
export function stripHeader(raw: Buffer, name: string): Buffer {
  const end = headerEnd(raw);
  const head = (end < 0 ? raw : raw.subarray(0, end)).toString("latin1");
  const lines = head.split(/(?<=\n)/);
  const prefix = `${name.toLowerCase()}:`;
  const kept: string[] = [];
  let dropping = false;
  for (const line of lines) {
    if (dropping && (line.startsWith(" ") || line.startsWith("\t"))) continue;
    dropping = line.toLowerCase().replace(/^([^:\s]+)\s+:/, "$1:").startsWith(prefix);
    if (!dropping) kept.push(line);
  }
  const newHead = Buffer.from(kept.join(""), "latin1");
  return end < 0 ? newHead : Buffer.concat([newHead, raw.subarray(end)]);
}

/** Turn an .eml into a Message. Over SMTP the raw bytes (without Bcc) are what is sent. */
export async function messageFromEml(raw: Buffer, source: string, idempotencyKey?: string): Promise<Message> {
  const firstLine = raw.subarray(0, Math.min(raw.length, 1000)).toString("latin1").split(/\r?\n/)[0] ?? "";
  if (!/^[\x21-\x39\x3B-\x7E]+:/.test(firstLine)) invalid(source, "does not start with a header line");
  if (headerEnd(raw) < 0) invalid(source, "no blank line between the headers and the body");
  const { default: PostalMime } = await import("postal-mime");
  let email;
  try {
    email = await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
  } catch (e) {
    invalid(source, `cannot be parsed (${(e as Error).message})`);
  }
  const fromList = mailboxes(email.from ? [email.from] : [], "From", source);
  if (fromList.length !== 1) invalid(source, "needs exactly one From address");
  const to = mailboxes(email.to, "To", source);
  const cc = mailboxes(email.cc, "Cc", source);
  const bcc = mailboxes(email.bcc, "Bcc", source);
  if (to.length + cc.length + bcc.length === 0) invalid(source, "has no recipients (To, Cc or Bcc)");
  const replyTo = mailboxes(email.replyTo, "Reply-To", source);
  if (replyTo.length > 1) invalid(source, "more than one Reply-To address is not supported");
  const subject = email.subject ?? "";
  checkSingleLine(subject, `${source} Subject`);

  // Only custom X- headers travel as `headers` over REST; the rest is structure.
  const headers: HeaderList = [];
  for (const h of email.headers) {
    if (!/^x-/i.test(h.key)) continue;
    checkHeaderName(h.originalKey, `${source} header`);
    checkSingleLine(h.value, `${source} header ${h.originalKey}`);
    headers.push([h.originalKey, h.value]);
  }

  const attachments = email.attachments.map((a, i) => {
    const data = a.content;
    const bytes =
      typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data instanceof Uint8Array ? data : new Uint8Array(data));
    return { filename: a.filename ?? `attachment-${i + 1}`, source: { kind: "bytes" as const, data: bytes }, contentType: a.mimeType };
  });

  return {
    from: fromList[0]!,
    to,
    cc,
    bcc,
    ...(replyTo[0] ? { replyTo: replyTo[0] } : {}),
    subject,
    ...(email.html ? { html: email.html } : {}),
    ...(email.text ? { text: email.text } : {}),
    attachments,
    headers,
    idempotencyKey: idempotencyKey ?? randomUUID(),
    raw: stripHeader(raw, "bcc"),
  };
}
