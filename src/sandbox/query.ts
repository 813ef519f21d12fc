/**
 * The one query language of the sandbox's search, used by `mailsend inbox --query`, the HTTP API
 * (/api/messages?query=, /api/wait) and the library (search, waitFor): words a mail client's search
 * box takes. Terms are ANDed; `-` before any term negates it.
 *
 *   to:alice@example.com  from:noreply  cc:boss  subject:"password reset"  has:attachment
 *   filename:report.pdf  after:10m  before:2026-11-28  is:rest  is:smtp  reset  "one-time code"
 *
 * parseQuery() turns the text into terms (or a usage error listing the known ones); matches() is
 * the predicate over a stored message and, for the terms that need them, its parts read.
 */
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";
import type { StoredMessage } from "./types.js";

type TextField = "to" | "from" | "cc" | "subject" | "filename" | "text";

export type Term = { neg: boolean } & (
  | { kind: TextField; value: string }
  | { kind: "has"; value: "attachment" }
  | { kind: "after" | "before"; at: number }
  | { kind: "is"; channel: StoredMessage["channel"] }
);

export interface Query {
  /** The text it was parsed from, as given. */
  source: string;
  terms: Term[];
  /** Some term reads the message's parts (cc, body words): they must be given to matches(). */
  needsContent: boolean;
}

/** What a message's parts add to its index record for a search. */
export interface SearchableContent {
  cc: string[];
  /** The text part and the text of the HTML part. */
  body: string;
}

/** Every term, as the error for an unknown one lists them. */
export const QUERY_TERMS = [
  "to:ADDRESS",
  "from:ADDRESS",
  "cc:ADDRESS",
  "subject:TEXT",
  "has:attachment",
  "filename:NAME",
  "after:DATE|DURATION",
  "before:DATE|DURATION",
  "is:rest",
  "is:smtp",
  "WORD",
  '"QUOTED PHRASE"',
  "-TERM (not)",
] as const;

const KEYS = new Set(["to", "from", "cc", "subject", "has", "filename", "after", "before", "is"]);
/** One term: an optional -, an optional key:, then a "quoted value" or a run of non-space. */
const TOKEN = /\s*(-?)(?:([A-Za-z]+):)?(?:"([^"]*)("?)|(\S+))/y;

function queryError(source: string, problem: string): MailsendError {
  return new MailsendError("usage", `query ${JSON.stringify(source)}: ${problem}`, {
    hint: `Known terms: ${QUERY_TERMS.join(", ")}. Terms are ANDed; put a phrase (or a word with a colon) in "quotes".`,
  });
}

/** A date (2026-11-28, 2026-11-28T09:30:00Z) or a duration back from now (10m, 2h, 7d). */
function instant(key: string, value: string, now: number, source: string): number {
  const ms = durationMs(value, { unit: "required" });
  if (ms !== undefined) return now - ms;
  const at = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(at))
    throw queryError(
      source,
      `${key}:${value} is neither a date (2026-11-28, 2026-11-28T09:30:00Z) nor a duration (30s, 10m, 2h, 7d)`,
    );
  return at;
}

function term(key: string | undefined, value: string, neg: boolean, now: number, source: string): Term {
  if (key === undefined) return { neg, kind: "text", value };
  const k = key.toLowerCase();
  if (!KEYS.has(k)) throw queryError(source, `unknown term ${key}:`);
  if (value === "") throw queryError(source, `${k}: needs a value`);
  switch (k) {
    case "has":
      if (value.toLowerCase() !== "attachment")
        throw queryError(source, `has:${value} is not known (has:attachment is)`);
      return { neg, kind: "has", value: "attachment" };
    case "is": {
      const channel = value.toLowerCase();
      if (channel !== "rest" && channel !== "smtp")
        throw queryError(source, `is:${value} is not known (is:rest and is:smtp are)`);
      return { neg, kind: "is", channel };
    }
    case "after":
    case "before":
      return { neg, kind: k, at: instant(k, value, now, source) };
    default:
      return { neg, kind: k as TextField, value };
  }
}

/** Parse a query; `now` anchors its durations (after:10m is ten minutes before it). Throws a usage error. */
export function parseQuery(source: string, now = Date.now()): Query {
  const terms: Term[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) break;
    const m = TOKEN.exec(source);
    if (!m) throw queryError(source, `cannot read it from position ${TOKEN.lastIndex}`);
    const [, dash, key, quoted, closed, bare] = m;
    if (quoted !== undefined && closed !== '"') throw queryError(source, "a quote is not closed");
    if (bare === "-") throw queryError(source, "a - with no term after it");
    // A key with nothing after it ("to: alice") is read here as a bare word ending in a colon.
    const keyed = key === undefined && quoted === undefined ? /^([A-Za-z]+):(.*)$/.exec(bare!) : null;
    terms.push(
      keyed
        ? term(keyed[1], keyed[2]!, dash === "-", now, source)
        : term(key, quoted ?? bare!, dash === "-", now, source),
    );
  }
  const needsContent = terms.some((t) => t.kind === "cc" || t.kind === "text");
  return { source, terms, needsContent };
}

const norm = (s: string) => s.toLowerCase().replace(/\s+/g, " ");
const has = (haystack: string | readonly string[], needle: string) =>
  (typeof haystack === "string" ? [haystack] : haystack).some((h) => norm(h).includes(norm(needle)));

/** A term's truth for a message; undefined when it needs the message's parts and they were not given. */
function holds(t: Term, m: StoredMessage, c: SearchableContent | undefined): boolean | undefined {
  switch (t.kind) {
    case "to":
      return has([...m.to, ...m.envelope.to, ...(m.envelopeUnicode?.to ?? [])], t.value);
    case "from":
      return has([m.from, m.envelope.from, m.envelopeUnicode?.from ?? ""], t.value);
    case "subject":
      return has(m.subject, t.value);
    case "filename":
      return has(
        m.attachments.map((a) => a.filename),
        t.value,
      );
    case "has":
      return m.attachments.length > 0;
    case "is":
      return m.channel === t.channel;
    case "after":
      return Date.parse(m.receivedAt) >= t.at;
    case "before":
      return Date.parse(m.receivedAt) < t.at;
    case "cc":
      return c && has(c.cc, t.value);
    case "text":
      return c && (has(m.subject, t.value) || has(c.body, t.value));
  }
}

/**
 * Whether every term holds. Without `content`, the terms that need it are taken as holding: a
 * false answer then already rules the message out, before its parts are read.
 */
export function matches(q: Query, m: StoredMessage, content?: SearchableContent): boolean {
  return q.terms.every((t) => {
    const v = holds(t, m, content);
    return v === undefined ? true : v !== t.neg;
  });
}

/**
 * The messages that came close to a query nobody matched: the same recipient, or the same subject
 * (every to: term holds, or every subject: term holds), so a failed wait can say what it saw.
 */
export function isClose(q: Query, m: StoredMessage): boolean {
  const of = (kind: "to" | "subject") => q.terms.filter((t) => t.kind === kind && !t.neg);
  return (["to", "subject"] as const).some((kind) => {
    const ts = of(kind);
    return ts.length > 0 && ts.every((t) => holds(t, m, undefined) === true);
  });
}
