/**
 * What `sendmail` does to a message before it is handed on, as a local MTA
 * would: read it (a lone "." ends it unless -i), add the Date, Message-ID and
 * From it lacks, map local names (root, a user) through the aliases file in
 * the address headers, take the recipients (-t: To, Cc, Bcc, plus the
 * arguments), and remove Bcc from what is sent. Everything else stays byte
 * for byte. Bad input is refused here, before anything is queued.
 */
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const randomBytes = (n: number) => process.getBuiltinModule("node:crypto").randomBytes(n);
import { isUtf8 } from "node:buffer";
import { hostname } from "node:os";
import { formatMailbox, parseAddressList, parseMailbox1, type Mailbox } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import { DROPPED_ON_SEND } from "../core/headers.js";
import { MAX_RECIPIENTS } from "../core/message.js";
import { tooLarge } from "../core/size.js";
import type { Envelope } from "../core/envelope.js";
import { atThisMachine, expandLocal, isLocalName, type AliasTable } from "./aliases.js";
import { binaryKind } from "../core/binary.js";

export { DEFAULT_MAX_SIZE, maxMessageSize } from "../core/size.js";

/**
 * Read the message from stdin. Without -i a line holding only "." ends it
 * (the rest of the input is not read), as sendmail does; reading also stops
 * as soon as the size limit is passed.
 */
export async function readSendmailInput(
  stdin: NodeJS.ReadableStream,
  opts: { ignoreDots: boolean; maxSize: number },
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  let buf: Buffer = Buffer.alloc(0);
  let scanned = 0;
  for await (const chunk of stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    if (opts.ignoreDots) {
      chunks.push(b);
      total += b.length;
      if (total > opts.maxSize) throw tooLarge(opts.maxSize);
      continue;
    }
    buf = buf.length === 0 ? b : Buffer.concat([buf, b]);
    const end = dotLine(buf, scanned);
    if (end >= 0) {
      (stdin as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
      buf = buf.subarray(0, end);
      if (buf.length > opts.maxSize) throw tooLarge(opts.maxSize);
      return buf;
    }
    scanned = Math.max(0, buf.length - 3);
    if (buf.length > opts.maxSize) throw tooLarge(opts.maxSize);
  }
  if (opts.ignoreDots) return Buffer.concat(chunks);
  // A last line "." without its newline ends the message too.
  if (buf.length === 1 && buf[0] === 0x2e) return Buffer.alloc(0);
  if (buf.length >= 2 && buf[buf.length - 1] === 0x2e && buf[buf.length - 2] === 0x0a)
    return buf.subarray(0, buf.length - 1);
  return buf;
}

/** Offset where a line holding only "." starts (the message ends before it), or -1. */
function dotLine(buf: Buffer, from: number): number {
  for (let i = from; i < buf.length; i++) {
    if (buf[i] !== 0x2e || (i > 0 && buf[i - 1] !== 0x0a)) continue;
    const n = buf[i + 1];
    if (n === 0x0a || (n === 0x0d && buf[i + 2] === 0x0a)) return i;
  }
  return -1;
}

interface HeaderField {
  name: string;
  /** The whole field as bytes (latin1 text), folded lines and line ends included. */
  text: string;
}

interface Split {
  fields: HeaderField[];
  /** Bytes after the header section, the blank line included when there was one. */
  rest: Buffer;
  eol: string;
  hadHeader: boolean;
}

const FIELD = /^([\x21-\x39\x3B-\x7E]+)[ \t]*:/;

/** The header section as fields; a message without one is all body. */
function splitMessage(raw: Buffer): Split {
  let text = raw.toString("latin1");
  // An mbox "From " line before the header (some programs write one) is not a header.
  if (text.startsWith("From ")) {
    const nl = text.indexOf("\n");
    text = nl < 0 ? "" : text.slice(nl + 1);
  }
  const eol = /^[^\n]*\r\n/.test(text) ? "\r\n" : "\n";
  const fields: HeaderField[] = [];
  let pos = 0;
  while (pos < text.length) {
    const nl = text.indexOf("\n", pos);
    const lineEnd = nl < 0 ? text.length : nl + 1;
    const line = text.slice(pos, lineEnd);
    if (line === "\n" || line === "\r\n") break;
    if ((line.startsWith(" ") || line.startsWith("\t")) && fields.length > 0) {
      fields[fields.length - 1]!.text += line;
      pos = lineEnd;
      continue;
    }
    const m = FIELD.exec(line);
    if (!m) break;
    fields.push({ name: m[1]!.toLowerCase(), text: line });
    pos = lineEnd;
  }
  // A header at the very end without its line end gets one, so nothing added joins it.
  const last = fields[fields.length - 1];
  if (last && !last.text.endsWith("\n")) last.text += eol;
  const rest = Buffer.from(text.slice(pos), "latin1");
  return { fields, rest, eol, hadHeader: fields.length > 0 };
}

function fieldValue(f: HeaderField): string {
  const colon = f.text.indexOf(":");
  return f.text
    .slice(colon + 1)
    .replace(/\r?\n([ \t])/g, "$1")
    .replace(/\r?\n$/, "")
    .trim();
}

/** latin1 text of a header back to the characters it holds (UTF-8 in headers, RFC 6532). */
function decodeText(s: string): string {
  return Buffer.from(s, "latin1").toString("utf8");
}

function encodeText(s: string): string {
  return Buffer.from(s, "utf8").toString("latin1");
}

/** Split an address list at commas outside quotes, comments and angle brackets. */
function splitList(value: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  let comment = 0;
  let angle = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (c === "\\" && (quoted || comment > 0)) {
      cur += c + (value[i + 1] ?? "");
      i++;
      continue;
    }
    if (!quoted && c === "(") comment++;
    else if (!quoted && c === ")" && comment > 0) comment--;
    else if (comment === 0 && c === '"') quoted = !quoted;
    else if (!quoted && comment === 0 && c === "<") angle++;
    else if (!quoted && comment === 0 && c === ">") angle = Math.max(0, angle - 1);
    if (c === "," && !quoted && comment === 0 && angle === 0) {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  out.push(cur);
  return out;
}

function withoutComments(s: string): string {
  let out = "";
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "\\" && (quoted || depth > 0)) {
      if (depth === 0) out += c + (s[i + 1] ?? "");
      i++;
      continue;
    }
    if (!quoted && c === "(") depth++;
    else if (!quoted && c === ")" && depth > 0) depth--;
    else if (depth === 0) {
      if (c === '"') quoted = !quoted;
      out += c;
    }
  }
  return out;
}

