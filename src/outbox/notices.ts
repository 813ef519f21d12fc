/**
 * The outbox's notices: one to the sender of a message it gives up (refused for good, or too old),
 * and one "still trying" warning for a message queued longer than MAILSEND_QUEUE_WARN_AFTER, as an
 * MTA's bounces and delay warnings. Each goes through the outbox itself, as a message of its own
 * with a null envelope sender, and never one about a message that was itself automatic: a notice
 * is never answered by another.
 */
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const createHash = (algorithm: string) => process.getBuiltinModule("node:crypto").createHash(algorithm);
import { hostname } from "node:os";
import { parseMailbox1, type Mailbox } from "../core/address.js";
import type { Env } from "../core/env.js";
import { escapeHtml, type Message } from "../core/message.js";
import type { MailsendError } from "../core/errors.js";
import { loadSettings } from "../settings/profile.js";
import { noticeSettings } from "../settings/notices.js";
import type { Chosen, OutboxSender } from "./deliver.js";
import { noticeMime, type NoticeRecipient } from "./notice-mime.js";
import type { Outbox } from "./store.js";
import type { QueuedMessage } from "./types.js";

export type NoticeKind = "failed" | "delayed";

/** The header block of a raw message: everything before the first empty line. */
export function headerBlock(raw: Buffer): Buffer {
  const text = raw.subarray(0, Math.min(raw.length, 256 * 1024)).toString("latin1");
  const m = /\r?\n\r?\n/.exec(text);
  return m ? raw.subarray(0, m.index + m[0].length) : raw.subarray(0, text.length);
}

/** The unfolded values of one header field (case-insensitive name). */
export function headerValues(block: Buffer, name: string): string[] {
  const unfolded = block.toString("latin1").replace(/\r?\n[ \t]+/g, " ");
  const want = name.toLowerCase();
  const out: string[] = [];
  for (const line of unfolded.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === want) out.push(line.slice(colon + 1).trim());
  }
  return out;
}

/**
 * A message no notice is sent about (RFC 3834 section 2, RFC 3464 section 2): a notice itself, one
 * with a null envelope sender, one that says it was sent by a program (Auto-Submitted other than
 * no), or a list's or bulk mail (Precedence bulk, junk or list).
 */
export function isAutomatic(meta: QueuedMessage["meta"], raw: Buffer): boolean {
  if (meta.source === "notice" || meta.envelope.from.trim() === "") return true;
  const block = headerBlock(raw);
  if (headerValues(block, "auto-submitted").some((v) => v.split(";")[0]!.trim().toLowerCase() !== "no")) return true;
  return headerValues(block, "precedence").some((v) => /^(bulk|junk|list)$/i.test(v.trim()));
}

/** RFC 3463's status for what the last attempt ran into. */
function statusOf(err: MailsendError, kind: NoticeKind, tooOld: boolean): string {
  const said = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/.exec(err.message);
  if (kind === "delayed") return said && said[1] === "4" ? said[0] : "4.0.0";
  if (tooOld) return "4.4.7";
  if (said && said[1] === "5") return said[0];
  if (err.code === "too_large") return "5.3.4";
  if (err.code === "invalid_address") return "5.1.3";
  return "5.0.0";
}

/** The Diagnostic-Code: an SMTP reply as the server wrote it, else mailsend's words. */
function diagnosticOf(text: string): string {
  const reply = /\b([245]\d\d)[ -]([245]\.\d{1,3}\.\d{1,3}\b.*)$/.exec(text);
  return reply ? `smtp; ${reply[1]} ${reply[2]}` : `x-mailsend; ${text}`;
}

function recipientsOf(queued: QueuedMessage, err: MailsendError, status: string): NoticeRecipient[] {
  // Refused in part: the others have it; the notice names only those that do not.
  const refused = err.partial?.refused;
  if (refused && refused.length > 0)
    return refused.map((r) => ({ address: r.address, status, diagnostic: diagnosticOf(r.reply || err.message) }));
  return queued.meta.envelope.to.map((address) => ({ address, status, diagnostic: diagnosticOf(err.message) }));
}

export interface PlannedNotice {
  raw: Buffer;
  envelope: { from: ""; to: string[] };
  idempotencyKey: string;
  profile?: string;
  subject: string;
  headerFrom: string;
}

export interface NoticeContext {
  env: Env;
  maxAgeMs: number;
  attempts: number;
  /** The original was given up for its age (not refused). */
  tooOld?: boolean;
  now?: number;
}

