import { parseMailbox1 } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import { messageFromEml } from "../sendmail/eml.js";
import type { Envelope } from "../core/envelope.js";

/**
 * The Message a raw RFC 5322 message from another program becomes, with the
 * envelope's recipients as the ones that get it. Validates what every
 * transport needs: one From, parseable addresses, at least one recipient;
 * throws a MailsendError (64/65) before anything is queued.
 */
export async function prepareMessage(
  raw: Buffer,
  envelope: Envelope,
  idempotencyKey?: string,
  opts: { stampedMessageId?: boolean; nullSender?: boolean } = {},
): Promise<Message> {
  if (envelope.to.length === 0) {
    throw new MailsendError("usage", "no recipients: the message names none and none were given", {
      hint: "Give the recipients as arguments, or use -t to take them from the To, Cc and Bcc headers.",
    });
  }
  const to = envelope.to.map((r) => parseMailbox1(r, "recipient").address);
  const from = envelope.from === "" ? "" : parseMailbox1(envelope.from, "envelope sender").address;
  const message = await messageFromEml(raw, "the message", idempotencyKey, { envelopeRecipients: true });
  // A Message-ID mailsend added (sendmail, the relay) is not the program's own: nothing refers to it yet.
  if (opts.stampedMessageId) delete message.ownMessageId;
  // A notice goes with the null sender (MAIL FROM:<>), so that nothing answers it; other mail's empty sender is its From.
  return { ...message, envelope: { from: from || (opts.nullSender ? "" : message.from.address), to } };
}
