/**
 * The channel a message goes by, and the message as that channel takes it: one rule for send and
 * for each row of a batch, so that both choose alike under `--transport auto` and both give HTML
 * sent by SMTP its text part.
 */
import type { Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";
import { checkRestFit } from "../message/build.js";
import { chooseTransport, type Channels, type TransportChoice } from "./choose.js";

export interface Settled {
  message: Message;
  transport: TransportName;
  /** Under auto, what was chosen and why. */
  choice?: TransportChoice;
}

/**
 * Under auto, the channel chooseTransport picks (REST only when the message fits its request).
 * Over SMTP an HTML-only message gets a text/plain alternative made from it (filters penalise HTML
 * without one), unless `textPart` is false (a batch that composes nothing); a raw message or one
 * with its own text goes as it is.
 */
export async function settleChannel(
  message: Message,
  wanted: TransportName | "auto",
  channels: Channels,
  opts: { textPart?: boolean; trace?: ((line: string) => void) | undefined } = {},
): Promise<Settled> {
  let transport: TransportName;
  let choice: TransportChoice | undefined;
  if (wanted === "auto") {
    choice = chooseTransport(message, channels);
    opts.trace?.(`* --transport auto: ${choice.transport} (${choice.reason})`);
    transport = choice.transport;
    if (transport === "rest") checkRestFit(message);
  } else transport = wanted;
  const textPart = opts.textPart !== false && !message.raw && message.html !== undefined && message.text === undefined;
  if (transport === "smtp" && textPart) {
    message = await (await import("../compose/index.js")).withTextAlternative(message);
    opts.trace?.("* text/plain alternative made from the HTML");
  }
  return choice ? { message, transport, choice } : { message, transport };
}
