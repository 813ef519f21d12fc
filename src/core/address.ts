/**
 * RFC 5322 address lists (section 3.4), parsed strictly.
 *
 * A lenient parser "repairs" input such as `a@x.com <b@y.com>` into some
 * address the user did not write; for a mail sender that means a message to
 * the wrong people. So anything outside the grammar is an error here:
 * unquoted specials in a display name, source routes, empty list
 * elements, control characters. Comments are allowed and dropped. A group
 * (`Team: a@x.com, b@y.com;`) is in the grammar: it stands for its members
 * (its name labels the header, it is no address), and an empty one
 * (`undisclosed-recipients:;`) for nobody. A single mailbox (From) is never one.
 */
import { domainToASCII } from "node:url";
import { MailsendError } from "./errors.js";

export interface Mailbox {
  /** Display name, decoded (quotes and backslash escapes removed). */
  name?: string;
  /** The addr-spec: local-part@domain. */
  address: string;
}

type Token =
  | { kind: "atom"; text: string; ws: boolean }
  | { kind: "quoted"; text: string; raw: string; ws: boolean }
  | { kind: "literal"; raw: string; ws: boolean }
  | { kind: "special"; text: string; ws: boolean };

// atext of RFC 5322 plus any non-ASCII character (RFC 6532).
const ATEXT = /[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\uFFFF]/;
const CONTROL = /[\u0000-\u0008\u000A-\u001F\u007F]/;

const HINT = 'Write addresses as user@example.com or "Display Name" <user@example.com>, several separated by commas.';

function fail(field: string, input: string, why: string, hint = HINT): never {
  throw new MailsendError("invalid_address", `${field}: ${why} in ${JSON.stringify(input)}`, { hint });
}

/** Where the comment that opens at `i` ends: just past its ")" (comments nest, and a backslash escapes). */
function commentEnd(input: string, i: number, field: string): number {
  let depth = 0;
  for (; i < input.length; i++) {
    const d = input[i]!;
    if (d === "\\") i++;
    else if (d === "(") depth++;
    else if (d === ")" && --depth === 0) break;
  }
  if (depth !== 0) fail(field, input, "unclosed comment");
  return i + 1;
}

/** The quoted string that opens at `i`: its text without quotes and escapes, and the index of its closing quote. */
function quotedString(input: string, i: number, field: string): { text: string; close: number } {
  let text = "";
  let j = i + 1;
  for (; j < input.length; j++) {
    const d = input[j]!;
    if (d === "\\") {
      j++;
      if (j >= input.length) break;
      text += input[j];
    } else if (d === '"') break;
    else text += d;
  }
  if (j >= input.length) fail(field, input, "unclosed quoted string");
  return { text, close: j };
}

function tokenize(input: string, field: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  /** Whether white space or a comment came before the next token. */
  let ws = false;
  while (i < input.length) {
    const c = input[i]!;
    if (c === " " || c === "\t") {
      ws = true;
      i++;
      continue;
    }
    if (c === "(") {
      i = commentEnd(input, i, field);
      ws = true;
      continue;
    }
    let end: number;
    if (c === '"') {
      const { text, close } = quotedString(input, i, field);
      end = close + 1;
      tokens.push({ kind: "quoted", text, raw: input.slice(i, end), ws });
    } else if (c === "[") {
      const close = input.indexOf("]", i);
      if (close < 0) fail(field, input, "unclosed domain literal");
      end = close + 1;
      tokens.push({ kind: "literal", raw: input.slice(i, end), ws });
    } else if ("<>@,;:.".includes(c)) {
      end = i + 1;
      tokens.push({ kind: "special", text: c, ws });
    } else if (ATEXT.test(c)) {
      end = i;
      while (end < input.length && ATEXT.test(input[end]!)) end++;
      tokens.push({ kind: "atom", text: input.slice(i, end), ws });
    } else fail(field, input, `unexpected character ${JSON.stringify(c)}`);
    i = end;
    ws = false;
  }
  return tokens;
}

function splitTopLevel(tokens: Token[]): Token[][] {
  const parts: Token[][] = [[]];
  let inAngle = false;
  for (const t of tokens) {
    if (t.kind === "special" && t.text === "<") inAngle = true;
    if (t.kind === "special" && t.text === ">") inAngle = false;
    if (t.kind === "special" && t.text === "," && !inAngle) parts.push([]);
    else parts[parts.length - 1]!.push(t);
  }
  return parts;
}

