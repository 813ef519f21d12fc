// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
// node:crypto only when a key is made: it is slow to load (sendmail -bp and mailq need none).
const randomUUID = () => process.getBuiltinModule("node:crypto").randomUUID();
import type { Mailbox } from "../core/address.js";
import { parseAddressList } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import { checkHeaderName, checkSingleLine, DROPPED_ON_SEND, type HeaderList } from "../core/headers.js";
import type { Message } from "../core/message.js";
import type { Attachment, Email } from "postal-mime";

type ParsedHeader = { key: string; originalKey: string; value: string };

function invalid(source: string, why: string): never {
  throw new MailsendError("invalid_eml", `${source}: ${why}`, {
    hint: "Expected an RFC 5322 message: header lines (From:, To:, Subject:), a blank line, then the body.",
  });
}

/**
 * Every address of every `field` header line, through the same strict parser
 * as --to. postal-mime's own lists are lenient in ways that change who gets
 * the message: it keeps only the first of several From addresses (or From
 * lines) and turns `a@x.com <b@y.com>` into a name and an address. Display
 * names are then RFC 2047-decoded, and a decoded CR/LF is refused.
 */
function mailboxes(
  headers: ParsedHeader[],
  field: string,
  source: string,
  decodeWords: (s: string) => string,
): Mailbox[] {
  return headers
    .filter((h) => h.key === field.toLowerCase())
    .flatMap((h) => {
      if (h.value.trim() === "") return [];
      // A message's header: empty list elements are read past (RFC 5322 4.4, obs-addr-list).
      return parseAddressList(h.value, `${source} ${field}`, true, "skip").map((m) => {
        if (m.name === undefined) return m;
        const name = m.name.includes("=?") ? decodeWords(m.name) : m.name;
        checkSingleLine(name, `${source} ${field} display name`);
        return { name, address: m.address };
      });
    });
}

/** Byte offset just past the blank line that ends the header section, or -1. */
function headerEnd(raw: Buffer): number {
  const crlf = raw.indexOf("\r\n\r\n");
  const lf = raw.indexOf("\n\n");
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return crlf + 4;
  return lf >= 0 ? lf + 2 : -1;
}

/**
 * Remove every occurrence of a header field (with its folded continuation
 * lines) from the header section, leaving the rest byte for byte.
 */
export function stripHeader(raw: Buffer, name: string): Buffer {
  const end = headerEnd(raw);
  const head = (end < 0 ? raw : raw.subarray(0, end)).toString("latin1");
  const lines = head.split(/(?<=\n)/);
  const prefix = `${name.toLowerCase()}:`;
  const kept: string[] = [];
  let dropping = false;
  for (const line of lines) {
    if (dropping && (line.startsWith(" ") || line.startsWith("\t"))) continue;
    dropping = line
      .toLowerCase()
      .replace(/^([^:\s]+)\s+:/, "$1:")
      .startsWith(prefix);
    if (!dropping) kept.push(line);
  }
  const newHead = Buffer.from(kept.join(""), "latin1");
  return end < 0 ? newHead : Buffer.concat([newHead, raw.subarray(end)]);
}

/**
 * Headers of a message that its REST request does not take as custom headers: those the request
 * carries as its own fields (From, To, Cc, Bcc, Subject, Reply-To, Sender), the MIME structure
 * (MIME-Version, Content-*: the service builds its own), what the service stamps on every message
 * itself (Date, Message-ID), trace lines that hops add (Received, Return-Path, Delivered-To,
 * Resent-*), signatures that the service's new encoding of the message would break (DKIM-Signature,
 * ARC-*, Authentication-Results), and X-Idempotency-Key (the request's Idempotency-Key header).
 * Over SMTP the message goes as it is, with all of them but DROPPED_ON_SEND (core/headers.ts).
 */
const NOT_CARRIED =
  /^(?:from|to|cc|bcc|subject|reply-to|sender|mime-version|content-[^:]*|date|message-id|received|return-path|delivered-to|resent-[^:]*|dkim-signature|arc-[^:]*|authentication-results|x-idempotency-key)$/i;

/**
 * Whether decoding made U+FFFD of bytes it could not read: the decoded texts hold more of it than
 * the raw message does as UTF-8 bytes, quoted-printable or an encoded word's escapes (a message
 * that really carries U+FFFD, base64-encoded, is counted as made: it then goes by SMTP, which loses
 * nothing).
 */
function replacementsAdded(raw: Buffer, decoded: readonly string[]): boolean {
  let made = 0;
  for (const text of decoded) for (let i = text.indexOf("\uFFFD"); i >= 0; i = text.indexOf("\uFFFD", i + 1)) made++;
  if (made === 0) return false;
  const latin = raw.toString("latin1");
  const had = (latin.match(/\xEF\xBF\xBD|=EF=BF=BD/gi) ?? []).length;
  return made > had;
}

/** The message parsed (postal-mime, loaded now), once it looks like one: a header line first, and a blank line after the headers. */
async function parseEml(raw: Buffer, source: string): Promise<{ email: Email; decodeWords: (s: string) => string }> {
  const firstLine = raw.subarray(0, Math.min(raw.length, 1000)).toString("latin1").split(/\r?\n/)[0] ?? "";
  if (!/^[\x21-\x39\x3B-\x7E]+:/.test(firstLine)) invalid(source, "does not start with a header line");
  if (headerEnd(raw) < 0) invalid(source, "no blank line between the headers and the body");
  const { default: PostalMime, decodeWords } = await loadParser();
  try {
    // A forwarded message stays an attachment (not merged into the body), so
    // transports/choose.ts can see it: REST cannot carry it as it is.
    return {
      email: await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer", rfc822Attachments: true }),
      decodeWords,
    };
  } catch (e) {
    invalid(source, `cannot be parsed (${(e as Error).message})`);
  }
}

