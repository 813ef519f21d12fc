/**
 * The sandbox's web inbox: server-rendered pages, a little script, and the
 * message parts, all read through the MessageStore (never the filesystem).
 *
 * Routes (GET and HEAD):
 *   /                               the list, newest first, live over /events
 *   /messages/:id                   one message: headers, HTML, text, raw, attachments
 *   /messages/:id/html              the message HTML, for the sandboxed iframe
 *   /messages/:id/raw               the .eml as text/plain (?download=1: as a file)
 *   /messages/:id/attachments/:n    attachment n (0-based), as a download
 *   /api/messages[?limit=N]         JSON list (?query=Q: the matches; search-api.ts)
 *   /api/messages/:id               JSON details (parsed); the id `latest` names the newest message anywhere
 *   /api/wait?query=Q               a long poll for messages that match (search-api.ts)
 *   /events                         server-sent events: one per stored message
 *   /assets/inbox.css, inbox.js     the page's style and script
 *
 * Message HTML is untrusted. It is never inlined into a page (no srcdoc): the
 * iframe loads it from its own route, which answers with a CSP that forbids
 * every script and every remote load and sandboxes the document even when it
 * is opened directly; the iframe's sandbox has no allow-scripts and no
 * allow-same-origin. Everything else from a message is escaped.
 */
import { formatSize } from "../core/size.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Address } from "postal-mime";
import { INBOX_CSS, INBOX_JS } from "./web/assets.js";
import type { MessageStore, StoredMessage } from "./types.js";
import { readParts, type MessageParts, type PartAttachment } from "./content.js";
import { createSearchApi } from "./search-api.js";
import { createSearcher, latest, LATEST } from "./search.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/** The store's ids: time-based, URL- and file-name-safe. Anything else is a 404 without a store lookup. */
const ID = "[A-Za-z0-9_-]{1,128}";
const ROUTES: { re: RegExp; name: RouteName }[] = [
  { re: /^\/$/, name: "list" },
  { re: new RegExp(`^/messages/(${ID})/?$`), name: "message" },
  { re: new RegExp(`^/messages/(${ID})/html$`), name: "html" },
  { re: new RegExp(`^/messages/(${ID})/raw$`), name: "raw" },
  { re: new RegExp(`^/messages/(${ID})/attachments/(\\d{1,5})$`), name: "attachment" },
  { re: /^\/api\/messages\/?$/, name: "apiList" },
  { re: new RegExp(`^/api/messages/(${ID})$`), name: "apiMessage" },
  { re: /^\/api\/wait\/?$/, name: "apiWait" },
  { re: /^\/events$/, name: "events" },
  { re: /^\/assets\/inbox\.css$/, name: "css" },
  { re: /^\/assets\/inbox\.js$/, name: "js" },
];
type RouteName =
  | "list"
  | "message"
  | "html"
  | "raw"
  | "attachment"
  | "apiList"
  | "apiMessage"
  | "apiWait"
  | "events"
  | "css"
  | "js";
/** Paths under these prefixes are the inbox's: a bad id there is a 404 from here, not a fall-through. */
const OWN_PREFIXES = ["/messages/", "/api/messages", "/api/wait", "/assets/"];

const LIST_DEFAULT = 200;
const LIST_MAX = 1000;
/** The raw tab shows at most this much; the raw route always has all of it. */
const RAW_INLINE_MAX = 512 * 1024;
/** Inline (cid:) images are embedded in the message HTML as data: URLs up to this total. */
const CID_EMBED_MAX = 8 * 1024 * 1024;
const SSE_PING_MS = 15_000;
/** A client this far behind on the event stream is dropped (it reconnects and catches up). */
const SSE_MAX_BUFFERED = 1024 * 1024;

const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/**
 * For the message HTML. `sandbox` without allow-scripts: no script even when
 * the route is opened directly; opaque origin, so it cannot read the inbox.
 * Popups are allowed to escape the sandbox so a link the user clicks opens in
 * a normal tab (see the injected <base target="_blank">); nothing loads by itself.
 */
const MESSAGE_HTML_CSP =
  "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; base-uri 'none'; " +
  "form-action 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox";
const IFRAME_SANDBOX = "allow-popups allow-popups-to-escape-sandbox";
/** For raw source and attachments: never rendered as a document of this origin. */
const INERT_CSP = "default-src 'none'; sandbox";

