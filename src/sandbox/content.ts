/**
 * What a test takes out of a stored message: its text and HTML parts decoded, its Cc, its links
 * (the HTML part's <a href>, then the URLs of the text part) and its attachments. Read from the
 * .eml with postal-mime and htmlparser2, both loaded on first use.
 */
import type { Attachment, Email } from "postal-mime";
import type { MessageStore } from "./types.js";
import type { SearchableContent } from "./query.js";

export interface PartAttachment {
  /** As the message names it ("" when it does not). */
  filename: string;
  contentType: string;
  size: number;
  disposition: string | null;
  contentId: string | null;
  /** Shown in the body (a related part or an inline disposition), not offered as a file. */
  inline: boolean;
  content: Buffer;
}

export interface MessageParts {
  /** postal-mime's reading of the whole message; undefined when it could not read it (`error` says why). */
  email: Email | undefined;
  error: string | undefined;
  cc: string[];
  text: string | null;
  html: string | null;
  /** Absolute links, each once: the HTML part's <a href>s, the text part's URLs, the URLs in the HTML's text. */
  links: string[];
  /** The HTML part as text (no tags, scripts or styles), for word searches. */
  htmlText: string;
  attachments: PartAttachment[];
}

/** Schemes a link in a message has no business with in a test: never listed. */
const SKIPPED_SCHEMES = /^(javascript|data|vbscript|cid):/i;
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
/** A URL in plain text; trailing punctuation of the sentence around it is cut off after. */
const TEXT_URL = /\bhttps?:\/\/[^\s<>"'`]+/gi;

function trimUrl(u: string): string {
  let url = u.replace(/[.,;:!?]+$/, "");
  // A closing bracket belongs to the URL only when the URL opened one.
  while (/[)\]]$/.test(url) && count(url, url.endsWith(")") ? "(" : "[") < count(url, url.slice(-1)))
    url = url.slice(0, -1).replace(/[.,;:!?]+$/, "");
  return url;
}

function count(s: string, ch: string): number {
  return s.split(ch).length - 1;
}

/** The <a href> targets and the visible text of an HTML part. */
async function readHtml(html: string): Promise<{ links: string[]; text: string }> {
  const { Parser } = await import("htmlparser2");
  const links: string[] = [];
  const text: string[] = [];
  let hidden = 0;
  const parser = new Parser({
    onopentag(name, attrs) {
      if (name === "script" || name === "style") hidden++;
      const href = attrs.href?.trim();
      if (name === "a" && href && SCHEME.test(href) && !SKIPPED_SCHEMES.test(href)) links.push(href);
    },
    onclosetag(name) {
      if ((name === "script" || name === "style") && hidden > 0) hidden--;
    },
    ontext(t) {
      if (hidden === 0) text.push(t);
    },
  });
  parser.write(html);
  parser.end();
  return { links, text: text.join(" ") };
}

/** An attachment's bytes, however postal-mime gave them. */
export function attachmentBytes(a: Pick<Attachment, "content" | "encoding">): Buffer {
  const c = a.content;
  if (typeof c === "string") return Buffer.from(c, a.encoding === "base64" ? "base64" : "utf8");
  // A view of postal-mime's bytes, not a copy: the parsed message keeps them anyway.
  return c instanceof Uint8Array ? Buffer.from(c.buffer, c.byteOffset, c.byteLength) : Buffer.from(c);
}

export function textLinks(text: string): string[] {
  return [...text.matchAll(TEXT_URL)].map((m) => trimUrl(m[0]));
}

/** Parse a stored message's parts. A message postal-mime cannot read has none (its index record still stands). */
export async function readParts(raw: Buffer): Promise<MessageParts> {
  const { default: PostalMime } = await import("postal-mime");
  let email: Email;
  try {
    email = await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
  } catch (e) {
    return {
      email: undefined,
      error: (e as Error).message,
      cc: [],
      text: null,
      html: null,
      links: [],
      htmlText: "",
      attachments: [],
    };
  }
  const html = email.html ?? null;
  const fromHtml = html ? await readHtml(html) : { links: [], text: "" };
  const text = email.text ?? null;
  const cc = (email.cc ?? [])
    .flatMap((a) => (a.group ? a.group : [a]))
    .map((a) => (a.name ? `${a.name} <${a.address}>` : (a.address ?? "")));
  const attachments = email.attachments.map((a) => {
    const content = attachmentBytes(a);
    const inline = a.related === true || a.disposition === "inline";
    return {
      filename: a.filename ?? "",
      contentType: a.mimeType,
      size: content.length,
      disposition: a.disposition,
      contentId: a.contentId ?? null,
      inline,
      content,
    };
  });
  // Then the bare URLs written in the HTML's text: a text body the service wrapped in <pre>.
  const links = [...new Set([...fromHtml.links, ...(text ? textLinks(text) : []), ...textLinks(fromHtml.text)])];
  return { email, error: undefined, cc, text, html, links, htmlText: fromHtml.text, attachments };
}

export function searchableContent(p: MessageParts): SearchableContent {
  return { cc: p.cc, body: `${p.text ?? ""}\n${p.htmlText}` };
}

const CACHE_MAX = 64;
/** Bigger messages are read again when asked for rather than kept. */
const CACHE_MAX_BYTES = 1024 * 1024;

/** A reader of stored messages' parts, with a small cache: a stored message never changes. */
export function createPartsReader(store: Pick<MessageStore, "raw">): (id: string) => Promise<MessageParts | undefined> {
  const cache = new Map<string, Promise<MessageParts>>();
  return async (id) => {
    const hit = cache.get(id);
    if (hit) return hit;
    const raw = await store.raw(id);
    if (!raw) return undefined;
    const p = readParts(raw);
    if (raw.length <= CACHE_MAX_BYTES) {
      cache.set(id, p);
      if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value!);
    }
    return p;
  };
}
