/**
 * Mail handed over by sendmail or the relay is MIME; the REST send request
 * carries only part of what MIME can say. This names what REST would lose,
 * so that such a message goes over SMTP instead (or fails with the reason),
 * never changed silently. The message's own content is judged as `send
 * --transport auto` judges it (transports/choose.ts); the envelope adds
 * what a message from another program can have besides: recipients that
 * are not in its To header, and no Subject.
 */
import type { Message } from "../core/message.js";
import { restLoss } from "../transports/choose.js";

export function restLossOfRaw(m: Message): string | undefined {
  if (m.subject.trim() === "") return "no Subject (the REST request requires one)";
  const loss = restLoss(m);
  if (loss) return loss;
  if (m.envelope) {
    const visible = new Set(m.to.map((r) => r.address.toLowerCase()));
    const hidden = m.envelope.to.filter((r) => !visible.has(r.toLowerCase()));
    if (hidden.length > 0)
      return `recipients not in the To header (${hidden.length === 1 ? hidden[0] : `${hidden.length} of them`}: Bcc or envelope only)`;
    const wanted = new Set(m.envelope.to.map((r) => r.toLowerCase()));
    if ([...visible].some((r) => !wanted.has(r))) return "To addresses that do not get this copy";
  }
  return undefined;
}