// ---------------------------------------------------------------------------
// HTML building: every interpolated value is escaped unless it is already Html.

class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function piece(v: unknown): string {
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return v.map(piece).join("");
  if (v === undefined || v === null || v === false) return "";
  return escapeHtml(String(v));
}

function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += piece(values[i]) + (strings[i + 1] ?? "");
  return new Html(out);
}

// ---------------------------------------------------------------------------
// Formatting

/** UTC, readable without script; the page's script replaces it with local time. */
function formatTime(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime())
    ? iso
    : d
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d+Z$/, "Z");
}

function formatAddress(a: Address): string {
  if (a.group !== undefined) return `${a.name}: ${a.group.map(formatAddress).join(", ")};`;
  return a.name ? `${a.name} <${a.address}>` : a.address;
}

function formatAddresses(list: Address[] | undefined): string {
  return (list ?? []).map(formatAddress).join(", ");
}

function messageUrl(id: string): string {
  return `/messages/${encodeURIComponent(id)}`;
}

// ---------------------------------------------------------------------------
// Responses

function baseHeaders(res: ServerResponse): void {
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
}

function send(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  const buf = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  baseHeaders(res);
  res.statusCode = status;
  res.setHeader("Content-Type", type);
  res.setHeader("Content-Length", String(buf.length));
  if (!("Cache-Control" in headers)) res.setHeader("Cache-Control", "no-store");
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.end(req.method === "HEAD" ? undefined : buf);
}

function sendPage(req: IncomingMessage, res: ServerResponse, status: number, page: Html): void {
  send(req, res, status, "text/html; charset=utf-8", page.value, {
    "Content-Security-Policy": PAGE_CSP,
    "X-Frame-Options": "DENY",
  });
}

function sendJson(req: IncomingMessage, res: ServerResponse, status: number, value: unknown): void {
  send(req, res, status, "application/json; charset=utf-8", JSON.stringify(value));
}

function notFound(req: IncomingMessage, res: ServerResponse, what: string): void {
  if (wantsJson(req)) sendJson(req, res, 404, { error: { code: "not_found", message: `${what} not found` } });
  else
    sendPage(
      req,
      res,
      404,
      layout("Not found", html`<h2 class="subject">${what} not found</h2><p><a href="/">Back to the inbox</a></p>`),
    );
}

function wantsJson(req: IncomingMessage): boolean {
  return (req.url ?? "").startsWith("/api/");
}

/**
 * `attachment` with an ASCII fallback and the exact name in filename*
 * (RFC 6266 / RFC 8187). Control characters, quotes, backslashes and path
 * separators never reach the header.
 */