function addrSpec(tokens: Token[], field: string, input: string): string {
  const at = tokens.findIndex((t) => t.kind === "special" && t.text === "@");
  if (at < 0) fail(field, input, "missing @");
  const local = tokens.slice(0, at);
  const domain = tokens.slice(at + 1);
  if (domain.some((t) => t.kind === "special" && t.text === "@")) fail(field, input, "more than one @");
  const localText = dotted(local, field, input, "local part");
  const only = domain.length === 1 ? domain[0] : undefined;
  const domainText = only?.kind === "literal" ? only.raw : dotted(domain, field, input, "domain");
  return `${localText}@${domainText}`;
}

/** atom *("." atom), where the local part may also be one quoted string. */
function dotted(tokens: Token[], field: string, input: string, what: string): string {
  if (tokens.length === 0) fail(field, input, `empty ${what}`);
  const first = tokens[0];
  if (tokens.length === 1 && first?.kind === "quoted" && what === "local part") {
    if (first.text.length === 0) fail(field, input, "empty local part");
    return first.raw;
  }
  let out = "";
  tokens.forEach((t, k) => {
    const wantAtom = k % 2 === 0;
    if (wantAtom && t.kind === "atom") out += t.text;
    else if (!wantAtom && t.kind === "special" && t.text === ".") out += ".";
    else fail(field, input, `malformed ${what}`);
  });
  if (tokens.length % 2 === 0) fail(field, input, `${what} ends with a dot`);
  return out;
}

/**
 * An internationalized domain as the DNS knows it (IDNA A-labels, "xn--"),
 * the same on both transports and in every header, when the local part is
 * ASCII. The local part is never changed: a non-ASCII one needs SMTPUTF8
 * (transports/smtp.ts).
 */
function asciiDomain(address: string, field: string, input: string): string {
  const at = address.lastIndexOf("@");
  const domain = address.slice(at + 1);
  // A non-ASCII local part needs SMTPUTF8 anyway, under which the domain may stay
  // as written (RFC 6531; nodemailer does the same): only an ASCII one makes it A-labels.
  if (!/[^\x00-\x7f]/.test(domain) || /[^\x00-\x7f]/.test(address.slice(0, at))) return address;
  const ascii = domainToASCII(domain);
  if (!ascii) fail(field, input, `domain "${domain}" is not a valid internationalized domain name`);
  return `${address.slice(0, at)}@${ascii}`;
}

const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;

function checkAddress(address: string, field: string, input: string): void {
  const at = address.lastIndexOf("@");
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (Buffer.byteLength(local) > 64) fail(field, input, "local part longer than 64 octets");
  if (Buffer.byteLength(address) > 254) fail(field, input, "address longer than 254 octets");
  if (domain.startsWith("[")) {
    const ip = domain.slice(1, -1);
    if (!/^(?:\d{1,3}\.){3}\d{1,3}$/.test(ip) && !/^IPv6:[0-9A-Fa-f:.]+$/.test(ip)) {
      fail(field, input, "malformed domain literal");
    }
    return;
  }
  const labels = domain.split(".");
  if (labels.length < 2) fail(field, input, `domain "${domain}" is not fully qualified`);
  for (const label of labels) if (!LABEL.test(label)) fail(field, input, `invalid domain label "${label}"`);
}

function displayName(tokens: Token[], field: string, input: string): string | undefined {
  let name = "";
  for (const t of tokens) {
    if (t.kind === "atom") name += (t.ws && name ? " " : "") + t.text;
    else if (t.kind === "quoted") name += (t.ws && name ? " " : "") + t.text;
    // obs-phrase: a "." inside a display name ("J. Doe") is common and harmless.
    else if (t.kind === "special" && t.text === "." && name) name += `${t.ws ? " " : ""}.`;
    else {
      const what = t.kind === "special" ? t.text : t.raw;
      fail(field, input, `"${what}" in a display name must be inside double quotes`);
    }
  }
  return name || undefined;
}

function parseMailbox(tokens: Token[], field: string, input: string): Mailbox {
  // `a@x.com; b@y.com` (Outlook's separator) is not a group: no ":" before the ";".
  if (
    tokens.some((t) => t.kind === "special" && t.text === ";") &&
    !tokens.some((t) => t.kind === "special" && t.text === ":")
  ) {
    const fixed = input
      .split(";")
      .map((p) => p.trim())
      .filter(Boolean)
      .join(", ");
    fail(
      field,
      input,
      "separate recipients with commas, not semicolons",
      `Write ${JSON.stringify(fixed)}, or give each recipient its own ${field}.`,
    );
  }
  if (tokens.some((t) => t.kind === "special" && (t.text === ":" || t.text === ";"))) {
    // What is left of ":" and ";" after the groups were opened: inside <...> (a source route), or a stray one.
    fail(field, input, 'a ":" or ";" that does not make a group (name: a@x, b@y;) is not allowed');
  }
  const open = tokens.findIndex((t) => t.kind === "special" && t.text === "<");
  if (open < 0) {
    if (tokens.some((t) => t.kind === "special" && t.text === ">")) fail(field, input, 'unmatched ">"');
    const spec = addrSpec(tokens, field, input);
    checkAddress(spec, field, input);
    return { address: asciiDomain(spec, field, input) };
  }
  const close = tokens.findIndex((t) => t.kind === "special" && t.text === ">");
  if (close < open) fail(field, input, 'unmatched "<"');
  if (close !== tokens.length - 1) fail(field, input, 'text after ">"');
  const inner = tokens.slice(open + 1, close);
  if (inner.some((t) => t.kind === "special" && t.text === "<")) fail(field, input, 'nested "<"');
  const spec = addrSpec(inner, field, input);
  checkAddress(spec, field, input);
  const address = asciiDomain(spec, field, input);
  const name = displayName(tokens.slice(0, open), field, input);
  return name === undefined ? { address } : { name, address };
}

