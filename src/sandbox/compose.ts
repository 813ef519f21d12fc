/**
 * A REST send request as the RFC 5322 message the service would send: built
 * with nodemailer's MailComposer from already validated fields (the shared
 * schema ran first), with attachments decoded from base64 byte for byte.
 *
 * prepareRest() does the cheap part (addresses, metadata) and returns plain,
 * cloneable composer options; building the bytes is the expensive part, done
 * inline or in a worker thread (compose-pool.ts) with the same options.
 */
import { Writable } from "node:stream";
import MailComposer from "nodemailer/lib/mail-composer";
import * as mimeFuncs from "nodemailer/lib/mime-funcs";
import { formatMailbox, parseAddressList, parseMailbox1, type Mailbox } from "../core/address.js";
import type { SendRequest } from "../core/schema.js";
import { MESSAGE_ID_DOMAIN, type StoredAttachment } from "./types.js";

const detectMimeType = (mimeFuncs as unknown as { detectMimeType(name: string): string }).detectMimeType;

/** MailComposer options that survive structured cloning (no Buffers, no Dates). */
export interface ComposerOptions {
  from: { name: string; address: string };
  to: Array<{ name: string; address: string }>;
  replyTo?: { name: string; address: string };
  subject: string;
  html: string;
  headers: Array<{ key: string; value: string }>;
  attachments: Array<{ filename: string; content: string; encoding: "base64"; contentType: string }>;
  messageId: string;
  /** ISO time. */
  date: string;
}

export interface Prepared {
  options: ComposerOptions;
  from: string;
  to: string[];
  envelope: { from: string; to: string[] };
  subject: string;
  attachments: StoredAttachment[];
  messageIdHeader: string;
}

const box = (m: Mailbox) => ({ name: m.name ?? "", address: m.address });

/** Bytes encoded by a valid base64 string (the schema checked it is one). */
function base64Size(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return (b64.length / 4) * 3 - pad;
}

export function prepareRest(req: SendRequest, id: string, date = new Date()): Prepared {
  const to = parseAddressList(req.to, "to", false);
  const from: Mailbox = req.name ? { name: req.name, address: req.from } : { address: req.from };
  const replyTo = req.reply_to ? parseMailbox1(req.reply_to, "reply_to") : undefined;
  const files = (req.attachments ?? []).map((a) => ({
    filename: a.filename,
    content: a.content,
    encoding: "base64" as const,
    contentType: detectMimeType(a.filename) || "application/octet-stream",
  }));
  const messageIdHeader = `<${id}@${MESSAGE_ID_DOMAIN}>`;
  const envelope = { from: req.from, to: to.map((m) => m.address) };
  return {
    options: {
      from: box(from),
      to: to.map(box),
      ...(replyTo ? { replyTo: box(replyTo) } : {}),
      subject: req.subject,
      html: req.html,
      headers: Object.entries(req.headers ?? {}).map(([key, value]) => ({ key, value })),
      attachments: files,
      messageId: messageIdHeader,
      date: date.toISOString(),
    },
    from: formatMailbox(from),
    to: to.map(formatMailbox),
    envelope,
    subject: req.subject,
    attachments: files.map((f) => ({ filename: f.filename, contentType: f.contentType, size: base64Size(f.content) })),
    messageIdHeader,
  };
}

interface MimeTree {
  build(): Promise<Buffer>;
  stream?(out: NodeJS.WritableStream, options: object, done: (err?: Error | null) => void): void;
  newline?: unknown;
  _transforms?: unknown[];
  _processFuncs?: unknown[];
}

/**
 * MailComposer's bytes. build() joins its output through stream.pipeline()
 * and a final-newline transform, which costs about as much again as making
 * the message; when the tree has no transforms of its own (ours never does)
 * this writes it straight into a collector and adds the final newline the
 * way that transform does, for the same bytes at about half the CPU. Any
 * other tree goes through build().
 *
 * Self-contained (its modules come in as arguments): the writer thread runs
 * this very function's source.
 */
export function composeBytes(
  Composer: new (mail: object) => { compile(): MimeTree },
  Writable: typeof import("node:stream").Writable,
  options: ComposerOptions,
): Promise<Buffer> {
  const tree = new Composer({ ...options, date: new Date(options.date) }).compile();
  const direct =
    typeof tree.stream === "function" &&
    !tree.newline &&
    (tree._transforms ?? []).length === 0 &&
    (tree._processFuncs ?? []).length === 0;
  if (!direct) return tree.build();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk);
        size += chunk.length;
        done();
      },
    });
    tree.stream!(sink, {}, (err) => {
      if (err) return reject(err);
      const last = size > 0 ? chunks[chunks.length - 1]![chunks[chunks.length - 1]!.length - 1] : undefined;
      if (last === 0x0d) chunks.push(Buffer.from("\n"));
      else if (last !== 0x0a) chunks.push(Buffer.from("\r\n"));
      resolve(Buffer.concat(chunks));
    });
  });
}

/** Build the message bytes in this thread. */
export function buildInline(options: ComposerOptions): Promise<Buffer> {
  return composeBytes(MailComposer as unknown as Parameters<typeof composeBytes>[0], Writable, options);
}
