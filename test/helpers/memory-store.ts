/**
 * An in-memory MessageStore for tests of the store's readers (the web
 * inbox), plus a helper that composes a real .eml with nodemailer's
 * MailComposer so the readers parse what a client would send.
 */
import MailComposer from "nodemailer/lib/mail-composer/index.js";
import type Mail from "nodemailer/lib/mailer/index.js";
import type { MessageStore, StoredMessage } from "../../src/sandbox/types.js";

export interface AddOptions {
  channel?: "rest" | "smtp";
  keyId?: string;
  envelope?: { from: string; to: string[] };
  idempotencyKey?: string;
  /** Overrides of the metadata derived from the .eml (e.g. a hostile subject the MIME layer would encode). */
  meta?: Partial<Omit<StoredMessage, "id" | "size">>;
}

export class MemoryStore implements MessageStore {
  private readonly messages = new Map<string, { meta: StoredMessage; raw: Buffer }>();
  private readonly listeners = new Set<(m: StoredMessage) => void>();
  private seq = 0;

  get subscriberCount(): number {
    return this.listeners.size;
  }

  async list(opts: { limit?: number } = {}): Promise<StoredMessage[]> {
    const all = [...this.messages.values()].map((e) => e.meta).sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return opts.limit === undefined ? all : all.slice(0, opts.limit);
  }

  async get(id: string): Promise<StoredMessage | undefined> {
    return this.messages.get(id)?.meta;
  }

  async raw(id: string): Promise<Buffer | undefined> {
    return this.messages.get(id)?.raw;
  }

  subscribe(listener: (m: StoredMessage) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Store an .eml as the sandbox would: metadata from its headers, then notify subscribers. */
  async add(raw: Buffer | string, opts: AddOptions = {}): Promise<StoredMessage> {
    const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw, "utf8");
    const { default: PostalMime } = await import("postal-mime");
    const email = await PostalMime.parse(bytes);
    const mailbox = (a: { address?: string | undefined } | undefined): string => a?.address ?? "";
    const from = mailbox(email.from);
    const to = (email.to ?? []).map(mailbox).filter((a) => a !== "");
    const now = Date.now();
    const id = `${now.toString(36).padStart(9, "0")}-${String(++this.seq).padStart(6, "0")}`;
    const meta: StoredMessage = {
      id,
      receivedAt: new Date(now).toISOString(),
      channel: opts.channel ?? "rest",
      keyId: opts.keyId ?? "key_test",
      envelope: opts.envelope ?? { from, to },
      from,
      to,
      subject: email.subject ?? "",
      size: bytes.length,
      attachments: email.attachments.map((a) => ({
        filename: a.filename ?? "",
        contentType: a.mimeType,
        size: typeof a.content === "string" ? Buffer.byteLength(a.content) : a.content.byteLength,
      })),
      messageId: email.messageId ?? `<${id}@sandbox.test>`,
      ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
      ...opts.meta,
    };
    this.messages.set(id, { meta, raw: bytes });
    for (const l of [...this.listeners]) l(meta);
    return meta;
  }
}

/** A complete .eml built by nodemailer's composer (what an SMTP client sends). */
export async function composeEml(mail: Mail.Options): Promise<Buffer> {
  const node = new MailComposer({
    messageId: `<${Math.random().toString(36).slice(2)}@test.example>`,
    ...mail,
  }).compile();
  node.keepBcc = false;
  return await new Promise<Buffer>((resolve, reject) => {
    node.build((err, message) => (err ? reject(err) : resolve(message)));
  });
}
