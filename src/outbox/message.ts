import { MailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import type { Envelope } from "./types.js";

/**
 * The Message a raw RFC 5322 message from another program becomes, with the
 * envelope's recipients as the ones that get it. Validates: throws a
 * MailsendError (65 bad data) when it cannot be delivered as it is.
 */
export async function prepareMessage(raw: Buffer, envelope: Envelope, idempotencyKey?: string): Promise<Message> {
  void raw;
  void envelope;
  void idempotencyKey;
  throw new MailsendError("internal", "prepareMessage: not written yet");
}