/**
 * The headers that travel as `headers` over REST (In-Reply-To, References, List-Unsubscribe,
 * Auto-Submitted, X-..., as `send --header` would carry them); see NOT_CARRIED for what does not.
 */
function carriedHeaders(parsed: ParsedHeader[], source: string): HeaderList {
  const headers: HeaderList = [];
  for (const h of parsed) {
    if (NOT_CARRIED.test(h.key)) continue;
    checkHeaderName(h.originalKey, `${source} header`);
    checkSingleLine(h.value, `${source} header ${h.originalKey}`);
    headers.push([h.originalKey, h.value]);
  }
  return headers;
}

function attachmentsOf(parsed: Attachment[], source: string): Message["attachments"] {
  return parsed.map((a, i) => {
    const data = a.content;
    const bytes =
      typeof data === "string"
        ? Buffer.from(data, "utf8")
        : Buffer.from(data instanceof Uint8Array ? data : new Uint8Array(data));
    const filename = a.filename ?? `attachment-${i + 1}`;
    checkSingleLine(filename, `${source} attachment file name`);
    // An inline part of a multipart/related (an image the HTML shows as cid:): over SMTP the raw message carries it.
    const cid = a.related && a.contentId ? a.contentId.replace(/^<|>$/g, "") : undefined;
    return {
      filename,
      source: { kind: "bytes" as const, data: bytes },
      contentType: a.mimeType,
      ...(cid ? { cid } : {}),
    };
  });
}

/**
 * The raw message as it is sent over SMTP, and its idempotency key: the file's own
 * X-Idempotency-Key, unless --idempotency-key replaces it, else a fresh one. The raw message
 * carries the key like any other SMTP message, and none of DROPPED_ON_SEND.
 */
function rawToSend(
  raw: Buffer,
  parsed: ParsedHeader[],
  source: string,
  idempotencyKey: string | undefined,
): { key: string; out: Buffer } {
  const inFile = parsed.find((h) => h.key === "x-idempotency-key")?.value.trim() || undefined;
  if (inFile !== undefined && !/^[\x21-\x7E]{1,255}$/.test(inFile)) {
    invalid(source, "X-Idempotency-Key must be 1 to 255 printable ASCII characters without spaces");
  }
  const key = idempotencyKey ?? inFile ?? randomUUID();
  // A message saved from a mailbox (`sendmail -t < saved.eml`) has some of them.
  let out = raw;
  for (const [name] of DROPPED_ON_SEND) out = stripHeader(out, name);
  if (key !== inFile) {
    const eol = /^[^\n]*\r\n/.test(raw.subarray(0, 1000).toString("latin1")) ? "\r\n" : "\n";
    out = Buffer.concat([Buffer.from(`X-Idempotency-Key: ${key}${eol}`), stripHeader(out, "x-idempotency-key")]);
  }
  return { key, out };
}

/** Turn an .eml into a Message. Over SMTP the raw bytes (without DROPPED_ON_SEND) are what is sent. */
export async function messageFromEml(
  raw: Buffer,
  source: string,
  idempotencyKey?: string,
  opts: { envelopeRecipients?: boolean } = {},
): Promise<Message> {
  const { email, decodeWords } = await parseEml(raw, source);
  const fromList = mailboxes(email.headers, "From", source, decodeWords);
  if (fromList.length !== 1) invalid(source, `needs exactly one From address, found ${fromList.length}`);
  const to = mailboxes(email.headers, "To", source, decodeWords);
  const cc = mailboxes(email.headers, "Cc", source, decodeWords);
  const bcc = mailboxes(email.headers, "Bcc", source, decodeWords);
  // Mail from sendmail or the relay has its recipients in the envelope; the headers may name none.
  if (to.length + cc.length + bcc.length === 0 && !opts.envelopeRecipients)
    invalid(source, "has no recipients (To, Cc or Bcc)");
  const replyTo = mailboxes(email.headers, "Reply-To", source, decodeWords);
  if (replyTo.length > 1) invalid(source, "more than one Reply-To address is not supported");
  const subject = email.subject ?? "";
  checkSingleLine(subject, `${source} Subject`);
  const headers = carriedHeaders(email.headers, source);
  const attachments = attachmentsOf(email.attachments, source);
  const { key, out } = rawToSend(raw, email.headers, source, idempotencyKey);

  const decoded = [
    subject,
    email.html ?? "",
    email.text ?? "",
    ...headers.map(([, v]) => v),
    ...[...fromList, ...to, ...cc, ...replyTo].map((m) => m.name ?? ""),
  ];
  return {
    from: fromList[0]!,
    to,
    cc,
    bcc,
    ...(replyTo[0] ? { replyTo: replyTo[0] } : {}),
    subject,
    ...(email.html ? { html: email.html } : {}),
    ...(email.text ? { text: email.text } : {}),
    attachments,
    headers,
    idempotencyKey: key,
    raw: out,
    ...(replacementsAdded(raw, decoded) ? { undecodable: true } : {}),
    ...(email.headers.some((h) => h.key === "message-id") ? { ownMessageId: true } : {}),
  };
}

/** The MIME parser (postal-mime), loaded when the first message is read. */
export function loadParser(): Promise<typeof import("postal-mime")> {
  return import("postal-mime");
}
