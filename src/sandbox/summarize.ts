/**
 * What the index keeps about a message received over SMTP, read from the
 * message itself with postal-mime (the bytes are stored as they came).
 */
import PostalMime, { type Address } from "postal-mime";
import type { StoredAttachment } from "./types.js";

export interface Summary {
  from: string;
  to: string[];
  subject: string;
  attachments: StoredAttachment[];
  messageIdHeader?: string;
}

function fmt(a: { name?: string; address?: string }): string {
  if (!a.address) return a.name ?? "";
  return a.name ? `${a.name} <${a.address}>` : a.address;
}

function flat(list: Address[] | undefined): string[] {
  return (list ?? []).flatMap((a) => (a.group ? a.group.map(fmt) : [fmt(a)]));
}

export async function summarize(raw: Buffer): Promise<Summary> {
  const email = await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
  const from = email.from ? (email.from.group ? email.from.name : fmt(email.from)) : "";
  return {
    from,
    to: flat(email.to),
    subject: email.subject ?? "",
    attachments: email.attachments.map((a) => ({
      filename: a.filename ?? "",
      contentType: a.mimeType,
      size: typeof a.content === "string" ? Buffer.byteLength(a.content) : a.content.byteLength,
    })),
    ...(email.messageId ? { messageIdHeader: email.messageId } : {}),
  };
}

/**
 * One header of the message's header block, unfolded, without parsing the
 * whole message (used for X-Idempotency-Key before anything else is done).
 */
export function headerValue(raw: Buffer, name: string): string | undefined {
  const end = raw.indexOf("\r\n\r\n");
  const endLf = raw.indexOf("\n\n");
  const cut = [end, endLf].filter((i) => i >= 0);
  const head = raw.subarray(0, cut.length ? Math.min(...cut) : Math.min(raw.length, 256 * 1024)).toString("latin1");
  const unfolded = head.replace(/\r?\n[ \t]+/g, " ");
  const want = name.toLowerCase();
  for (const line of unfolded.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === want) return line.slice(colon + 1).trim();
  }
  return undefined;
}