/**
 * A bare ASCII address of dot-separated atoms at a host name of letters, digits and hyphens: what
 * most lists hold (a batch validates one or more per row). The grammar below takes it whole and
 * unchanged, so it is returned without tokenizing; anything else (a name, spaces, quotes, comments,
 * a literal, non-ASCII, a label with a bad hyphen) goes the whole way.
 */
const PLAIN_ADDRESS =
  /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

/**
 * Empty list elements (`a@x.com, , b@x.com`, `Alice <a@x.com>,`): "refuse" them; "skip" them, as
 * RFC 5322 4.4 (obs-addr-list, obs-mbox-list) says a message's header MUST be read; or skip only
 * "trailing" ones (a flag's `a@x.com,`, a list joined in a script), where an empty element before
 * another more likely stands for a value that is missing. A list with no address at all is refused
 * in each case.
 */
export type EmptyElements = "refuse" | "skip" | "trailing";

/**
 * Parse an address list. `field` names the flag or field in error messages.
 * Throws MailsendError("invalid_address") on anything outside the grammar.
 */
export function parseAddressList(
  input: string,
  field = "address",
  groups = true,
  empty: EmptyElements = "refuse",
): Mailbox[] {
  if (PLAIN_ADDRESS.test(input) && input.length <= 254 && input.lastIndexOf("@") <= 64) return [{ address: input }];
  if (CONTROL.test(input)) {
    fail(field, input, "control character (CR, LF or similar)");
  }
  const tokens = tokenize(input, field);
  if (tokens.length === 0) fail(field, input, "no address");
  let parts = groups ? openGroups(tokens, field, input, empty === "skip") : splitTopLevel(tokens);
  if (!groups && tokens.some((t) => isSpecial(t, ":")) && tokens.some((t) => isSpecial(t, ";")))
    fail(field, input, "a group (name: a@x, b@y;) is not allowed here: one address");
  if (empty !== "refuse" && parts.length > 0) {
    // (No parts at all: only empty groups, `undisclosed-recipients:;`, which stand for nobody.)
    if (parts.every((p) => p.length === 0)) fail(field, input, "no address");
    if (empty === "skip") parts = parts.filter((p) => p.length > 0);
    else while (parts[parts.length - 1]!.length === 0) parts = parts.slice(0, -1);
  }
  return parts.map((part, k) => {
    if (part.length === 0) fail(field, input, k === 0 ? "list starts with a comma" : "empty element between commas");
    const example = nameSplitByComma(part, parts[k + 1]);
    if (example !== undefined) {
      fail(
        field,
        input,
        "missing @",
        `The comma separates recipients, so the text before it was read as an address: put a display name that has a comma in double quotes, as in ${example}.`,
      );
    }
    return parseMailbox(part, field, input);
  });
}

const isSpecial = (t: Token, text: string) => t.kind === "special" && t.text === text;

/**
 * The list's elements at its top-level commas, each group (`name: member, member;`) opened into
 * its members, an empty group giving none. A group's name must be a phrase; groups do not nest,
 * and one ends with ";" followed by a comma or the end.
 */
