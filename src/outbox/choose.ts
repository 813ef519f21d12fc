/**
 * Mail handed over by sendmail or the relay is MIME; the REST send request
 * carries only part of what MIME can say. This names what REST would lose,
 * so that such a message goes over SMTP instead (or fails with the reason),
 * never changed silently.
 */
import type { Message } from "../core/message.js";

function headerSection(raw: Buffer): string {
  const text = raw.subarray(0, Math.min(raw.length, 256 * 1024)).toString("latin1");
  return text;
}

export function restLossOfRaw(m: Message): string | undefined {
  if (m.subject.trim() === "") return "no Subject (the REST request requires one)";
  if (m.html === undefined && m.text !== undefined) return "a text-only body (REST carries only HTML)";
  if (m.html !== undefined && m.text !== undefined && !/^\s*$/.test(m.text) && !m.raw) return "a text part beside the HTML";
  if (m.cc.length > 0) return "Cc recipients";
  if (m.envelope) {
    const visible = new Set(m.to.map((r) => r.address.toLowerCase()));
    const hidden = m.envelope.to.filter((r) => !visible.has(r.toLowerCase()));
    if (hidden.length > 0) return `recipients not in the To header (${hidden.length === 1 ? hidden[0] : `${hidden.length} of them`}: Bcc or envelope only)`;
    if (visible.size !== new Set(m.envelope.to.map((r) => r.toLowerCase())).size) return "To addresses that are not recipients of this copy";
  }
  if (m.raw) {
    const head = headerSection(m.raw);
    if (/^content-id:/im.test(head) && /multipart\/related/i.test(head)) return "inline images (Content-ID parts)";
    if (/content-type:\s*message\/rfc822/i.test(head)) return "an attached message";
    if (/content-type:\s*text\/calendar/i.test(head)) return "a calendar part";
    if (/^reply-to:[^\n]*,/im.test(head.split(/\r?\n\r?\n/)[0] ?? "")) return "several Reply-To addresses";
  }
  return undefined;
}
