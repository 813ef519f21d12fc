/**
 * One batch row -> one Message, through the same assembleMessage() as
 * `mailsend send`. Rows use the API's field names (from, to, subject, html,
 * name, reply_to, headers, attachments) plus text, cc, bcc and
 * idempotency_key; every other field or column is a template variable.
 */
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { MailsendError, said, type Text } from "../core/errors.js";
import type { Front } from "../core/setting-names.js";
import { checkHeader, type HeaderList } from "../core/headers.js";
import type { Attachment, Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";
import { assembleMessage, composeHtmlBody, type BodyCompose, type MessageParts } from "../message/build.js";
import type { Channels } from "../transports/choose.js";
import { settleChannel } from "../transports/settle.js";
import { regularFileSize } from "../core/read.js";
import { looseName, placeholders, render } from "../message/template.js";

/** What flags give every row: defaults (a row's own value wins) and templates. */
export interface RowDefaults {
  from?: string;
  name?: string;
  replyTo?: string;
  subject?: string;
  htmlTemplate?: string;
  textTemplate?: string;
  /** The flag a template came from, for error messages (default --html-file / --text-file). */
  templateFlag?: string;
  /** The text template is the plain version of the HTML one (a Markdown source and its rendering). */
  textIsPlainHtml?: boolean;
  /** What to call the subject, HTML and text templates in messages (the library: template.subject, ...). */
  labels?: { subject?: string; html?: string; text?: string };
  headers?: HeaderList;
  attach?: string[];
  /** Each row's HTML: local images inline (read once for all rows, through its cache), CSS inlined (src/compose). */
  compose?: BodyCompose;
  /** The batch input's directory (a file, not stdin): named when a row's relative attachment path is only found from there. */
  inputDir?: string;
}

const FIELDS = new Set([
  "from",
  "to",
  "cc",
  "bcc",
  "subject",
  "html",
  "text",
  "name",
  "reply_to",
  "headers",
  "attachments",
  "idempotency_key",
  "vars",
]);

function bad(message: string): MailsendError {
  return new MailsendError("invalid_message", message);
}

function str(v: unknown, field: string): string | undefined {
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string") throw bad(`${field} must be a string`);
  return v;
}

function list(v: unknown, field: string): string[] {
  if (v === undefined || v === null || v === "") return [];
  if (typeof v === "string") return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v as string[];
  throw bad(`${field} must be a string or an array of strings`);
}

/** What a row's own field does to its message, for the warning when a template uses it too. */
const FIELD_EFFECT: Record<string, Text> = {
  from: (s) => `each row's value is the sender address of its message (instead of ${s.flag("from")})`,
  name: (s) =>
    `each row's value becomes the sender's display name of its message (From: <value> <address>), replacing ${s.flag("name")} and the name in ${s.flag("from")}`,
  subject: (s) => `each row's value is the subject line of its message (instead of ${s.flag("subject")})`,
  reply_to: "each row's value is the Reply-To address of its message",
  html: "each row's value is the HTML body of its message (instead of the HTML template)",
  text: "each row's value is the text body of its message (instead of the text template)",
  cc: "each row's value is a Cc recipient of its message",
  bcc: "each row's value is a Bcc recipient of its message",
  headers: "each row's value is a JSON object of headers set on its message",
  attachments: "each row's value names files attached to its message",
  idempotency_key: "each row's value is the idempotency key of its message",
};

/** The message's own fields that variables() also offers to templates. */
const FIELDS_AS_VARIABLES = ["to", "name", "from", "subject"];

/**
 * A column (or JSON field) named like a send-request field is that field,
 * whatever else it is meant for: a `name` column meant for "Dear {{name}}"
 * also becomes every message's From display name. When a template uses
 * such a column, say so once per field, before anything is sent. `to` is
 * left out: every row needs it as the recipient anyway.
 */
export class FieldClashes {
  /** placeholder -> the flags whose templates use it. */
  readonly #used = new Map<string, string[]>();
  readonly #warned = new Set<string>();
  readonly #what: string;
  readonly #front: Front;

  /** `front`: whose words the warnings are in (the CLI's flags, the library's options). */
  constructor(defaults: RowDefaults, format: "jsonl" | "json" | "csv", front: Front = "cli") {
    this.#front = front;
    this.#what = format === "csv" ? "column" : "field";
    const templates: Array<[string | undefined, string]> = [
      [defaults.subject, defaults.labels?.subject ?? "--subject"],
      [defaults.htmlTemplate, defaults.labels?.html ?? defaults.templateFlag ?? "--html-file"],
      [defaults.textTemplate, defaults.labels?.text ?? defaults.templateFlag ?? "--text-file"],
    ];
    for (const [template, flag] of templates) {
      if (template === undefined) continue;
      // {{Name}} is filled by the field name too (placeholders match loosely): it clashes the same.
      for (const p of placeholders(template).map(looseName)) {
        if (!Object.hasOwn(FIELD_EFFECT, p)) continue;
        const flags = this.#used.get(p) ?? [];
        if (!flags.includes(flag)) flags.push(flag);
        this.#used.set(p, flags);
      }
    }
  }

  /** The warnings this row gives that no earlier row gave. */
  check(data: Record<string, unknown>): string[] {
    if (this.#used.size === 0) return [];
    const vars =
      data.vars && typeof data.vars === "object" && !Array.isArray(data.vars)
        ? (data.vars as Record<string, unknown>)
        : {};
    const out: string[] = [];
    for (const [field, flags] of this.#used) {
      // An empty CSV cell sets nothing (it is read as absent), so it clashes with nothing.
      if (this.#warned.has(field) || data[field] === undefined || data[field] === null || data[field] === "") continue;
      // A JSON row's own vars.<field> fills the placeholder: the two are kept apart already.
      if (vars[field] !== undefined) continue;
      this.#warned.add(field);
      const where = `{{${field}}} in ${flags.join(" and ")}`;
      const fills = FIELDS_AS_VARIABLES.includes(field)
        ? `it also fills ${where}`
        : `${where} gets no value from it (only other ${this.#what}s are template variables), so those rows are invalid`;
      out.push(
        `${this.#what} "${field}" is the send request's field ${field}: ${said(FIELD_EFFECT[field]!, this.#front)}; ${fills}. ` +
          `Rename the ${this.#what}${field === "name" ? " (e.g. to first_name)" : ""} if it is only meant for the template.`,
      );
    }
    return out;
  }
}

/** Template variables: every field that is not one of the message's own, and a `vars` object. */
export function variables(data: Record<string, unknown>): Record<string, unknown> {
  const vars: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) if (!FIELDS.has(k) && !k.startsWith("header:")) vars[k] = v;
  if (data.vars && typeof data.vars === "object" && !Array.isArray(data.vars)) Object.assign(vars, data.vars);
  // The message's own fields can be used in templates too ({{to}}, {{name}}).
  for (const k of FIELDS_AS_VARIABLES) if (typeof data[k] === "string" && !(k in vars)) vars[k] = data[k];
  return vars;
}

function headersOf(data: Record<string, unknown>, defaults: HeaderList): HeaderList {
  const out: HeaderList = [...defaults];
  const set = (name: string, value: string) => {
    checkHeader(name, value);
    const i = out.findIndex(([n]) => n.toLowerCase() === name.toLowerCase());
    if (i >= 0) out.splice(i, 1);
    out.push([name, value]);
  };
  const h = data.headers;
  if (typeof h === "string" && h.trim()) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(h);
    } catch {
      throw bad('headers must be a JSON object, e.g. {"X-Campaign":"q3"}');
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw bad("headers must be a JSON object");
    for (const [k, v] of Object.entries(parsed)) set(k, String(v));
  } else if (h && typeof h === "object" && !Array.isArray(h)) {
    for (const [k, v] of Object.entries(h)) {
      if (typeof v !== "string") throw bad(`header ${k} must be a string`);
      set(k, v);
    }
  } else if (h !== undefined && h !== null && h !== "") throw bad("headers must be an object");
  for (const [k, v] of Object.entries(data))
    if (k.startsWith("header:") && typeof v === "string" && v !== "") set(k.slice(7), v);
  return out;
}

/**
 * Attachment bytes shared by many rows are read once. Up to `budget` bytes
 * are kept; beyond that, files are streamed from disk for each message.
 */
export class AttachmentCache {
  readonly #bytes = new Map<string, Promise<Buffer>>();
  #kept = 0;
  constructor(readonly budget = 64 * 1024 * 1024) {}

  async get(spec: string): Promise<Attachment> {
    const hash = spec.lastIndexOf("#");
    const [path, filename] =
      hash > 0 && hash < spec.length - 1 ? [spec.slice(0, hash), spec.slice(hash + 1)] : [spec, basename(spec)];
    const size = await regularFileSize(path, "attachment");
    if (this.#bytes.has(path) || this.#kept + size <= this.budget) {
      if (!this.#bytes.has(path)) {
        this.#kept += size;
        this.#bytes.set(path, readFile(path));
      }
      return { filename, source: { kind: "bytes", data: await this.#bytes.get(path)! } };
    }
    return { filename, source: { kind: "file", path, size } };
  }
}

/** A field a row leaves out: missing, null, or an empty CSV cell. */
const absent = (v: unknown) => v === undefined || v === null || v === "";

/**
 * A row's attachment path, read as every path is: from the current directory. A relative one
 * that is not there but beside the input (a sheet kept with its files) says so: the same
 * command from another directory would find it.
 */
async function rowAttachment(cache: AttachmentCache, spec: string, inputDir: string | undefined): Promise<Attachment> {
  try {
    return await cache.get(spec);
  } catch (e) {
    const path = spec.lastIndexOf("#") > 0 ? spec.slice(0, spec.lastIndexOf("#")) : spec;
    if (!(e instanceof MailsendError) || e.code !== "file_not_found" || inputDir === undefined || isAbsolute(path))
      throw e;
    const beside = join(inputDir, path);
    if (resolve(beside) === resolve(path) || !existsSync(beside)) throw e;
    throw new MailsendError("file_not_found", e.message, {
      hint: `Paths in the input are read from the current directory (${process.cwd()}), not the input's; ${beside} exists: run the command from ${inputDir}, or write the path from here (${relative(process.cwd(), beside)}).`,
    });
  }
}

async function attachmentsOf(
  data: Record<string, unknown>,
  defaults: string[],
  cache: AttachmentCache,
  inputDir?: string,
): Promise<Attachment[]> {
  const out: Attachment[] = [];
  for (const spec of defaults) out.push(await cache.get(spec));
  const a = data.attachments;
  if (absent(a)) return out;
  if (typeof a === "string") {
    // CSV: paths separated by ";".
    for (const p of a
      .split(";")
      .map((s) => s.trim())
      .filter(Boolean))
      out.push(await rowAttachment(cache, p, inputDir));
    return out;
  }
  if (!Array.isArray(a)) throw bad("attachments must be an array");
  for (const [i, item] of a.entries()) {
    if (typeof item === "string") out.push(await rowAttachment(cache, item, inputDir));
    else if (item && typeof item === "object" && typeof (item as { path?: unknown }).path === "string") {
      const { path, filename } = item as { path: string; filename?: unknown };
      const got = await rowAttachment(cache, path, inputDir);
      out.push(typeof filename === "string" && filename ? { ...got, filename } : got);
    } else if (item && typeof item === "object" && typeof (item as { content?: unknown }).content === "string") {
      const { content, filename } = item as { content: string; filename?: unknown };
      if (typeof filename !== "string" || !filename) throw bad(`attachments[${i}] needs a filename`);
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(content) || content.length % 4 !== 0)
        throw bad(`attachments[${i}].content must be base64`);
      out.push({ filename, source: { kind: "bytes", data: Buffer.from(content, "base64") } });
    } else throw bad(`attachments[${i}] must be a path, {path, filename} or {content, filename}`);
  }
  return out;
}

export interface ItemContext {
  defaults: RowDefaults;
  /** "auto": chosen per row from its message, as send chooses (transports/choose.ts), among `channels`. */
  transport: TransportName | "auto";
  /** The channels configured, for "auto". */
  channels?: Channels;
  cache: AttachmentCache;
  /** The item's idempotency key when the row does not give one (stable across resumes). */
  idempotencyKey: string;
}

/** Build and validate the message of one row; errors name the row. */
export async function messageOfRow(data: Record<string, unknown>, ctx: ItemContext): Promise<Message> {
  const d = ctx.defaults;
  const { subject, html, text } = contentOf(data, d);
  const from = str(data.from, "from") ?? d.from;
  const to = list(data.to, "to");
  checkComplete(data, { from, to, subject, html, text });
  const composed = html !== undefined && d.compose ? await composeHtmlBody(html, d.compose) : undefined;
  const parts: MessageParts = {
    from: from!,
    name: str(data.name, "name") ?? d.name,
    to,
    cc: list(data.cc, "cc"),
    bcc: list(data.bcc, "bcc"),
    subject: subject!,
    ...(html !== undefined ? { html: composed?.html ?? html } : {}),
    ...(text !== undefined ? { text } : {}),
    replyTo: str(data.reply_to, "reply_to") ?? d.replyTo,
    headers: headersOf(data, d.headers ?? []),
    attachments: [
      ...(d.attach?.length || !absent(data.attachments)
        ? await attachmentsOf(data, d.attach ?? [], ctx.cache, d.inputDir)
        : []),
      ...(composed?.parts ?? []),
    ],
    idempotencyKey: str(data.idempotency_key, "idempotency_key") ?? ctx.idempotencyKey,
    // Both bodies from the Markdown template: the text is the source of the HTML.
    ...(d.textIsPlainHtml && absent(data.html) && absent(data.text) ? { textIsPlainHtml: true } : {}),
  };
  // Errors name the row's fields (reply_to), not send's flags (--reply-to).
  const message = assembleMessage(parts, ctx.transport, (flag) => flag.replace(/^--/, "").replace(/-/g, "_"));
  return forChannel(message, ctx);
}

/** The row's subject and bodies: its own fields, else the templates filled with its variables. */
function contentOf(
  data: Record<string, unknown>,
  d: RowDefaults,
): { subject: string | undefined; html: string | undefined; text: string | undefined } {
  // Made only when a template is filled: rows that carry their own subject and body need none.
  let vars: Record<string, unknown> | undefined;
  const varsOf = () => (vars ??= variables(data));
  const subject =
    str(data.subject, "subject") ??
    (d.subject !== undefined ? render(d.subject, varsOf(), "text", d.labels?.subject ?? "--subject") : undefined);
  const html =
    str(data.html, "html") ??
    (d.htmlTemplate !== undefined
      ? render(d.htmlTemplate, varsOf(), "html", d.labels?.html ?? d.templateFlag ?? "--html-file")
      : undefined);
  const text =
    str(data.text, "text") ??
    (d.textTemplate !== undefined
      ? render(d.textTemplate, varsOf(), "text", d.labels?.text ?? d.templateFlag ?? "--text-file")
      : undefined);
  return { subject, html, text };
}

/** A row without a sender, a recipient, a subject or a body is refused, naming what it lacks. */
function checkComplete(
  data: Record<string, unknown>,
  got: { from?: string; to: string[]; subject?: string; html?: string; text?: string },
): void {
  const missing = [
    !got.from && "from",
    got.to.length === 0 && "to",
    !got.subject && "subject",
    !got.html && !got.text && "html or text",
  ].filter(Boolean);
  if (missing.length === 0) return;
  // A sheet's address column is often "Email" or "E-mail Address": say which name makes it the recipients.
  const hint =
    got.to.length === 0 && data.to === undefined
      ? `The recipients' column must be named "to"; this row has: ${Object.keys(data).slice(0, 20).join(", ")}.`
      : undefined;
  throw new MailsendError("invalid_message", `missing ${missing.join(", ")}`, hint ? { hint } : {});
}

/**
 * The message as its channel takes it. auto: the row's channel, as send chooses it; the batch's
 * transport chooses the same again for the message made here (with a text part added for SMTP,
 * which keeps it SMTP's).
 */
async function forChannel(message: Message, ctx: ItemContext): Promise<Message> {
  const channels = ctx.channels ?? { rest: true, smtp: true };
  return (await settleChannel(message, ctx.transport, channels, { textPart: ctx.defaults.compose !== undefined }))
    .message;
}