/**
 * The notice a message is due, or undefined when it gets none (turned off, automatic, already
 * sent one of this kind, for a delay: not queued long enough). Throws a config error for a bad
 * notice setting.
 */
export function planNotice(
  kind: NoticeKind,
  queued: QueuedMessage,
  err: MailsendError,
  ctx: NoticeContext,
): PlannedNotice | undefined {
  const { meta, raw, state } = queued;
  if (state.notices?.[kind] !== undefined || isAutomatic(meta, raw)) return undefined;
  const settings = noticeSettings(loadSettings(meta.profile, ctx.env).env);
  if (settings.mode === "off") return undefined;
  const now = ctx.now ?? Date.now();
  if (kind === "delayed" && (settings.warnAfterMs <= 0 || now - meta.createdAt < settings.warnAfterMs))
    return undefined;
  const sender = parseMailbox1(meta.envelope.from, "envelope sender");
  const to: Mailbox[] = settings.mode === "postmaster" ? [] : [sender];
  const pm = settings.postmaster;
  if (pm && !to.some((t) => t.address.toLowerCase() === pm.address.toLowerCase())) to.push(pm);
  if (to.length === 0) return undefined;
  const block = headerBlock(raw);
  const ownFrom = meta.headerFrom ? tryMailbox(meta.headerFrom) : undefined;
  const from: Mailbox = { name: "Mail Delivery System", address: (settings.defaultFrom ?? ownFrom ?? sender).address };
  const host = hostname() || "localhost";
  const status = statusOf(err, kind, ctx.tooOld === true);
  const messageId = headerValues(block, "message-id")[0];
  const mime = noticeMime({
    kind,
    host,
    from,
    to,
    originalHeader: block,
    ...(meta.subject !== undefined ? { originalSubject: meta.subject } : {}),
    ...(messageId && !meta.stampedMessageId ? { originalMessageId: messageId } : {}),
    outboxId: meta.id,
    queuedAt: meta.createdAt,
    lastAttemptAt: now,
    attempts: ctx.attempts,
    lastError: err.message,
    recipients: recipientsOf(queued, err, status),
    ...(kind === "delayed" ? { retryUntil: meta.createdAt + ctx.maxAgeMs } : {}),
  });
  return {
    raw: mime,
    envelope: { from: "", to: to.map((t) => t.address) },
    // The same key for the same notice: queued twice after a crash, the service drops the second.
    idempotencyKey: `notice-${kind}-${createHash("sha256").update(meta.idempotencyKey).digest("hex").slice(0, 40)}`,
    ...(meta.profile ? { profile: meta.profile } : {}),
    subject: kind === "failed" ? "Undelivered Mail Returned to Sender" : "Delayed Mail (still being retried)",
    headerFrom: `${from.name} <${from.address}>`,
  };
}

function tryMailbox(s: string): Mailbox | undefined {
  try {
    return parseMailbox1(s, "From");
  } catch {
    return undefined;
  }
}

/** Into the outbox, due now; returns its id. */
export function queueNotice(outbox: Outbox, n: PlannedNotice): Promise<string> {
  return outbox.add({
    raw: n.raw,
    envelope: n.envelope,
    idempotencyKey: n.idempotencyKey,
    source: "notice",
    ...(n.profile ? { profile: n.profile } : {}),
    subject: n.subject,
    headerFrom: n.headerFrom,
    stampedMessageId: true,
  });
}

/**
 * The channel a notice goes over: whole where one carries it (SMTP: REST has no multipart/report).
 * With REST alone, its readable part as HTML: the person learns what happened, the machine-readable
 * parts are lost.
 */
export function chooseNotice(sender: OutboxSender, message: Message): { message: Message; chosen: Chosen } {
  try {
    return { message, chosen: sender.choose(message) };
  } catch (e) {
    if ((e as { broken?: boolean }).broken) throw e;
    const html = `<!DOCTYPE html>\n<html><body><pre style="font-family: monospace; white-space: pre-wrap">${escapeHtml(message.text ?? "")}</pre></body></html>\n`;
    const { raw: _raw, text: _text, ...rest } = message;
    const plain: Message = { ...rest, html, attachments: [], headers: [["Auto-Submitted", "auto-replied"]] };
    return {
      message: plain,
      chosen: { ...sender.choose(plain), reason: "REST only: the notice's readable part, as HTML" },
    };
  }
}