export function contentDisposition(filename: string): string {
  const clean =
    filename
      // Lone surrogates would make encodeURIComponent throw.
      .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD")
      .replace(/[\u0000-\u001f\u007f-\u009f]/g, "")
      .replace(/[/\\]/g, "_")
      .trim() || "attachment";
  const ascii = clean.replace(/[^\x20-\x7e]/g, "_").replace(/["%]/g, "_");
  const star = encodeURIComponent(clean).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${star}`;
}

/** A declared MIME type if it is a plain type/subtype token, else octet-stream. */
function safeContentType(t: string): string {
  return /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/i.test(t)
    ? t.toLowerCase()
    : "application/octet-stream";
}

/**
 * DNS rebinding guard: a page on some public domain that re-points its name
 * at 127.0.0.1 would otherwise read the inbox as same-origin. Such a Host is a
 * dotted name; IP literals, localhost and single-label names (a container's
 * service name) cannot be rebound by a website, so those are answered.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (host === undefined || host === "") return true;
  const h = host.toLowerCase();
  if (h.startsWith("[")) return /^\[[0-9a-f:.]+\](:\d+)?$/.test(h);
  const name = h.replace(/:\d+$/, "");
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(name)) return true;
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  return /^[a-z0-9-]+$/.test(name);
}

// ---------------------------------------------------------------------------
// Parsing (postal-mime, loaded on first use), with a small cache: stored
// messages never change, and one page view asks for the same message several times.

interface ParsedAttachment extends PartAttachment {
  index: number;
}

interface Parsed extends Omit<MessageParts, "attachments"> {
  /** Each with its index (its route) and a name for the download when the message gives none. */
  attachments: ParsedAttachment[];
}

const PARSE_CACHE_MAX = 8;
/** Bigger messages are parsed per request rather than kept in memory. */
const PARSE_CACHE_MAX_BYTES = 2 * 1024 * 1024;

function createParser(store: MessageStore) {
  const cache = new Map<string, Promise<Parsed>>();
  async function parse(raw: Buffer): Promise<Parsed> {
    const p = await readParts(raw);
    return {
      ...p,
      attachments: p.attachments.map((a, index) => ({
        ...a,
        index,
        filename: a.filename || `attachment-${index + 1}`,
      })),
    };
  }
  /** undefined when the store has no such message. */
  return async function parsed(id: string): Promise<{ meta: StoredMessage; raw: Buffer; parsed: Parsed } | undefined> {
    const meta = await store.get(id);
    if (!meta) return undefined;
    const raw = await store.raw(id);
    if (!raw) return undefined;
    let p = cache.get(id);
    if (!p) {
      p = parse(raw);
      if (raw.length <= PARSE_CACHE_MAX_BYTES) {
        cache.set(id, p);
        if (cache.size > PARSE_CACHE_MAX) cache.delete(cache.keys().next().value!);
      }
    }
    return { meta, raw, parsed: await p };
  };
}

/**
 * The HTML served into the iframe: cid: references to the message's own
 * parts become data: URLs (the CSP allows nothing else), and links open in a
 * new tab rather than navigating the frame.
 */
function frameHtml(body: string, attachments: ParsedAttachment[]): string {
  const byCid = new Map<string, ParsedAttachment>();
  for (const a of attachments) {
    if (a.contentId && a.contentType.startsWith("image/"))
      byCid.set(a.contentId.replace(/^<|>$/g, "").toLowerCase(), a);
  }
  let budget = CID_EMBED_MAX;
  const withImages =
    byCid.size === 0
      ? body
      : body.replace(/\bcid:([^"'\s)>]+)/gi, (whole, ref: string) => {
          let key = ref;
          try {
            key = decodeURIComponent(ref);
          } catch {}
          const a = byCid.get(key.toLowerCase());
          if (!a || a.size > budget) return whole;
          budget -= a.size;
          return `data:${safeContentType(a.contentType)};base64,${a.content.toString("base64")}`;
        });
  const base = '<base target="_blank">';
  const doctype = /^\s*<!doctype[^>]*>/i.exec(withImages);
  return doctype ? doctype[0] + base + withImages.slice(doctype[0].length) : base + withImages;
}

// ---------------------------------------------------------------------------
// Pages

function layout(title: string, content: Html, extraHeader: Html = html``): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/inbox.css">
<script src="/assets/inbox.js" defer></script>
</head>
<body>
<header class="top"><h1><a href="/">mailsend sandbox</a></h1><span class="meta">inbox</span>${extraHeader}</header>
<main>
${content}
</main>
</body>
</html>
`;
}

function listRow(m: StoredMessage): Html {
  const to = m.to.join(", ");
  return html`<tr data-id="${m.id}"><td><time datetime="${m.receivedAt}">${formatTime(m.receivedAt)}</time></td><td><span class="chan">${m.channel}</span></td><td title="${m.from}">${m.from}</td><td title="${to}">${to}</td><td class="subject"><a href="${messageUrl(m.id)}">${m.subject === "" ? "(no subject)" : m.subject}</a></td><td class="num">${formatSize(m.size)}</td><td class="num">${m.attachments.length || ""}</td></tr>
`;
}

function listPage(messages: StoredMessage[], limited: boolean): Html {
  const rows = messages.length
    ? messages.map(listRow)
    : html`<tr id="empty"><td class="empty" colspan="7">No messages yet. Send one to this sandbox and it shows up here.</td></tr>`;
  return layout(
    "Inbox · mailsend sandbox",
    html`<p class="note"><span id="count">${messages.length}</span> messages${limited ? html` (the newest ${messages.length})` : ""}, newest first.</p>
<table class="list">
<colgroup><col class="time"><col class="channel"><col class="from"><col class="to"><col class="subject"><col class="size"><col class="att"></colgroup>
<thead><tr><th>Received</th><th>Channel</th><th>From</th><th>To</th><th>Subject</th><th class="num">Size</th><th class="num" title="Attachments">Att.</th></tr></thead>
<tbody id="rows">
${rows}</tbody>
</table>`,
    html`<span id="status" class="down">connecting</span>`,
  );
}

/** A time the page's script shows in local time (UTC without script). */
function timeTag(value: string | undefined): Html | string | undefined {
  if (value === undefined || Number.isNaN(new Date(value).getTime())) return value;
  return html`<time datetime="${value}">${formatTime(value)}</time>`;
}

function fieldRows(fields: [string, Html | string | undefined][]): Html[] {
  return fields
    .filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => html`<tr><th>${k}</th><td>${v}</td></tr>`);
}

/** The message's own header fields, read from the parsed message where it parsed, else from the store. */
function messageFields(meta: StoredMessage, email: Parsed["email"]): Html[] {
  return fieldRows([
    ["From", email?.from ? formatAddress(email.from) : meta.from],
    ["To", email ? formatAddresses(email.to) : meta.to.join(", ")],
    ["Cc", formatAddresses(email?.cc)],
    ["Reply-To", formatAddresses(email?.replyTo)],
    ["Subject", email?.subject ?? meta.subject],
    ["Date", timeTag(email?.date)],
    ["Message-ID", email?.messageId ?? meta.messageId],
  ]);
}

/** An envelope address as sent, its Unicode form beside it when the client wrote A-labels. */
function sentAs(sent: string, unicode: string | undefined): string {
  return unicode === undefined || unicode === sent ? sent : `${sent} (${unicode})`;
}

/** What the sandbox recorded about the message on arrival (channel, key, envelope, size). */
function sandboxFields(meta: StoredMessage): Html[] {
  const u = meta.envelopeUnicode;
  return fieldRows([
    ["Received", timeTag(meta.receivedAt)],
    ["Channel", meta.channel],
    ["Key", meta.keyId],
    ["Envelope from", sentAs(meta.envelope.from, u?.from)],
    ["Envelope to", meta.envelope.to.map((a, i) => sentAs(a, u?.to[i])).join(", ")],
    ["Size", `${formatSize(meta.size)} (${meta.size} bytes)`],
    ["Idempotency-Key", meta.idempotencyKey],
  ]);
}

/** The raw source, shown inline up to RAW_INLINE_MAX, with links to the whole of it. */
function rawPanel(url: string, raw: Buffer): Html {
  const rawShown = raw.subarray(0, RAW_INLINE_MAX).toString("utf8");
  return html`<section class="panel" id="raw"><h3>Raw</h3><p class="note"><a href="${url}/raw">Open as text</a> · <a href="${url}/raw?download=1">Download .eml</a>${
    raw.length > RAW_INLINE_MAX
      ? html` · showing the first ${formatSize(RAW_INLINE_MAX)} of ${formatSize(raw.length)}`
      : ""
  }</p><pre>${rawShown}</pre></section>`;
}

function attachmentsPanel(url: string, attachments: Parsed["attachments"]): Html {
  return html`<section class="panel" id="attachments"><h3>Attachments</h3>${
    attachments.length
      ? html`<table><thead><tr><th>File</th><th>Type</th><th>Size</th><th></th></tr></thead><tbody>${attachments.map(
          (a) =>
            html`<tr><td><a href="${url}/attachments/${a.index}" download>${a.filename}</a></td><td>${a.contentType}</td><td>${formatSize(a.size)}</td><td class="muted">${
              a.inline ? "inline" : ""
            }${a.contentId ? html` ${a.contentId}` : ""}</td></tr>`,
        )}</tbody></table>`
      : html`<p class="note">No attachments.</p>`
  }</section>`;
}

/** The message page's tabs and their panels: HTML (when there is some), text, raw, attachments, sandbox. */
function messagePanels(meta: StoredMessage, raw: Buffer, p: Parsed): { tabs: [string, string][]; panels: Html[] } {
  const url = messageUrl(meta.id);
  const email = p.email;
  const hasHtml = email?.html !== undefined && email.html !== "";
  const tabs: [string, string][] = [];
  const panels: Html[] = [];
  if (hasHtml) {
    tabs.push(["html", "HTML"]);
    panels.push(html`<section class="panel" id="html"><h3>HTML</h3>
<iframe class="body" src="${url}/html" sandbox="${IFRAME_SANDBOX}" referrerpolicy="no-referrer" title="Message HTML"></iframe>
<p class="note">Rendered in a sandbox: no scripts run and nothing remote loads. <a href="${url}/html" target="_blank" rel="noopener noreferrer">Open alone</a></p></section>`);
  }
  tabs.push(["text", "Text"]);
  panels.push(
    html`<section class="panel" id="text"><h3>Text</h3>${
      email?.text !== undefined && email.text !== ""
        ? html`<pre>${email.text}</pre>`
        : html`<p class="note">This message has no text part.</p>`
    }</section>`,
  );
  tabs.push(["raw", "Raw"]);
  panels.push(rawPanel(url, raw));
  tabs.push(["attachments", `Attachments (${p.attachments.length})`]);
  panels.push(attachmentsPanel(url, p.attachments));
  tabs.push(["sandbox", "Sandbox"]);
  panels.push(
    html`<section class="panel" id="sandbox"><h3>Sandbox</h3><table class="fields">${sandboxFields(meta)}</table></section>`,
  );
  return { tabs, panels };
}

function messagePage(meta: StoredMessage, raw: Buffer, p: Parsed): Html {
  const email = p.email;
  const fields = messageFields(meta, email);
  const headerRows = (email?.headers ?? []).map((h) => html`<tr><th>${h.originalKey}</th><td>${h.value}</td></tr>`);
  const { tabs, panels } = messagePanels(meta, raw, p);
  const subject = email?.subject ?? meta.subject;
  return layout(
    `${subject || "(no subject)"} · mailsend sandbox`,
    html`<p><a href="/">&larr; Inbox</a></p>
<h2 class="subject">${subject || "(no subject)"}</h2>
${p.error !== undefined ? html`<p class="note">The message could not be parsed (${p.error}); the raw source is below.</p>` : ""}
<table class="fields">${fields}</table>
<details class="all"><summary>All headers (${headerRows.length})</summary><table>${headerRows}</table></details>
<nav class="tabs" role="tablist">${tabs.map(([k, label]) => html`<a href="#${k}" data-panel="${k}" role="tab">${label}</a>`)}</nav>
${panels}`,
  );
}

// ---------------------------------------------------------------------------
// JSON shapes

function summary(m: StoredMessage): Record<string, unknown> {
  return { ...m, url: messageUrl(m.id) };
}

function details(meta: StoredMessage, p: Parsed): Record<string, unknown> {
  const url = messageUrl(meta.id);
  const e = p.email;
  return {
    ...summary(meta),
    parseError: p.error ?? null,
    date: e?.date ?? null,
    cc: (e?.cc ?? []).map(formatAddress),
    replyTo: (e?.replyTo ?? []).map(formatAddress),
    headers: (e?.headers ?? []).map((h) => ({ name: h.originalKey, value: h.value })),
    text: e?.text ?? null,
    hasHtml: e?.html !== undefined && e.html !== "",
    htmlUrl: e?.html ? `${url}/html` : null,
    rawUrl: `${url}/raw`,
    attachments: p.attachments.map((a) => ({
      index: a.index,
      filename: a.filename,
      contentType: a.contentType,
      size: a.size,
      disposition: a.disposition,
      contentId: a.contentId,
      inline: a.inline,
      url: `${url}/attachments/${a.index}`,
    })),
  };
}

// ---------------------------------------------------------------------------

function events(req: IncomingMessage, res: ServerResponse, store: MessageStore): void {
  baseHeaders(res);
  res.writeHead(200, {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  res.write("retry: 2000\n\n");
  let closed = false;
  let unsubscribe = (): void => {};
  let ping: NodeJS.Timeout | undefined;
  const close = (): void => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearInterval(ping);
    if (!res.writableEnded) res.end();
  };
  unsubscribe = store.subscribe((m) => {
    if (closed) return;
    if (res.writableLength > SSE_MAX_BUFFERED) {
      close();
      return;
    }
    res.write(`data: ${JSON.stringify(summary(m))}\n\n`);
  });
  ping = setInterval(() => {
    if (!closed) res.write(": ping\n\n");
  }, SSE_PING_MS);
  ping.unref();
  req.on("close", close);
  res.on("close", close);
  res.on("error", close);
}

type Found = NonNullable<Awaited<ReturnType<ReturnType<typeof createParser>>>>;

/** The pages and API answers of one stored message. */
function routeMessage(
  req: IncomingMessage,
  res: ServerResponse,
  name: RouteName,
  m: RegExpExecArray,
  query: URLSearchParams,
  found: Found,
): void {
  const { meta, raw, parsed: p } = found;
  switch (name) {
    case "message":
      sendPage(req, res, 200, messagePage(meta, raw, p));
      return;
    case "html": {
      const body = p.email?.html;
      if (body === undefined || body === "") {
        notFound(req, res, "HTML part");
        return;
      }
      send(req, res, 200, "text/html; charset=utf-8", frameHtml(body, p.attachments), {
        "Content-Security-Policy": MESSAGE_HTML_CSP,
        "X-Frame-Options": "SAMEORIGIN",
      });
      return;
    }
    case "raw": {
      const download = query.get("download") === "1";
      send(req, res, 200, download ? "message/rfc822" : "text/plain; charset=utf-8", raw, {
        "Content-Security-Policy": INERT_CSP,
        ...(download ? { "Content-Disposition": contentDisposition(`${meta.id}.eml`) } : {}),
      });
      return;
    }
    case "attachment": {
      const a = p.attachments[Number(m[2])];
      if (!a) {
        notFound(req, res, "Attachment");
        return;
      }
      send(req, res, 200, safeContentType(a.contentType), a.content, {
        "Content-Disposition": contentDisposition(a.filename),
        "Content-Security-Policy": INERT_CSP,
      });
      return;
    }
  }
}

function matchRoute(path: string): { name: RouteName; m: RegExpExecArray } | undefined {
  for (const r of ROUTES) {
    const m = r.re.exec(path);
    if (m) return { name: r.name, m };
  }
  return undefined;
}

/** The answer to each route of the inbox, once a request was matched and allowed. */
function createRouter(store: MessageStore) {
  const parsed = createParser(store);
  const searcher = createSearcher(store);
  const searchApi = createSearchApi(searcher, sendJson);

  return async function route(
    req: IncomingMessage,
    res: ServerResponse,
    name: RouteName,
    m: RegExpExecArray,
    query: URLSearchParams,
  ): Promise<void> {
    switch (name) {
      case "css":
        send(req, res, 200, "text/css; charset=utf-8", INBOX_CSS, { "Cache-Control": "no-cache" });
        return;
      case "js":
        send(req, res, 200, "text/javascript; charset=utf-8", INBOX_JS, { "Cache-Control": "no-cache" });
        return;
      case "events":
        events(req, res, store);
        return;
      case "apiList":
      case "apiWait":
        return searchApi(req, res, name, query);
      case "list": {
        const requested = Number(query.get("limit") ?? LIST_DEFAULT);
        const limit = Number.isInteger(requested) && requested > 0 ? Math.min(requested, LIST_MAX) : LIST_DEFAULT;
        const messages = await store.list({ limit });
        sendPage(req, res, 200, listPage(messages, messages.length >= limit));
        return;
      }
    }
    const id = m[1] === LATEST ? ((await latest(store))?.id ?? "") : (m[1] ?? "");
    const found = await parsed(id);
    if (!found) return notFound(req, res, "Message");
    if (name === "apiMessage")
      return sendJson(req, res, 200, { ...details(found.meta, found.parsed), links: found.parsed.links });
    routeMessage(req, res, name, m, query, found);
  };
}

/** checkHost: false when the server checked Host (and the token) for every route already. */
export function createInboxHandler(store: MessageStore, opts: { checkHost?: boolean } = {}): Handler {
  const checkHost = opts.checkHost ?? true;
  const route = createRouter(store);

  return async function handle(req, res) {
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://inbox.invalid");
    } catch {
      return false;
    }
    const path = url.pathname;
    const matched = matchRoute(path);
    if (!matched) {
      if (!OWN_PREFIXES.some((p) => path.startsWith(p))) return false;
      notFound(req, res, "Page");
      return true;
    }
    if (checkHost && !hostAllowed(req.headers.host)) {
      send(
        req,
        res,
        403,
        "text/plain; charset=utf-8",
        "The sandbox inbox answers only to localhost, IP addresses and single-label host names (DNS rebinding protection).\n",
      );
      return true;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      send(req, res, 405, "text/plain; charset=utf-8", "Method not allowed\n", { Allow: "GET, HEAD" });
      return true;
    }
    try {
      await route(req, res, matched.name, matched.m, url.searchParams);
    } catch (e) {
      if (!res.headersSent)
        send(req, res, 500, "text/plain; charset=utf-8", `Internal error: ${(e as Error).message}\n`);
      else res.destroy();
    }
    return true;
  };
}
