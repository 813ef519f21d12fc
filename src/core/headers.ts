import { MailsendError } from "./errors.js";

/** RFC 5322 field name: printable US-ASCII except ":". */
const FIELD_NAME = /^[\x21-\x39\x3B-\x7E]+$/;

/**
 * Headers a custom header may not set: the ones the send request already
 * carries as fields, and the MIME structure, which the service builds.
 */
const RESERVED = new Set([
  "from",
  "to",
  "cc",
  "bcc",
  "subject",
  "reply-to",
  "sender",
  "content-type",
  "content-transfer-encoding",
  "mime-version",
]);

export type HeaderList = Array<[name: string, value: string]>;

export function checkHeaderName(name: string, where = "header"): void {
  if (!FIELD_NAME.test(name)) {
    throw new MailsendError("invalid_header", `${where}: ${JSON.stringify(name)} is not a valid header name`, {
      hint: "Header names are printable ASCII without spaces or colons, e.g. X-Campaign.",
    });
  }
  if (RESERVED.has(name.toLowerCase())) {
    throw new MailsendError("invalid_header", `${where}: ${name} cannot be set as a custom header`, {
      hint: (s) =>
        `Use ${s.flag("from")}, ${s.flag("to")}, ${s.flag("cc")}, ${s.flag("bcc")}, ${s.flag("subject")} and ${s.flag("replyTo")} for those.`,
    });
  }
}

/** Any CR or LF in a single-line field is a header-injection attempt or a mistake. */
export function checkSingleLine(value: string, where: string): void {
  if (/[\r\n\u0000]/.test(value)) {
    throw new MailsendError("invalid_header", `${where} contains a line break or NUL character`, {
      hint: "Header values, subjects and names must be a single line.",
    });
  }
}

export function checkHeader(name: string, value: string): void {
  checkHeaderName(name);
  checkSingleLine(value, `header ${name}`);
}

/** Parse `Name: value` as given to --header. */
export function parseHeaderFlag(spec: string): [string, string] {
  const colon = spec.indexOf(":");
  if (colon <= 0) {
    throw new MailsendError("usage", (s) => `${s.flag("header")} ${JSON.stringify(spec)}: expected "Name: value"`);
  }
  const name = spec.slice(0, colon).trim();
  const value = spec.slice(colon + 1).trim();
  checkHeader(name, value);
  checkNotIdempotencyHeader(name, "--header");
  return [name, value];
}

/**
 * mailsend writes X-Idempotency-Key itself (SMTP); a second one given as a
 * custom header would leave the message with two different keys. The client
 * refuses it (the shared schema does not: the service may accept any header).
 */
export function checkNotIdempotencyHeader(name: string, where: string): void {
  if (name.toLowerCase() === "x-idempotency-key") {
    throw new MailsendError("usage", `${where}: X-Idempotency-Key is set by mailsend`, {
      hint: (s) => `Give the key with ${s.flag("idempotencyKey")} instead.`,
    });
  }
}

/**
 * What never travels in a message that is sent on (`sendmail`, the relay, `send --eml`), as
 * Postfix's cleanup drops it (message_drop_headers): each lower-case name, as it is written, and why.
 */
export const DROPPED_ON_SEND = [
  ["bcc", "Bcc", "its recipients are in the envelope"],
  ["resent-bcc", "Resent-Bcc", "its recipients are in the envelope"],
  // RFC 5321 4.4: an originating system should not send one; the delivering server writes its own.
  ["return-path", "Return-Path", "the delivering server writes its own"],
  // A saved mailbox's count, wrong once the message goes with CRLF and new fields.
  ["content-length", "Content-Length", "a saved mailbox's count, not the message's as sent"],
] as const;
