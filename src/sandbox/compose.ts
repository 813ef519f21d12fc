/**
 * A REST send request as the RFC 5322 message the service would send: built
 * with nodemailer's MailComposer from already validated fields (the shared
 * schema ran first), with attachments decoded from base64 byte for byte.
 */
import MailComposer from "nodemailer/lib/mail-composer";
import * as mimeFuncs from "nodemailer/lib/mime-funcs";
import { formatMailbox, parseAddressList, parseMailbox1, type Mailbox } from "../core/address.js";
import type { SendRequest } from "../core/schema.js";
import type { StoredAttachment } from "./types.js";

export const MESSAGE_ID_DOMAIN = "sandbox.mailsend.invalid";

const detectMimeType = (mimeFuncs as unknown as { detectMimeType(name: string): string }).detectMimeType;

export interface Composed {
  raw: Buffer;
  from: string;
  to: string[];
  envelope: { from: string; to: string[] };
  subject: string;
  attachments: StoredAttachment[];
  messageIdHeader: string;
}

const box = (m: Mailbox) => ({ name: m.name ?? "", address: m.address });

export async function composeRest(req: SendRequest, id: string, date = new Date()): Promise<Composed> {
  const to = parseAddressList(req.to, "to");
  const from: Mailbox = req.name ? { name: req.name, address: req.from } : { address: req.from };
  const replyTo = req.reply_to ? parseMailbox1(req.reply_to, "reply_to") : undefined;
  const files = (req.attachments ?? []).map((a) => {
    const content = Buffer.from(a.content, "base64");
    return { filename: a.filename, content, contentType: detectMimeType(a.filename) || "application/octet-stream" };
  });
  const messageIdHeader = `<${id}@${MESSAGE_ID_DOMAIN}>`;
  const composer = new MailComposer({
    from: box(from),
    to: to.map(box),
    ...(replyTo ? { replyTo: box(replyTo) } : {}),
    subject: req.subject,
    html: req.html,
    headers: Object.entries(req.headers ?? {}).map(([key, value]) => ({ key, value })),
    attachments: files,
    messageId: messageIdHeader,
    date,
    envelope: { from: req.from, to: to.map((m) => m.address) },
  });
  const raw = await composer.compile().build();
  return {
    raw,
    from: formatMailbox(from),
    to: to.map(formatMailbox),
    envelope: { from: req.from, to: to.map((m) => m.address) },
    subject: req.subject,
    attachments: files.map((f) => ({ filename: f.filename, contentType: f.contentType, size: f.content.length })),
    messageIdHeader,
  };
}
