/**
 * A message in the API's shape -> the validated Message, through the same
 * assembleMessage() as `mailsend send` and every batch row.
 */
import { basename } from "node:path";
import { MailsendError } from "../core/errors.js";
import { checkSingleLine, type HeaderList } from "../core/headers.js";
import type { Attachment, Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";
import { assembleMessage } from "../message/build.js";
import { regularFileSize } from "../core/read.js";
import type { AttachmentInput, MessageInput } from "./types.js";

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
]);
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function usage(message: string): MailsendError {
  return new MailsendError("usage", message);
}

function optString(m: Record<string, unknown>, field: string): string | undefined {
  const v = m[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw usage(`message.${field} must be a string`);
  return v;
}

function addressList(m: Record<string, unknown>, field: string): string[] {
  const v = m[field];
  if (v === undefined || v === null) return [];
  if (typeof v === "string") return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v as string[];
  throw usage(`message.${field} must be a string or an array of strings`);
}

function headersOf(v: unknown): HeaderList {
  if (v === undefined || v === null) return [];
  if (typeof v !== "object" || Array.isArray(v))
    throw usage("message.headers must be an object of header names to values");
  return Object.entries(v as Record<string, unknown>).map(([name, value]) => {
    if (typeof value !== "string") throw usage(`message.headers[${JSON.stringify(name)}] must be a string`);
    return [name, value];
  });
}

async function attachmentOf(a: AttachmentInput, i: number): Promise<Attachment> {
  const where = `message.attachments[${i}]`;
  if (!a || typeof a !== "object") throw usage(`${where} must be {filename, content} or {path, filename?}`);
  const contentType = (a as { contentType?: unknown }).contentType;
  if (contentType !== undefined && typeof contentType !== "string")
    throw usage(`${where}.contentType must be a string`);
  const extra = contentType ? { contentType } : {};
  let filename = (a as { filename?: unknown }).filename;
  if (filename !== undefined && typeof filename !== "string") throw usage(`${where}.filename must be a string`);
  const checkName = (name: string) => {
    if (!name) throw new MailsendError("invalid_message", `${where}.filename must not be empty`);
    checkSingleLine(name, `${where}.filename`);
    if (/[/\\]/.test(name))
      throw new MailsendError("invalid_message", `${where}.filename must not contain a path separator`);
  };
  if ("content" in a && a.content !== undefined) {
    if ("path" in a) throw usage(`${where}: give content or path, not both`);
    if (typeof filename !== "string") throw usage(`${where} needs a filename`);
    checkName(filename);
    const c = a.content;
    if (typeof c === "string") {
      if (!BASE64.test(c))
        throw new MailsendError("invalid_message", `${where}.content must be base64 (or give a Buffer)`);
      return { filename, source: { kind: "bytes", data: Buffer.from(c, "base64") }, ...extra };
    }
    if (c instanceof Uint8Array) {
      return {
        filename,
        source: { kind: "bytes", data: Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength) },
        ...extra,
      };
    }
    throw usage(`${where}.content must be a Buffer, a Uint8Array or a base64 string`);
  }
  const path = (a as { path?: unknown }).path;
  if (typeof path !== "string" || !path) throw usage(`${where} must be {filename, content} or {path, filename?}`);
  filename ??= basename(path);
  checkName(filename as string);
  const size = await regularFileSize(path, "attachment");
  return { filename: filename as string, source: { kind: "file", path, size }, ...extra };
}

/** Validate a message given in the API's shape, for this transport. */
export async function messageOf(
  input: MessageInput,
  transport: TransportName,
  idempotencyKey?: string,
): Promise<Message> {
  if (!input || typeof input !== "object" || Array.isArray(input)) throw usage("the message must be an object");
  const m = input as unknown as Record<string, unknown>;
  const unknown = Object.keys(m).filter((k) => !FIELDS.has(k) && m[k] !== undefined);
  if (unknown.length > 0) {
    throw usage(`unknown message field(s): ${unknown.join(", ")} (known: ${[...FIELDS].join(", ")})`);
  }
  const from = optString(m, "from");
  const to = addressList(m, "to");
  const subject = optString(m, "subject");
  const html = optString(m, "html");
  const text = optString(m, "text");
  const missing = [
    !from && "from",
    to.length === 0 && "to",
    !subject && "subject",
    !html && !text && "html or text",
  ].filter(Boolean);
  if (missing.length > 0) throw usage(`the message is missing ${missing.join(", ")}`);
  const attachments = m.attachments ?? [];
  if (!Array.isArray(attachments)) throw usage("message.attachments must be an array");
  if (idempotencyKey !== undefined && typeof idempotencyKey !== "string")
    throw usage("options.idempotencyKey must be a string");
  const parts = {
    from: from!,
    name: optString(m, "name"),
    to,
    cc: addressList(m, "cc"),
    bcc: addressList(m, "bcc"),
    subject: subject!,
    ...(html ? { html } : {}),
    ...(text ? { text } : {}),
    replyTo: optString(m, "reply_to"),
    headers: headersOf(m.headers),
    attachments: await Promise.all((attachments as AttachmentInput[]).map(attachmentOf)),
    ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
  };
  // Errors name the message's fields (reply_to) and options.idempotencyKey, not send's flags.
  return assembleMessage(parts, transport, (flag) =>
    flag === "--idempotency-key" ? "options.idempotencyKey" : `message.${flag.replace(/^--/, "").replace(/-/g, "_")}`,
  );
}