/** A user name, alone or at a host name (isLocalName says whether that host is this machine). */
/** The header fields whose local names are mapped through the aliases (lower case). */
const ADDRESS_FIELDS: readonly string[] = [
  "from",
  "sender",
  "reply-to",
  "to",
  "cc",
  "bcc",
  "resent-to",
  "resent-cc",
  "resent-bcc",
];
/**
 * Sender and Reply-To: a local name in them (one at this machine, or a bare name the aliases file
 * lists) becomes its alias when that is one address; else it is left out (and the field with it
 * when nothing is left): replies then go to From, and the message is not refused for a field that
 * only advises. Without an aliases file, or for a bare word the file does not list (`Doe` of an
 * unquoted `Doe, John <j@example.org>`, taken by `default:` elsewhere), they are left as written,
 * and a malformed one is refused as before.
 */
const ADVISORY_FIELDS: readonly string[] = ["sender", "reply-to"];
const LOCAL_NAME = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~.]+(?:@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)?$/i;

export interface Rewrite {
  /** The list as it is to be written (local names replaced). */
  value: string;
  changed: boolean;
  /** Empty groups such as "undisclosed-recipients:;" that were left out. */
  droppedGroups: string[];
  /** Local names left out because the mapping gave them no address (Sender, Reply-To). */
  dropped: string[];
}

/**
 * Replace the local names of an address list (`root`, `Cron <root>`,
 * `root (Cron Daemon)`) by what `map` gives; everything else is kept as
 * written, for the strict parser to judge. An empty group
 * (`undisclosed-recipients:;`, which mail programs write when there are only
 * Bcc recipients) holds no address and is left out.
 */
