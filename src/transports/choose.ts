/**
 * `--transport auto`: REST when the REST send request carries the message
 * losslessly, else SMTP, which carries any message.
 *
 * Pure functions of the Message, so the CLI's send, the batch runner and the
 * outbox (mail from sendmail/relay: a Message made from a raw RFC 5322
 * message, `raw` set) decide the same way.
 */
import { noChannelError } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";

/** Which channels are configured: REST needs a base URL, SMTP a host. */
export interface Channels {
  rest: boolean;
  smtp: boolean;
}

export interface TransportChoice {
  transport: TransportName;
  /** Why, in a few words, for -v and --json ("inline images", "cc/bcc", ...). */
  reason: string;
}

const type = (t: string | undefined) => (t ?? "").split(";")[0]!.trim().toLowerCase();

/**
 * What the REST send request (from, to, subject, html, name, reply_to,
 * attachments as filename + content, headers as one value per name) would
 * lose of this message, in a few words; undefined when it carries all of it.
 */
export function restLoss(m: Message): string | undefined {
  if (m.cc.length > 0 || m.bcc.length > 0)
    return m.bcc.length > 0 && m.cc.length === 0 ? "bcc" : m.cc.length > 0 && m.bcc.length === 0 ? "cc" : "cc/bcc";
  if (m.attachments.some((a) => a.cid !== undefined)) return "inline images";
  // Latin-1 bytes in a message that says UTF-8 (or nothing): REST would get U+FFFD for them.
  if (m.undecodable) return "bytes its charset does not explain (REST would get \uFFFD for them)";
  if (m.attachments.some((a) => type(a.contentType) === "message/rfc822")) return "an attached message";
  if (m.attachments.some((a) => type(a.contentType) === "text/calendar")) return "a calendar part";
  // REST has only html: a text body would arrive as <pre> HTML, a text part next to HTML not at all.
  if (m.text !== undefined && m.html === undefined)
    return m.attachments.length === 0
      ? "a text-only body"
      : `a plain-text body without HTML, beside ${attachmentCount(m.attachments.length)}`;
  // A message from another program with no body at all (only a header): REST would have to make up an HTML one.
  if (m.raw && m.html === undefined) return "no body (REST needs an HTML one)";
  if (m.text !== undefined && !m.textIsPlainHtml) return "a text part";
  const seen = new Set<string>();
  for (const [name] of m.headers) {
    const k = name.toLowerCase();
    if (seen.has(k)) return `header ${name} given more than once`;
    seen.add(k);
  }
  return undefined;
}

const attachmentCount = (n: number) => (n === 1 ? "an attachment" : `${n} attachments`);

/**
 * Why a message REST would carry is better sent by SMTP when both are configured: not a loss that
 * REST alone must refuse (the service's own Message-ID is a good one), but a raw message's own
 * Message-ID is kept by SMTP. Undefined when there is no such reason.
 */
export function smtpPreference(m: Message): string | undefined {
  if (m.raw && m.ownMessageId) return "its own Message-ID (REST would replace it, and replies to it would not thread)";
  // A Markdown source beside its rendering: SMTP sends both, REST the rendering, which says it all.
  if (m.textIsPlainHtml && m.text !== undefined && m.html !== undefined) return "a text part (the Markdown source)";
  return undefined;
}

/**
 * The transport for `--transport auto`. With both channels: REST unless it
 * would lose something, then SMTP. With one: that one, unless it is REST and
 * REST would lose something (an error that says what and how to fix it).
 */
export function chooseTransport(m: Message, channels: Channels): TransportChoice {
  const loss = restLoss(m);
  if (channels.rest && channels.smtp) {
    if (loss !== undefined) return { transport: "smtp", reason: loss };
    const preference = smtpPreference(m);
    if (preference !== undefined) return { transport: "smtp", reason: preference };
    return { transport: "rest", reason: "REST carries the whole message" };
  }
  if (channels.smtp) return { transport: "smtp", reason: loss ?? "only SMTP is configured" };
  if (channels.rest) {
    if (loss === undefined) return { transport: "rest", reason: "only REST is configured" };
    throw new MailsendError(
      "config_missing",
      (s) =>
        `${s.value("transport", "auto")}: this message needs SMTP (${loss}: the REST send request cannot carry it), but no SMTP host is configured`,
      {
        hint:
          loss === "inline images"
            ? (s) =>
                `Set ${s.either("smtpHost", " or ")}, or send the images as links or plain attachments instead (${s.flag("noEmbed")}). Nothing was sent.`
            : (s) =>
                `Set ${s.either("smtpHost", " or ")} (the sandbox prints its own), or change the message. Nothing was sent.`,
      },
    );
  }
  throw noChannelError();
}
