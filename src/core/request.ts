import { formatAddressList, formatMailbox } from "./address.js";
import type { Message } from "./message.js";
import { textAsHtml } from "./message.js";
import type { SendRequest } from "./schema.js";

/**
 * The REST send request for a message, without its attachments (which are
 * streamed). Only the fields the service documents, in its order, no nulls.
 */
export function sendRequestFields(m: Message): Omit<SendRequest, "attachments"> {
  const fields: Omit<SendRequest, "attachments"> = {
    from: m.from.address,
    to: formatAddressList(m.to),
    subject: m.subject,
    html: m.html ?? textAsHtml(m.text ?? ""),
  };
  if (m.from.name) fields.name = m.from.name;
  if (m.replyTo) fields.reply_to = formatMailbox(m.replyTo);
  if (m.headers.length > 0) fields.headers = Object.fromEntries(m.headers);
  return fields;
}

/** Length of the base64 text for n bytes. */
export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}