export function rewriteLocalNames(
  value: string,
  map: (local: string) => string[],
  isLocal: (address: string) => boolean = isLocalName,
): Rewrite {
  const parts: string[] = [];
  const droppedGroups: string[] = [];
  const dropped: string[] = [];
  let changed = false;
  for (const element of splitList(value)) {
    const trimmed = element.trim();
    if (trimmed === "") {
      parts.push(element);
      continue;
    }
    const bare = withoutComments(trimmed).trim();
    if (/^[^<>"@,:;]*:\s*;$/.test(bare)) {
      droppedGroups.push(trimmed);
      changed = true;
      continue;
    }
    const angle = /^(.*)<([^<>]*)>(.*)$/s.exec(trimmed);
    if (angle) {
      const inner = angle[2]!.trim();
      if (inner !== "" && LOCAL_NAME.test(inner) && isLocal(inner)) {
        const [first, ...more] = map(inner);
        if (first === undefined) dropped.push(inner);
        else parts.push([`${angle[1]!.trimEnd()} <${first}>${angle[3]}`.trim(), ...more].join(", "));
        changed = true;
        continue;
      }
      parts.push(trimmed);
      continue;
    }
    if (LOCAL_NAME.test(bare) && isLocal(bare)) {
      // The comment (`root (Cron Daemon)`) stays beside the address, as a name.
      const comment = trimmed.slice(trimmed.indexOf(bare) + bare.length).trim();
      const targets = map(bare);
      if (targets.length === 0) dropped.push(bare);
      parts.push(targets.map((t, i) => (i === 0 && comment ? `${t} ${comment}` : t)).join(", "));
      changed = true;
      continue;
    }
    parts.push(trimmed);
  }
  return {
    value: parts
      .map((p) => p.trim())
      .filter((p) => p !== "")
      .join(", "),
    changed,
    droppedGroups,
    dropped,
  };
}

/**
 * The one address a local sender name stands for: its alias when that is one address, else
 * `fallback`'s (the -f sender, the configured one). A name with no alias and no fallback throws.
 */
function oneSender(local: string, mapLocal: (local: string) => string[], fallback: () => string | undefined): string[] {
  let targets: string[] | undefined;
  try {
    targets = mapLocal(local);
  } catch (e) {
    if (!fallback()) throw e;
  }
  if (targets && targets.length === 1) return targets;
  const other = fallback();
  if (other) return [other];
  throw new MailsendError(
    "invalid_address",
    `the local sender name "${local}" maps to ${targets?.length ?? 0} addresses in the aliases file; a sender is one address`,
    {
      hint: "Give the sender with -f <address>, or set MAILSEND_FROM (or the profile's from).",
    },
  );
}

/**
 * The address fields (ADDRESS_FIELDS) with their local names mapped, each change noted: To, Cc
 * and Bcc through the aliases (`mapLocal`), From to one address (`mapFrom`: its alias when that is
 * one address, else the sender's), Sender and Reply-To as ADVISORY_FIELDS says. A field left
 * holding only empty groups is left out. Other fields stay as they were.
 */
function mapAddressFields(
  fields: HeaderField[],
  eol: string,
  mapLocal: (local: string) => string[],
  mapFrom: (local: string) => string[],
  isLocal: (address: string) => boolean,
  aliases: AliasTable | undefined,
  notes: string[],
): HeaderField[] {
  const out: HeaderField[] = [];
  const advisoryLocal = (address: string) =>
    aliases !== undefined && isLocal(address) && (address.includes("@") || aliases.entries.has(address.toLowerCase()));
  // oneSender with no fallback: its alias when that is one address, else none.
  const oneOrNone = (local: string): string[] => {
    try {
      return oneSender(local, mapLocal, () => undefined);
    } catch {
      return [];
    }
  };
  for (const f of fields) {
    if (!ADDRESS_FIELDS.includes(f.name)) {
      out.push(f);
      continue;
    }
    // UTF-8 (RFC 6532) is read as characters; other 8-bit bytes (a Latin-1 name) are kept as they were.
    const written = fieldValue(f);
    const utf8 = isUtf8(Buffer.from(written, "latin1"));
    const value = utf8 ? decodeText(written) : written;
    const fieldName = f.text.slice(0, f.text.indexOf(":")).trim();
    const advisory = ADVISORY_FIELDS.includes(f.name);
    const r = rewriteLocalNames(
      value,
      f.name === "from" ? mapFrom : advisory ? oneOrNone : mapLocal,
      advisory ? advisoryLocal : isLocal,
    );
    if (!r.changed) {
      out.push(f);
      continue;
    }
    for (const g of r.droppedGroups) notes.push(`${fieldName}: left out the empty group ${g}`);
    for (const local of r.dropped)
      notes.push(`${fieldName}: left out ${local} (a local name that is not one address in the aliases file)`);
    if (r.value === "") continue;
    notes.push(`${fieldName}: ${value} -> ${r.value}`);
    out.push({ name: f.name, text: foldList(fieldName, utf8 ? encodeText(r.value) : r.value, eol) });
  }
  return out;
}

/**
 * `Name: a, b, c` folded after commas so that no line passes 78 characters where it can help it
 * (RFC 5322 2.1.1), each mailbox once (several local names mapped to one address).
 */
function foldList(name: string, value: string, eol: string): string {
  const seen = new Set<string>();
  let inGroup = false;
  const items = splitList(value)
    .map((p) => p.trim())
    .filter((p) => {
      if (p === "") return false;
      // Group members (`Team: a@x, b@y;`) are kept as written: only mailboxes outside groups merge.
      const bare = withoutComments(p).replace(/"(?:[^"\\]|\\.)*"/g, '""');
      const opens = !inGroup && bare.includes(":");
      const grouped = inGroup || opens;
      if (opens) inGroup = true;
      if (inGroup && bare.trimEnd().endsWith(";")) inGroup = false;
      if (grouped) return true;
      const key = p.toLowerCase();
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  let line = `${name}:`;
  let text = "";
  items.forEach((item, i) => {
    const piece = ` ${item}${i < items.length - 1 ? "," : ""}`;
    if (line.length + piece.length > 78 && line.trim() !== `${name}:`) {
      text += line + eol;
      line = "";
    }
    line += piece;
  });
  return `${text}${line}${eol}`;
}

/**
 * What the relay (SMTP) does with local names, as sendmail does with piped mail: a recipient
 * `root@localhost` (or at this machine's name), a sender `root@localhost`, and the same names in
 * From, To and Cc become what the aliases file maps them to; a local sender (the envelope's, From)
 * with no single alias becomes the configured sender. Sender and Reply-To: see ADVISORY_FIELDS. A
 * message and envelope without local names come back as they were, byte for byte. Throws
 * (invalid_address, config_missing) for a local name nothing maps.
 */
export function mapRelayedLocalNames(
  raw: Buffer,
  envelope: Envelope,
  opts: { aliases?: AliasTable; defaultFrom?: string },
): { raw: Buffer; envelope: Envelope; notes: string[] } {
  const isLocal = (address: string) => relayLocal(address, opts.aliases);
  const mapLocal = (local: string) => expandLocal(opts.aliases, local);
  const notes: string[] = [];
  const defaultFrom = () => (opts.defaultFrom ? parseMailbox1(opts.defaultFrom, "MAILSEND_FROM").address : undefined);
  let from = envelope.from;
  if (from !== "" && isLocal(from)) {
    from = oneSender(from, mapLocal, defaultFrom)[0]!;
    notes.push(`sender <${envelope.from}> is <${from}>`);
  }
  const seen = new Set<string>();
  const to: string[] = [];
  for (const rcpt of envelope.to) {
    const targets = isLocal(rcpt) ? mapLocal(rcpt) : [rcpt];
    if (targets.length !== 1 || targets[0] !== rcpt)
      notes.push(`recipient <${rcpt}> is ${targets.map((t) => `<${t}>`).join(", ")}`);
    for (const t of targets) {
      if (seen.has(t.toLowerCase())) continue;
      seen.add(t.toLowerCase());
      to.push(t);
    }
  }
  const mapped = { from, to };
  const split = splitMessage(raw);
  if (
    !split.hadHeader ||
    raw.subarray(0, 5).toString("latin1") === "From " ||
    !headerAddresses(split.fields).some(isLocal)
  )
    return { raw, envelope: mapped, notes };
  const sender = () => (from !== "" && !isLocal(from) ? from : defaultFrom());
  const fields = mapAddressFields(
    split.fields,
    split.eol,
    mapLocal,
    (local) => oneSender(local, mapLocal, sender),
    isLocal,
    opts.aliases,
    notes,
  );
  return {
    raw: Buffer.concat([Buffer.from(fields.map((f) => f.text).join(""), "latin1"), split.rest]),
    envelope: mapped,
    notes,
  };
}

/** A local name as the relay takes one: a user name alone or at this machine (isLocalName). */
export function relayLocal(address: string, aliases: AliasTable | undefined): boolean {
  return LOCAL_NAME.test(address) && isLocalName(address, aliases);
}

/**
 * Whether the relay needs the aliases file for this message: an envelope address, or one in an
 * address field (ADDRESS_FIELDS), written at this machine (`at`: atThisMachine, or with
 * isLocalName those that are local whatever the file says). Most mail has none, and is then taken
 * without reading the file (a broken one never refuses it).
 */
export function mentionsThisMachine(
  raw: Buffer,
  envelope: Envelope,
  at: (address: string) => boolean = (a) => atThisMachine(a),
): boolean {
  if ((envelope.from !== "" && at(envelope.from)) || envelope.to.some((a) => at(a))) return true;
  return headerAddresses(splitMessage(raw).fields).some((a) => LOCAL_NAME.test(a) && at(a));
}

/** The addresses of the address fields (ADDRESS_FIELDS) as written (the part in <>, else the element without its comments). */
function headerAddresses(fields: HeaderField[]): string[] {
  return fields
    .filter((f) => ADDRESS_FIELDS.includes(f.name))
    .flatMap((f) =>
      splitList(decodeText(fieldValue(f))).map((e) => {
        const bare = withoutComments(e).trim();
        const angle = /<([^<>]*)>/.exec(bare);
        return (angle ? angle[1]! : bare).trim();
      }),
    )
    .filter((a) => a !== "");
}

/** RFC 5322 date-time in this machine's time zone. */
export function rfc5322Date(d: Date): string {
  const days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const p2 = (n: number) => String(n).padStart(2, "0");
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? "+" : "-";
  const abs = Math.abs(off);
  return `${days[d.getDay()]}, ${p2(d.getDate())} ${months[d.getMonth()]} ${d.getFullYear()} ${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())} ${sign}${p2(Math.floor(abs / 60))}${p2(abs % 60)}`;
}

/** A new Message-ID, on the sender's domain (else this machine's name). */
function newMessageId(sender: string | undefined): string {
  const domain = (sender?.includes("@") ? sender.split("@").pop() : "") || hostname() || "localhost";
  return `<${Date.now().toString(36)}.${randomBytes(8).toString("hex")}@${domain}>`;
}

/**
 * What an MTA adds to a message submitted without them (Postfix does for local clients): a Date
 * and a Message-ID, at the top of the header, the rest byte for byte. The relay's intake; the same
 * stamps sendmail's prepareLocalSubmission adds. A message that has both (or no header at all) is returned as
 * it is.
 */
export function addMissingStamps(
  raw: Buffer,
  sender: string | undefined,
  now = new Date(),
): { raw: Buffer; added: string[] } {
  const split = splitMessage(raw);
  if (!split.hadHeader || raw.subarray(0, 5).toString("latin1") === "From ") return { raw, added: [] };
  const lines: string[] = [];
  // As Postfix's cleanup does for local clients: From is the envelope sender (not the null sender <>).
  if (sender && !split.fields.some((f) => f.name === "from")) {
    try {
      lines.push(`From: ${parseMailbox1(sender, "the envelope sender").address}`);
    } catch {}
  }
  if (!split.fields.some((f) => f.name === "date")) lines.push(`Date: ${rfc5322Date(now)}`);
  if (!split.fields.some((f) => f.name === "message-id")) lines.push(`Message-ID: ${newMessageId(sender)}`);
  // Only a header, no blank line after it (RFC 5322 lets the body be absent): the line that ends it.
  const end = split.rest.length === 0 ? (raw[raw.length - 1] === 0x0a ? split.eol : split.eol + split.eol) : "";
  if (lines.length === 0 && end === "") return { raw, added: [] };
  // UTF-8: an SMTPUTF8 sender's address (jöran@example.com) in the From added; the rest is ASCII.
  return {
    raw: Buffer.concat([
      Buffer.from(lines.map((l) => l + split.eol).join(""), "utf8"),
      raw,
      Buffer.from(end, "latin1"),
    ]),
    added: lines,
  };
}

/**
 * Debian's cron adds `X-Cron-Env: <NAME=value>` to a job's mail for each variable its crontab
 * sets, so `MAILSEND_API_KEY=...` at the top of a crontab would be mailed to the recipients with
 * every job's output. The variable's name when it is mailsend's own (any MAILSEND_*), looks like
 * a secret (KEY, TOKEN, SECRET, PASSWORD, PASS, CREDENTIAL) or holds a URL with a password;
 * undefined for the others, which stay.
 */
export function cronSecret(value: string): string | undefined {
  const m = /^\s*<([^=>\s]+)=(.*)$/s.exec(value);
  if (!m) return undefined;
  const name = m[1]!;
  if (/^MAILSEND_|KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH/i.test(name)) return name;
  // A URL with a password in it (DATABASE_URL=postgres://app:pw@db/x), whatever the name.
  return /[a-z][a-z0-9+.-]*:\/\/[^/\s@:]*:[^/\s@]+@/i.test(m[2]!) ? name : undefined;
}

/** The header fields that name the recipients of a message sent on again (RFC 5322 3.6.6). */
const RESENT_RECIPIENTS: readonly string[] = ["resent-to", "resent-cc", "resent-bcc"];

/** What sendmail's command line and this machine's settings say of one local submission. */
export interface SubmissionInput {
  /** -f / -r. */
  envelopeFrom?: string;
  /** -F. */
  fullName?: string;
  /** -t. */
  readRecipients: boolean;
  /** Recipient arguments. */
  recipients: readonly string[];
  /** MAILSEND_FROM (or the profile's from): the sender when the message names none. */
  defaultFrom?: string;
  /** The user running sendmail: the sender, through the aliases file, when nothing else names one. */
  invokingUser?: string;
  aliases?: AliasTable;
  now?: Date;
}

/** The message to queue, its envelope, and what was changed. */
export interface LocalSubmission {
  raw: Buffer;
  envelope: Envelope;
  /** What was changed, for -v. */
  notes: string[];
  subject?: string;
  headerFrom?: string;
  /** A Message-ID was added here (the message had none). */
  stampedMessageId: boolean;
}

/**
 * A mailbox for a header this program writes: a name that is not ASCII as RFC 2047 encoded words
 * (`=?UTF-8?B?...?=`, each under 76 characters, whole characters in each), as a header without
 * SMTPUTF8 must carry it; an ASCII one quoted when it has specials (formatMailbox).
 */
export function headerMailbox(m: Mailbox, eol = "\r\n"): string {
  if (m.name === undefined || !/[^\x00-\x7f]/.test(m.name)) return formatMailbox(m);
  const words: string[] = [];
  let chunk = "";
  for (const ch of m.name) {
    // 39 bytes make 52 base64 characters: with "=?UTF-8?B?" and "?=", 64; after "From: " (or the
    // fold's space) a line stays within RFC 2047's 76 characters.
    if (Buffer.byteLength(chunk + ch) > 39) {
      words.push(chunk);
      chunk = "";
    }
    chunk += ch;
  }
  if (chunk) words.push(chunk);
  const encoded = words.map((w) => `=?UTF-8?B?${Buffer.from(w, "utf8").toString("base64")}?=`);
  // The address on the last word's line when that line stays within 76 characters, else on its own.
  const last = encoded[encoded.length - 1]!;
  const sep =
    (encoded.length === 1 ? "From: ".length : 1) + last.length + 2 + m.address.length + 2 > 76 ? `${eol} ` : " ";
  return `${encoded.join(`${eol} `)}${sep}<${m.address}>`;
}

function noHeaderNoBody(): MailsendError {
  return new MailsendError(
    "empty_input",
    "the message on stdin was empty (0 bytes): there is nothing to send, and nothing was queued",
    {
      hint: "The program that called sendmail wrote no message; check that it ran. A message is header lines (To:, Subject:), a blank line, then the body.",
    },
  );
}

function addressError(where: string, e: unknown): MailsendError {
  if (e instanceof MailsendError)
    return new MailsendError(
      "invalid_address",
      `${e.message.startsWith(where) ? "" : `${where}: `}${e.message}`,
      e.hint ? { hint: e.hint } : {},
    );
  return new MailsendError("invalid_address", `${where}: ${String(e)}`);
}

/** What the aliases say of local names, as the steps of a local submission use it. */
interface LocalNames {
  mapLocal: (local: string) => string[];
  isLocal: (address: string) => boolean;
}

/** The envelope sender -f gives: a local name through the aliases, else an address. */
function envelopeSender(given: string, local: LocalNames, notes: string[]): Mailbox {
  const trimmed = given.trim();
  if (local.isLocal(trimmed) && LOCAL_NAME.test(trimmed)) {
    const targets = local.mapLocal(trimmed);
    notes.push(`-f ${trimmed} is ${targets[0]} (aliases)`);
    return { address: targets[0]! };
  }
  try {
    return parseMailbox1(trimmed, "-f (the envelope sender)");
  } catch (e) {
    throw addressError("-f (the envelope sender)", e);
  }
}

/** The From to add to a message that has none: the -f sender, the configured one, or the user who ran sendmail. */
function senderToAdd(
  opts: SubmissionInput,
  envelopeFrom: Mailbox | undefined,
  local: LocalNames,
  notes: string[],
): Mailbox {
  let from: Mailbox | undefined = envelopeFrom;
  if (!from && opts.defaultFrom) {
    try {
      from = parseMailbox1(opts.defaultFrom, "MAILSEND_FROM");
    } catch (e) {
      throw new MailsendError(
        "config_invalid",
        `the default sender (MAILSEND_FROM or the profile's from) is not one address: ${(e as Error).message}`,
      );
    }
  }
  // As Postfix: the user who ran sendmail (atd's `sendmail -i root`, `mail` without -r), here
  // through the aliases file, the one place that says where a local user's mail goes.
  if (!from && opts.aliases && opts.invokingUser) {
    try {
      const targets = local.mapLocal(opts.invokingUser);
      if (targets.length === 1) {
        from = { address: targets[0]! };
        notes.push(`the sender is ${opts.invokingUser}, who ran sendmail: ${targets[0]} (aliases)`);
      }
    } catch {}
  }
  if (!from) {
    throw new MailsendError("config_missing", "the message has no From header and there is no sender to put in it", {
      hint: "Give it with -f <address> (and -F <name>), or set the default sender: MAILSEND_FROM, or mailsend config set from <address>.",
    });
  }
  // -F's line ends and control characters would end the header early: spaces instead.
  const fullName = opts.fullName?.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return fullName ? { name: fullName, address: from.address } : from;
}

/** The header's mailboxes of one field, parsed as the transports will parse them. */
function fieldMailboxes(fields: HeaderField[], name: string, label: string): Mailbox[] {
  try {
    // Empty list elements (`To: a@x.com,`) are read past, as RFC 5322 4.4 (obs-addr-list) says.
    return fields
      .filter((f) => f.name === name)
      .map((f) => decodeText(fieldValue(f)))
      .flatMap((v) => (v.trim() === "" ? [] : parseAddressList(v, label, true, "skip")));
  } catch (e) {
    throw addressError(label, e);
  }
}

/** From, Date and Message-ID where the message lacks them, as an MTA adds them for local clients. */
function stamps(
  fields: HeaderField[],
  opts: SubmissionInput,
  envelopeFrom: Mailbox | undefined,
  local: LocalNames,
  eol: string,
  notes: string[],
) {
  const added: HeaderField[] = [];
  let headerFrom: Mailbox | undefined;
  if (!fields.some((f) => f.name === "from")) {
    headerFrom = senderToAdd(opts, envelopeFrom, local, notes);
    added.push({ name: "from", text: `From: ${encodeText(headerMailbox(headerFrom, eol))}${eol}` });
    notes.push(`added From: ${formatMailbox(headerFrom)}`);
  } else {
    headerFrom = fieldMailboxes(fields, "from", "From")[0];
  }
  if (!fields.some((f) => f.name === "date")) {
    const date = rfc5322Date(opts.now ?? new Date());
    added.push({ name: "date", text: `Date: ${date}${eol}` });
    notes.push(`added Date: ${date}`);
  }
  if (!fields.some((f) => f.name === "message-id")) {
    const id = newMessageId(headerFrom?.address);
    added.push({ name: "message-id", text: `Message-ID: ${id}${eol}` });
    notes.push(`added Message-ID: ${id}`);
  }
  return { added, headerFrom };
}

/** The recipients: the arguments, and with -t those of the headers; each once, at least one, at most the service's limit. */
function recipientsOf(fields: HeaderField[], opts: SubmissionInput, local: LocalNames, notes: string[]): string[] {
  const rcpts: string[] = [];
  for (const arg of opts.recipients) {
    const r = rewriteLocalNames(arg, local.mapLocal, local.isLocal);
    if (r.changed) notes.push(`recipient ${arg} -> ${r.value}`);
    if (r.value === "") continue;
    try {
      rcpts.push(...parseAddressList(r.value, "recipient").map((m) => m.address));
    } catch (e) {
      throw addressError(`the recipient argument ${JSON.stringify(arg)}`, e);
    }
  }
  if (opts.readRecipients) rcpts.push(...headerRecipients(fields, notes));
  else {
    // Still check them: the transports parse these headers strictly.
    fieldMailboxes(fields, "to", "To");
    fieldMailboxes(fields, "cc", "Cc");
  }
  const seen = new Set<string>();
  const to = rcpts.filter((a) => {
    const k = a.toLowerCase();
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  checkRecipientCount(to, opts.readRecipients);
  return to;
}

/**
 * -t: the recipients of the header. A message sent on again (bounced, forwarded as is) names its
 * new recipients in Resent-To, Resent-Cc and Resent-Bcc: with those present they are the
 * recipients, not To/Cc/Bcc (as Postfix's cleanup and sendmail 8 take them).
 */
function headerRecipients(fields: HeaderField[], notes: string[]): string[] {
  const resent = fields.some((f) => RESENT_RECIPIENTS.includes(f.name));
  const names = resent
    ? ([
        ["resent-to", "Resent-To"],
        ["resent-cc", "Resent-Cc"],
        ["resent-bcc", "Resent-Bcc"],
      ] as const)
    : ([
        ["to", "To"],
        ["cc", "Cc"],
        ["bcc", "Bcc"],
      ] as const);
  if (resent)
    notes.push(
      "the recipients are those of Resent-To, Resent-Cc and Resent-Bcc (a message sent on again), not To, Cc and Bcc",
    );
  return names.flatMap(([name, label]) => fieldMailboxes(fields, name, label).map((m) => m.address));
}

/** At least one recipient, at most the service's limit: nothing is queued otherwise. */
function checkRecipientCount(to: string[], readRecipients: boolean): void {
  if (to.length === 0) {
    throw new MailsendError(
      "usage",
      readRecipients
        ? "no recipient addresses found in the message header (To, Cc, Bcc) nor as arguments; nothing was queued"
        : "no recipients: give them as arguments, or use -t to read them from the To, Cc and Bcc headers; nothing was queued",
      { hint: "For example: sendmail -t < message.eml, or sendmail ops@example.com < message.eml" },
    );
  }
  // As too large a message: what the service would refuse in part, after the caller was told it was taken.
  if (to.length > MAX_RECIPIENTS) {
    throw new MailsendError(
      "invalid_message",
      `${to.length} recipients: the service takes at most ${MAX_RECIPIENTS} per message; nothing was queued`,
      {
        hint: `Send it in parts of ${MAX_RECIPIENTS} recipients or fewer.`,
      },
    );
  }
}

/** A binary file (an image, an archive) piped in without a header is no message: refused, not mailed as text. */
function checkNotBinary(input: Buffer): void {
  const binary = binaryKind(input);
  if (binary !== undefined) {
    throw new MailsendError(
      "invalid_message",
      `the input is ${binary} without a message header, not a mail message; nothing was queued`,
      {
        hint: "sendmail reads one RFC 5322 message: header lines (From:, To:, Subject:), a blank line, then the body. To mail a file, attach it: mailsend send --attach <file>.",
      },
    );
  }
}

/**
 * Turn what a program piped into sendmail into the message to send and its
 * envelope, by sendmail's rules for a local submission: local names through
 * the aliases, the sender and stamps an MTA adds, the recipients of the
 * arguments or (-t) of the header. Throws a MailsendError (64/65/66/78) for
 * input that cannot be sent; nothing is queued then.
 */
export function prepareLocalSubmission(input: Buffer, opts: SubmissionInput): LocalSubmission {
  if (input.length === 0 || (input.length < 64 * 1024 && input.toString("latin1").trim() === "")) {
    throw noHeaderNoBody();
  }
  const split = splitMessage(input);
  if (!split.hadHeader) checkNotBinary(input);
  const notes: string[] = [];
  const { eol } = split;
  const local: LocalNames = {
    mapLocal: (name: string) => expandLocal(opts.aliases, name),
    isLocal: (address: string) => isLocalName(address, opts.aliases),
  };

  // The sender: -f, else the message's From, else the configured default.
  const envelopeFrom = opts.envelopeFrom !== undefined ? envelopeSender(opts.envelopeFrom, local, notes) : undefined;

  // A local sender (`From: root`) is one mailbox: its alias when that is one address, else the -f
  // sender or the configured one.
  const senderFallback = () =>
    envelopeFrom?.address ?? (opts.defaultFrom ? parseMailbox1(opts.defaultFrom, "MAILSEND_FROM").address : undefined);
  const rewritten = mapAddressFields(
    split.fields,
    eol,
    local.mapLocal,
    (name) => oneSender(name, local.mapLocal, senderFallback),
    local.isLocal,
    opts.aliases,
    notes,
  );
  const fields = withoutCronSecrets(rewritten, notes);

  const { added, headerFrom } = stamps(fields, opts, envelopeFrom, local, eol, notes);
  const to = recipientsOf(fields, opts, local, notes);

  const { raw, kept } = travelling(split, fields, added, notes);
  const subjectField = kept.find((f) => f.name === "subject");

  return {
    raw,
    envelope: { from: (envelopeFrom ?? headerFrom)!.address, to },
    notes,
    ...(subjectField ? { subject: decodeText(fieldValue(subjectField)) } : {}),
    ...(headerFrom ? { headerFrom: formatMailbox(headerFrom) } : {}),
    stampedMessageId: added.some((f) => f.name === "message-id"),
  };
}

/** cron copies the crontab's variables into its mail (X-Cron-Env): those that hold a secret or mailsend's settings stay out. */
function withoutCronSecrets(fields: HeaderField[], notes: string[]): HeaderField[] {
  return fields.filter((f) => {
    const secret = f.name === "x-cron-env" ? cronSecret(fieldValue(f)) : undefined;
    if (secret !== undefined)
      notes.push(
        `X-Cron-Env: left out the one for ${secret} (cron copies the crontab's variables into its mail; that one holds a secret or mailsend's settings)`,
      );
    return secret === undefined;
  });
}

/** The message as it travels: the header without what never goes, the stamps added, then the body. */
function travelling(
  split: Split,
  fields: HeaderField[],
  added: HeaderField[],
  notes: string[],
): { raw: Buffer; kept: HeaderField[] } {
  // Bcc, Resent-Bcc, a saved message's Return-Path and Content-Length never travel (DROPPED_ON_SEND).
  for (const [name, label, why] of DROPPED_ON_SEND) {
    if (fields.some((f) => f.name === name)) notes.push(`removed ${label} from the message (${why})`);
  }
  const kept = fields.filter((f) => !DROPPED_ON_SEND.some(([name]) => f.name === name));
  const head = [...kept, ...added].map((f) => f.text).join("");
  // The blank line between header and body, where the input had none (no header, or a body right after it).
  const blank = split.rest[0] === 0x0a || (split.rest[0] === 0x0d && split.rest[1] === 0x0a);
  const raw = Buffer.concat([Buffer.from(head, "latin1"), Buffer.from(blank ? "" : split.eol, "latin1"), split.rest]);
  return { raw, kept };
}