function openGroups(tokens: Token[], field: string, input: string, emptyOk = false): Token[][] {
  const parts: Token[][] = [[]];
  let inAngle = false;
  /** Inside a group: how many members it has had. */
  let members: number | undefined;
  /** Just after a group's ";": only a comma or the end may follow. */
  let closed = false;
  for (const t of tokens) {
    const cur = parts[parts.length - 1]!;
    if (isSpecial(t, "<")) inAngle = true;
    if (isSpecial(t, ">")) inAngle = false;
    const top = !inAngle && t.kind === "special";
    if (closed && !(top && t.text === ",")) fail(field, input, 'text after the ";" that ends a group');
    if (top && t.text === ",") {
      if (closed) closed = false;
      else {
        if (members !== undefined) members++;
        parts.push([]);
      }
      continue;
    }
    if (
      top &&
      t.text === ":" &&
      members === undefined &&
      cur.length > 0 &&
      cur.every((x) => x.kind === "atom" || x.kind === "quoted" || isSpecial(x, "."))
    ) {
      cur.length = 0;
      members = 0;
      continue;
    }
    if (top && t.text === ":" && members !== undefined) fail(field, input, "a group inside a group");
    if (top && t.text === ";" && members !== undefined) {
      // An empty group holds no member: its slot is the next element's.
      if (cur.length > 0) parts.push([]);
      else if (members > 0 && !emptyOk) fail(field, input, "empty element between commas");
      members = undefined;
      closed = true;
      continue;
    }
    cur.push(t);
  }
  if (members !== undefined) fail(field, input, 'a group (name: a@x, b@y;) must end with ";"');
  // A list that ends with a group: the slot opened by its ";" holds nothing.
  if (closed && parts[parts.length - 1]!.length === 0) parts.pop();
  return parts;
}

/**
 * `Doe, Jane <jane@example.com>`: an element that is only words (no @, no <)
 * followed by an angle address is a display name cut in two at its comma.
 * Returns the quoted form to suggest, or undefined when it is not that case.
 */
function nameSplitByComma(part: Token[], next: Token[] | undefined): string | undefined {
  if (!next || !part.every((t) => t.kind === "atom" || t.kind === "quoted" || isSpecial(t, "."))) return undefined;
  const open = next.findIndex((t) => isSpecial(t, "<"));
  if (open < 0) return undefined;
  try {
    const rest = parseMailbox(next, "", "");
    const first = displayName(part, "", "");
    const name = [first, rest.name].filter(Boolean).join(", ");
    return `"${name.replace(/(["\\])/g, "\\$1")}" <${rest.address}>`;
  } catch {
    return undefined;
  }
}

/**
 * The quoted form of a display name that a comma cut in two
 * (`Doe, Jane <jane@example.com>` -> `"Doe, Jane" <jane@example.com>`), or
 * undefined when `input` is not that mistake. Batch uses it to show the fix
 * as it must be written inside a CSV cell.
 */
export function commaSplitNameFix(input: string): string | undefined {
  try {
    if (CONTROL.test(input)) return undefined;
    const parts = splitTopLevel(tokenize(input, ""));
    for (let k = 0; k < parts.length - 1; k++) {
      const example = nameSplitByComma(parts[k]!, parts[k + 1]);
      if (example !== undefined) return example;
    }
  } catch {
    // Not this mistake: some other one, which the parser reports.
  }
  return undefined;
}

/**
 * The last few mailboxes parseMailbox1 took, by their text: a batch's From (and Reply-To) is the
 * same row after row, and with a display name it is the slow path. Only successes are kept (an
 * error names the field it came from); a copy is returned.
 */
const recentMailboxes = new Map<string, Mailbox>();
const RECENT_MAILBOXES = 16;

/** Exactly one mailbox (from, reply-to). */
export function parseMailbox1(input: string, field: string): Mailbox {
  const hit = recentMailboxes.get(input);
  if (hit) return { ...hit };
  const list = parseAddressList(input, field, false);
  if (list.length !== 1) fail(field, input, `expected one address, found ${list.length}`);
  const m = list[0]!;
  if (recentMailboxes.size >= RECENT_MAILBOXES) recentMailboxes.delete(recentMailboxes.keys().next().value!);
  recentMailboxes.set(input, { ...m });
  return m;
}

/** One address without a display name (the REST `from`, whose name travels in `name`). */
export function parseBareAddress(input: string, field: string): string {
  const m = parseMailbox1(input, field);
  if (m.name !== undefined || input.includes("<")) {
    fail(field, input, "expected a bare address (the display name goes in `name`)");
  }
  return m.address;
}

/** Parse each value (a repeatable flag), each of which may itself be a list. */
export function parseAddressValues(
  values: readonly string[],
  field: string,
  empty: EmptyElements = "refuse",
): Mailbox[] {
  return values.flatMap((v) => parseAddressList(v, field, true, empty));
}

const PLAIN_NAME = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\uFFFF]+(?: [A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\u0080-\uFFFF]+)*$/;

/** Format for a header or the REST `to` string: `Name <addr>` with the name quoted when needed. */
export function formatMailbox(m: Mailbox): string {
  if (!m.name) return m.address;
  const name = PLAIN_NAME.test(m.name) ? m.name : `"${m.name.replace(/(["\\])/g, "\\$1")}"`;
  return `${name} <${m.address}>`;
}

export function formatAddressList(list: readonly Mailbox[]): string {
  return list.map(formatMailbox).join(", ");
}
