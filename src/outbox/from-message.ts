import type { Message } from "../core/message.js";
import type { Envelope } from "../core/envelope.js";

/**
 * A message built by `mailsend send` as the RFC 5322 bytes SMTP would carry
 * (its X-Idempotency-Key and Message-ID included), for the outbox. Bcc is in
 * the envelope only, never in the bytes.
 */
export async function rawOfMessage(m: Message): Promise<{ raw: Buffer; envelope: Envelope }> {
  const [{ mailOptions }, { default: MailComposer }] = await loadComposer();
  const options = mailOptions(m);
  const envelope = options.envelope as Envelope;
  const raw = m.raw ?? (await new MailComposer(options).compile().build());
  return { raw, envelope: { from: envelope.from, to: [...envelope.to] } };
}

/** What rebuilds a message for SMTP: the transport's options and nodemailer's composer. */
export function loadComposer() {
  return Promise.all([import("../transports/smtp.js"), import("nodemailer/lib/mail-composer/index.js")]);
}
