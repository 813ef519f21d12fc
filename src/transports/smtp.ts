/**
 * SMTP submission through nodemailer: STARTTLS required on 587 (never a
 * silent plain-text fallback), implicit TLS on 465, AUTH LOGIN with the API
 * key as password (PLAIN when the server does not offer LOGIN).
 *
 * Nodemailer is handed {name, address} objects and an explicit envelope,
 * never an address string it would parse again.
 */
// Built-ins by getBuiltinModule, not ES imports: Node would build each module's whole namespace.
// node:crypto when first used: it is slow to load, and listing the outbox needs none of it.
const createHash = (algorithm: string) => process.getBuiltinModule("node:crypto").createHash(algorithm);
const { connect: netConnect } = process.getBuiltinModule("node:net");
import type { Socket } from "node:net";
import { PassThrough, pipeline } from "node:stream";
const { format } = process.getBuiltinModule("node:util");
import type { SendMailOptions } from "nodemailer";
import MailComposer from "nodemailer/lib/mail-composer";
import type { SmtpConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { Say } from "../core/setting-names.js";
import type { Message } from "../core/message.js";
import { allRecipients } from "../core/message.js";
import { makeRedactor, REDACTED, shownSmtpUser } from "../core/redact.js";
import type { PreviewSink, SendContext, SendResult, Transport, TransportOptions } from "../core/transport.js";
import { mimeTree, treeLines } from "../compose/tree.js";
import { trustedCas } from "../net/ca.js";
import { noStartTlsError, revokedKeyHint, TOO_LARGE_HINT } from "./hints.js";
import { connectError, speaksHttp, speaksTls, TRUST_HINT } from "../net/errors.js";
import { smtpSocket } from "./proxy.js";

type MailOptions = SendMailOptions;

/** What nodemailer attaches to its errors (also read by `mailsend doctor`). */
export interface SmtpError extends Error {
  code?: string;
  originalCode?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  rejected?: string[];
}

/**
 * The Message-ID of a message, derived from its idempotency key: a resend of
 * the same message (a retry, a resumed batch) carries the same one, so the id
 * we report is the id of the copy the server kept when it drops the resend as
 * a duplicate. Same shape as nodemailer's own (UUID-like @ the sender's domain).
 */
export function stableMessageId(m: Message): string {
  const h = createHash("sha256").update(`mailsend message-id\0${m.idempotencyKey}`).digest("hex");
  return `<${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}@${m.from.address.split("@").pop()}>`;
}

/** The message as nodemailer options, with the envelope spelled out. */
export function mailOptions(m: Message): MailOptions {
  const envelope = m.envelope
    ? { from: m.envelope.from, to: [...m.envelope.to] }
    : { from: m.from.address, to: allRecipients(m).map((r) => r.address) };
  if (m.raw) return { envelope, raw: m.raw };
  const box = (b: { name?: string; address: string }) => ({ name: b.name ?? "", address: b.address });
  return {
    envelope,
    from: box(m.from),
    to: m.to.map(box),
    ...(m.cc.length ? { cc: m.cc.map(box) } : {}),
    // Bcc goes only into the envelope: nodemailer leaves it out of the headers it sends.
    ...(m.bcc.length ? { bcc: m.bcc.map(box) } : {}),
    ...(m.replyTo ? { replyTo: box(m.replyTo) } : {}),
    subject: m.subject,
    // A Message-ID given as a custom header wins (nodemailer would replace it with this one).
    ...(m.headers.some(([key]) => key.toLowerCase() === "message-id") ? {} : { messageId: stableMessageId(m) }),
    ...(m.text !== undefined ? { text: m.text } : {}),
    ...(m.html !== undefined ? { html: m.html } : {}),
    headers: [
      ...m.headers.map(([key, value]) => ({ key, value })),
      { key: "X-Idempotency-Key", value: m.idempotencyKey },
    ],
    attachments: m.attachments.map((a) => ({
      filename: a.filename,
      ...(a.source.kind === "file" ? { path: a.source.path } : { content: a.source.data }),
      ...(a.contentType ? { contentType: a.contentType } : {}),
      // An inline image: nodemailer puts parts with a cid beside the HTML in multipart/related.
      ...(a.cid !== undefined ? { cid: a.cid, contentDisposition: "inline" as const } : {}),
    })),
  };
}

/** The first envelope address whose local part is not ASCII (it needs SMTPUTF8), if any. */
export function needsSmtpUtf8(m: Message): string | undefined {
  return [m.from, ...allRecipients(m)]
    .map((b) => b.address)
    .find((a) => /[^\x00-\x7f]/.test(a.slice(0, a.lastIndexOf("@"))));
}

function rawMessageId(raw: Buffer): string | undefined {
  const head =
    raw
      .subarray(0, Math.min(raw.length, 64 * 1024))
      .toString("latin1")
      .split(/\r?\n\r?\n/)[0] ?? "";
  return /^message-id:\s*(<[^>\r\n]+>)/im.exec(head)?.[1];
}

export class SmtpTransport implements Transport {
  readonly name = "smtp" as const;
  readonly #config: SmtpConfig;
  readonly #redact: (s: string) => string;
  readonly #ca: string[] | undefined;
  /** With a pool (batch): one transporter per auth method, its connections reused across messages. */
  readonly #poolSize: number | undefined;
  readonly #pools = new Map<string, Transporter>();

  constructor(config: SmtpConfig, opts: TransportOptions = {}) {
    this.#config = config;
    this.#poolSize = opts.pool;
    this.#redact = makeRedactor(config.apiKey, config.user);
    this.#ca = config.caFile ? trustedCas(config.caFile) : undefined;
  }

  get #label(): string {
    return `${this.#config.host}:${this.#config.port}`;
  }

  #transportOptions(authMethod: "LOGIN" | "PLAIN", trace?: (l: string) => void) {
    const c = this.#config;
    const implicit = c.tls === "implicit";
    return {
      host: c.host,
      port: c.port,
      secure: implicit,
      requireTLS: !implicit,
      ...(c.clientName ? { name: c.clientName } : {}),
      auth: { user: c.user, pass: c.apiKey, method: authMethod },
      // No servername here: nodemailer sets it for a host name and leaves it out for an
      // IP address (SNI with an IP is invalid and makes Node print DEP0123 on stderr).
      tls: {
        rejectUnauthorized: !c.insecure,
        ...(this.#ca ? { ca: this.#ca } : {}),
      },
      connectionTimeout: c.timeoutMs,
      // A STARTTLS client on an implicit-TLS port waits for a greeting that never comes.
      greetingTimeout: Math.min(c.timeoutMs, 10_000),
      socketTimeout: c.timeoutMs,
      disableFileAccess: false,
      disableUrlAccess: true,
      ...(trace ? { logger: traceLogger(trace), debug: true } : { logger: false }),
    };
  }

  async preview(m: Message, sink: PreviewSink, opts: { json: boolean }): Promise<void> {
    const options = mailOptions(m);
    const raw = m.raw ?? (await new MailComposer(options).compile().build());
    const c = this.#config;
    const envelope = options.envelope as { from: string; to: string[] };
    const tree = mimeTree(raw);
    const utf8 = needsSmtpUtf8(m);
    if (opts.json) {
      sink.write(
        `${JSON.stringify({
          dry_run: true,
          transport: "smtp",
          server: { host: c.host, port: c.port, tls: c.tls, user: c.user, password: REDACTED },
          envelope,
          ...(utf8 ? { smtputf8: true } : {}),
          mime_tree: tree,
          message: raw.toString("utf8"),
        })}\n`,
      );
      return;
    }
    sink.write(
      `# SMTP ${c.host}:${c.port} (${c.tls === "implicit" ? "implicit TLS" : "STARTTLS required"}), AUTH as ${shownSmtpUser(c.user, c.apiKey)} with password ${REDACTED}\n`,
    );
    if (utf8) sink.write(`# needs SMTPUTF8 (${utf8}): sent only if the server offers it\n`);
    sink.write("# MIME tree:\n");
    for (const line of treeLines(tree)) sink.write(`#   ${line}\n`);
    sink.write(`MAIL FROM:<${envelope.from}>\n`);
    for (const r of envelope.to) sink.write(`RCPT TO:<${r}>\n`);
    sink.write("DATA\n");
    sink.write(raw);
    sink.write(raw.length && raw[raw.length - 1] === 0x0a ? ".\n" : "\n.\n");
  }

  async send(m: Message, ctx: SendContext = {}): Promise<SendResult> {
    const trace = ctx.trace ? (line: string) => ctx.trace!(this.#redact(line)) : undefined;
    try {
      await this.#checkSmtpUtf8(m, trace);
      return await this.#sendWith("LOGIN", m, trace, ctx.signal);
    } catch (e) {
      // 504: LOGIN not offered. Nothing was sent, so one more try with PLAIN is safe.
      const err = e as SmtpError;
      if (err.responseCode === 504 && err.command?.startsWith("AUTH")) {
        trace?.("* AUTH LOGIN not offered; retrying with AUTH PLAIN");
        try {
          return await this.#sendWith("PLAIN", m, trace, ctx.signal);
        } catch (e2) {
          throw this.#classify(e2 as SmtpError);
        }
      }
      throw this.#classify(err);
    }
  }

  /** Whether the server offers SMTPUTF8 (RFC 6531), once asked. */
  #utf8Offered: boolean | undefined;

  /**
   * An address with a non-ASCII local part can only be given to a server that
   * offers SMTPUTF8; nodemailer would send it without, leaving the server to
   * mangle or bounce it. So the server is asked first (EHLO after STARTTLS,
   * then QUIT: no message), and without SMTPUTF8 nothing is sent.
   */
  async #checkSmtpUtf8(m: Message, trace?: (l: string) => void): Promise<void> {
    const address = needsSmtpUtf8(m);
    if (address === undefined) return;
    if (this.#utf8Offered === undefined) {
      trace?.(`* ${address} needs SMTPUTF8: asking ${this.#label} whether it offers it`);
      this.#utf8Offered = await this.#offersSmtpUtf8(trace);
    }
    if (this.#utf8Offered) return;
    throw new MailsendError(
      "invalid_address",
      `${address} has a non-ASCII local part, which needs SMTPUTF8, but ${this.#label} does not offer it; nothing was sent`,
      {
        hint: "Ask the recipient for an ASCII address, or send through a server that supports SMTPUTF8. mailsend never rewrites the local part of an address.",
      },
    );
  }

  async #offersSmtpUtf8(trace?: (l: string) => void): Promise<boolean> {
    const { default: SMTPConnection } = await loadSmtpConnection();
    const { auth: _auth, ...options } = this.#transportOptions("LOGIN", trace);
    const proxy = this.#config.proxy;
    const connection = proxy
      ? await smtpSocket(proxy, this.#config.host, this.#config.port, this.#config.timeoutMs)
      : undefined;
    const conn = new SMTPConnection({ ...options, ...(connection ? { connection } : {}) } as ConstructorParameters<
      typeof SMTPConnection
    >[0]);
    // Every error of this connection goes to the promise (a later one, after QUIT, nowhere): never an unhandled 'error' event.
    let fail: (e: Error) => void = () => {};
    conn.on("error", (e: Error) => fail(e));
    try {
      await new Promise<void>((resolve, reject) => {
        fail = reject;
        conn.connect(() => resolve());
      });
      return ((conn as unknown as { _supportedExtensions?: string[] })._supportedExtensions ?? []).includes("SMTPUTF8");
    } finally {
      fail = () => {};
      try {
        conn.quit();
      } catch {
        conn.close();
      }
    }
  }

  /** --smtp-proxy: nodemailer's connections are opened through it (getSocket). */
  #proxied(): {
    getSocket?: (
      options: unknown,
      callback: (err: Error | null, socketOptions?: { connection: Socket }) => void,
    ) => void;
  } {
    const c = this.#config;
    const proxy = c.proxy;
    if (!proxy) return {};
    return {
      getSocket: (_options, callback) => {
        smtpSocket(proxy, c.host, c.port, c.timeoutMs).then(
          (connection) => callback(null, { connection }),
          (e: Error) => callback(e),
        );
      },
    };
  }

  #transporter(
    nodemailer: Nodemailer,
    method: "LOGIN" | "PLAIN",
    trace?: (l: string) => void,
    watch?: GreetingWatch,
  ): Transporter {
    if (this.#poolSize === undefined) {
      return watchHandOver(
        nodemailer.createTransport({
          ...this.#transportOptions(method, trace),
          ...(watch ? { getSocket: watch.getSocket } : this.#proxied()),
        }),
      );
    }
    let pool = this.#pools.get(method);
    if (!pool) {
      // One TLS handshake and AUTH per connection, not per message.
      pool = watchHandOver(
        nodemailer.createTransport({
          ...this.#transportOptions(method, trace),
          ...this.#proxied(),
          pool: true,
          maxConnections: this.#poolSize,
          maxMessages: 1000,
        }),
      );
      this.#pools.set(method, pool);
    }
    return pool;
  }

  async #sendWith(
    method: "LOGIN" | "PLAIN",
    m: Message,
    trace?: (l: string) => void,
    stop?: AbortSignal,
  ): Promise<SendResult> {
    // One message on its own connection, STARTTLS: watch for a port that waits for TLS.
    // (Not through a proxy: its probes would go to the server directly.)
    const watch =
      this.#poolSize === undefined && this.#config.tls === "starttls" && !this.#config.proxy
        ? new GreetingWatch(this.#config)
        : undefined;
    const transport = this.#transporter(await loadNodemailer(), method, trace, watch);
    let handedOver = false;
    try {
      // Stopped by the caller (a deadline, an interrupt) or by the watch (a TLS port): nodemailer ends the session.
      const signals = [watch?.signal, stop].filter((x): x is AbortSignal => x !== undefined);
      const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
      const options = { ...mailOptions(m), [HAND_OVER]: () => (handedOver = true), ...(signal ? { signal } : {}) };
      const info = await transport.sendMail(options as SendMailOptions).catch((e: SmtpError) => {
        throw this.#sessionFailure(e, m, { watch, stop, handedOver });
      });
      const rejected = (info.rejected ?? []).map(String);
      if (rejected.length > 0) throw this.#partial(m, info, rejected);
      return {
        transport: "smtp",
        messageId: (m.raw ? rawMessageId(m.raw) : info.messageId) ?? "",
        // Who it went to: the envelope's (a relayed message's Bcc is only there), else the headers'.
        recipients: m.envelope ? [...m.envelope.to] : allRecipients(m).map((r) => r.address),
        idempotencyKey: m.idempotencyKey,
        smtpResponse: this.#redact(String(info.response ?? "")),
        attempts: 1,
      };
    } finally {
      watch?.stop();
      if (this.#poolSize === undefined) transport.close();
    }
  }

  /**
   * What a failed session means beyond the server's reply: the port speaks TLS or HTTP, the
   * caller stopped before the message was handed over, or the whole message went out unanswered.
   */
  #sessionFailure(
    e: SmtpError,
    m: Message,
    at: { watch: GreetingWatch | undefined; stop: AbortSignal | undefined; handedOver: boolean },
  ): Error {
    if (at.watch?.mismatch === "tls") {
      return new MailsendError(
        "tls_mismatch",
        `${this.#label} expects TLS from the first byte, but mailsend is set to STARTTLS`,
        {
          cause: e,
          hint: (s) =>
            `Use ${s.value("smtpTls", "implicit", true)} for this port, or the STARTTLS port (587). Nothing was sent.`,
        },
      );
    }
    if (at.watch?.mismatch === "http") {
      return new MailsendError("config_invalid", `${this.#label} is an HTTP server, not SMTP submission`, {
        cause: e,
        hint: (s) =>
          `Check ${s.either("smtpPort")} (587 or 465; the sandbox prints its own), or use ${s.value("transport", "rest")} for an HTTP address. Nothing was sent.`,
      });
    }
    if (at.stop?.aborted && !at.handedOver) {
      return new MailsendError(
        "temporary_failure",
        `interrupted before the message was handed over to ${this.#label}`,
        {
          cause: e,
          hint: "Nothing was sent; it is safe to try again.",
        },
      );
    }
    // Every byte of the message went out and then the session failed without a reply
    // (a timeout, a reset): the server may have queued it. A reply code is a real answer.
    if (at.handedOver && e.responseCode === undefined && !(e instanceof MailsendError)) {
      return new MailsendError(
        "outcome_unknown",
        `${this.#label} gave no answer after the whole message was sent (${this.#redact(e.message)})`,
        {
          cause: e,
          mayHaveBeenSent: true,
          hint: (s) =>
            `The message may have been sent. Check before sending again (resending with ${s.idempotencyKey(m.idempotencyKey)} lets the service drop a duplicate).`,
        },
      );
    }
    return e;
  }

  /**
   * Some RCPT TO refused, the others accepted, and the message sent to those
   * (nodemailer goes on with the accepted ones). Not "bad message" and never
   * retried: a resend would reach the accepted recipients twice.
   */
  #partial(
    m: Message,
    info: { accepted: unknown[]; messageId?: string; rejectedErrors?: SmtpError[] },
    rejected: string[],
  ): MailsendError {
    const replies = new Map<string, string>();
    for (const e of info.rejectedErrors ?? []) {
      const who = (e as SmtpError & { recipient?: string }).recipient;
      if (who) replies.set(who, this.#redact((e.response ?? e.message).replace(/\s+/g, " ").trim()));
    }
    const refused = rejected.map((address) => ({ address, reply: replies.get(address) ?? "" }));
    const accepted = info.accepted.map(String);
    const messageId = (m.raw ? rawMessageId(m.raw) : info.messageId) ?? "";
    const listed = refused.map((r) => (r.reply ? `${r.address} (${r.reply})` : r.address)).join(", ");
    return new MailsendError(
      "recipients_refused",
      `the server refused ${refused.length} of ${refused.length + accepted.length} recipients: ${listed}; the message went to ${accepted.join(", ")}`,
      {
        partial: { messageId, accepted, refused },
        hint: "Do not resend to everyone: the others have it. Check the refused addresses, then send to those only.",
      },
    );
  }

  #classify(e: SmtpError): MailsendError {
    if (e instanceof MailsendError) return e;
    const reply = e.response ? this.#redact(e.response.replace(/\s+/g, " ").trim()) : "";
    const code = e.responseCode;
    const early = this.#connectFailure(e);
    if (early && !code) return early;
    const silent = this.#noGreeting(e);
    if (silent) return silent;
    if (e.command === "STARTTLS" || (/STARTTLS/i.test(e.message) && !code))
      return noStartTlsError(this.#label, reply, code, e);
    if (code !== undefined) return this.#replyFailure(e, code, reply);
    return this.#brokenSession(e);
  }

  /** A failure to reach the server or to start TLS with it, said as for the REST endpoint. */
  #connectFailure(e: SmtpError): MailsendError | undefined {
    const c = this.#config;
    const endpoint = {
      label: this.#label,
      setting: (s: Say) => s.pair("smtpHost", "smtpPort", true),
      tlsHint:
        c.tls === "implicit"
          ? (s: Say) =>
              `This port does not speak TLS from the first byte: it is probably a STARTTLS port (587); use ${s.value("smtpTls", "starttls")}.`
          : (s: Say) =>
              `STARTTLS failed on this port: if it expects TLS from the first byte (465), use ${s.value("smtpTls", "implicit")}.`,
    };
    const sys = Object.assign(new Error(e.message), { code: e.originalCode ?? e.code });
    return connectError(sys, endpoint, TRUST_HINT);
  }

  /** A STARTTLS port that stays silent is most often one that expects TLS from the first byte. */
  #noGreeting(e: SmtpError): MailsendError | undefined {
    const c = this.#config;
    if (e.code === "ETIMEDOUT" && /greeting/i.test(e.message) && c.tls === "starttls") {
      return new MailsendError(
        "tls_mismatch",
        `${this.#label} sent no SMTP greeting within ${seconds(Math.min(c.timeoutMs, 10_000))}`,
        {
          cause: e,
          hint: (s) =>
            `The port may expect implicit TLS: use port 465 or ${s.value("smtpTls", "implicit")}. Nothing was sent.`,
        },
      );
    }
    return undefined;
  }

  /** The server answered with a failure code: what that reply means for the message. */
  #replyFailure(e: SmtpError, code: number, text: string): MailsendError {
    const c = this.#config;
    if (code === 535 || code === 534 || (code === 530 && e.command?.startsWith("AUTH"))) {
      const revoked = /revoked|expired|disabled/i.test(text);
      return new MailsendError(revoked ? "key_revoked" : "auth_failed", `SMTP authentication failed: ${text}`, {
        status: code,
        hint: revoked
          ? revokedKeyHint(c.host)
          : (s) => `Check the API key and the username (${shownSmtpUser(c.user, c.apiKey)}; ${s.env("smtpUser")}).`,
      });
    }
    if (code >= 400 && code < 500) {
      const rate = /rate|limit|too many/i.test(text);
      const retryAfter = /(\d+)\s*s(ec|econds)?\b/i.exec(text)?.[1];
      return new MailsendError(
        rate ? "rate_limited" : "temporary_failure",
        `the SMTP server deferred the message: ${text}`,
        {
          status: code,
          ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}),
          hint: "A temporary failure: nothing was accepted; try again later.",
        },
      );
    }
    if (code === 552)
      return new MailsendError("too_large", `the SMTP server refused the message as too large: ${text}`, {
        status: code,
        hint: TOO_LARGE_HINT,
      });
    if (code === 550 || code === 551 || code === 553 || code === 554 || code === 501 || code === 555) {
      return new MailsendError("rejected", `the SMTP server refused the message: ${text}`, {
        status: code,
        hint: "A permanent refusal: check the addresses and the content; resending as it is will fail again.",
      });
    }
    // Only the reply to the end of the message can leave it in doubt; any other reply
    // came before the server could accept it: a fault of the server, not "may have been sent".
    if (e.command === "DATA" && code >= 200 && code < 300) {
      return new MailsendError("protocol_error", `unexpected SMTP reply to the end of the message: ${text}`, {
        status: code,
        mayHaveBeenSent: true,
      });
    }
    return new MailsendError("service_error", `unexpected SMTP reply to ${e.command ?? "a command"}: ${text}`, {
      hint: (s) =>
        `Nothing was sent: the server answered before the message was handed over. Check ${s.pair("smtpHost", "smtpPort")}: this may not be the service's submission server.`,
    });
  }

  /** The session broke without a reply to say why. */
  #brokenSession(e: SmtpError): MailsendError {
    if (e.command === "DATA" || e.code === "ESTREAM") {
      if (e.code === "ESTREAM" && /ENOENT|EACCES|EISDIR/.test(e.message)) {
        return new MailsendError("file_unreadable", `an attachment could not be read: ${this.#redact(e.message)}`, {
          cause: e,
        });
      }
      // The whole message was not handed over (#sendWith reports that case as outcome unknown):
      // without its final "." no server accepts it.
      return new MailsendError(
        "connection_failed",
        `the connection to ${this.#label} broke before the whole message was handed over (${this.#redact(e.message)})`,
        {
          cause: e,
          hint: "Nothing was sent: a server accepts a message only once all of it has arrived. Try again.",
        },
      );
    }
    if (e.code === "ETIMEDOUT") {
      return new MailsendError(
        "timeout",
        `${this.#label} did not respond in time (${this.#redact(e.message)}); nothing was sent`,
        {
          cause: e,
          hint: (s) => `Check the network, or raise ${s.flag("timeout")}.`,
        },
      );
    }
    return new MailsendError(
      "connection_failed",
      `SMTP session with ${this.#label} failed: ${this.#redact(e.message)}`,
      {
        cause: e,
        hint: (s) => `Nothing was sent; check ${s.pair("smtpHost", "smtpPort")}.`,
      },
    );
  }

  async close(): Promise<void> {
    for (const pool of this.#pools.values()) pool.close();
    this.#pools.clear();
  }
}

/** The mail option under which a send passes its "whole message handed over" callback. */
const HAND_OVER = "mailsendOnHandOver";

type Nodemailer = typeof import("nodemailer")["default"];
type Transporter = ReturnType<Nodemailer["createTransport"]>;

/**
 * nodemailer's errors do not say how far a session got (a socket timeout is
 * command "CONN" whether it struck at RCPT or after the final dot). A stream
 * plugin puts a pass-through at the very end of each message's byte stream;
 * when the SMTP connection has read all of it, the message has been handed over.
 */
function watchHandOver(t: Transporter): Transporter {
  t.use("stream", (mail, done) => {
    const onEnd = (mail.data as Record<string, unknown>)[HAND_OVER];
    if (typeof onEnd === "function") {
      // The last stage, read by the connection itself and only after DATA's 354:
      // its "end" means the connection has taken every byte.
      mail.message.processFunc((input) => {
        const pass = new PassThrough();
        pass.once("end", () => onEnd());
        return pipeline(input, pass, () => {});
      });
    }
    done();
  });
  return t;
}

/** What -v shows of nodemailer's log: the lines each side sent, not its own remarks about them. */
const EXCHANGE = new Set(["server", "client", "message"]);

/** nodemailer's bunyan-style logger, into our redacting trace. Message bodies are cut short. */
function traceLogger(trace: (l: string) => void) {
  let bodyLines = 0;
  const log = (meta: { tnx?: string; outByteCount?: number }, ...args: unknown[]) => {
    // Its remarks ("Creating transport", "Sending message <its own id>", "User ... authenticated", the socket
    // mailsend handed it called a proxy) name its internals, not the session; a failure comes back as the error.
    if (!EXCHANGE.has(meta?.tnx ?? "") || meta.outByteCount !== undefined) return;
    const text = format(...(args as [string]));
    if (meta.tnx === "message") {
      if (bodyLines === 40) trace("  ... (rest of the message not shown)");
      if (bodyLines++ >= 40) return;
    }
    for (const line of text.split(/\r?\n/)) trace(line);
  };
  return { trace: log, debug: log, info: log, warn: log, error: log, fatal: log, level: () => {} };
}

export function create(config: SmtpConfig, opts: TransportOptions = {}): Transport {
  return new SmtpTransport(config, opts);
}

/** "1 s", "2.5 s": a time limit as a person reads it. */
function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))} s`;
}

/** How long a STARTTLS connection may stay silent before we check whether the port expects TLS. */
const TLS_PROBE_AFTER_MS = 2500;

/**
 * A STARTTLS client on an implicit-TLS port (465) waits for a greeting that
 * never comes: the server is waiting for a TLS ClientHello. nodemailer would
 * give up only at the greeting timeout (10 s). This opens the connection for
 * nodemailer (its getSocket hook) and, if not a byte has arrived after a short
 * while, asks the port for a TLS handshake on a second connection (and, if
 * not, for an HTTP answer): if it gives one, the send is aborted at once as a
 * port/TLS-mode mismatch (or a wrong port: an HTTP server).
 */
class GreetingWatch {
  readonly #config: SmtpConfig;
  readonly #abort = new AbortController();
  /** Ends the watch: the send is over, so no probe starts and a running one closes its socket. */
  readonly #stopped = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  /** What the silent port turned out to be: TLS from the first byte, or HTTP. */
  mismatch: "tls" | "http" | undefined;

  constructor(config: SmtpConfig) {
    this.#config = config;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  readonly getSocket = (
    _options: unknown,
    callback: (err: Error | null, socketOptions?: { connection: Socket }) => void,
  ): void => {
    const c = this.#config;
    const socket = netConnect({ host: c.host, port: c.port });
    let given = false;
    const give = (err: Error | null) => {
      if (given) return;
      given = true;
      clearTimeout(connectTimer);
      if (err) {
        socket.destroy();
        callback(err);
        return;
      }
      callback(null, { connection: socket });
      this.#watch(socket);
    };
    // As nodemailer's own connectionTimeout, with its code, so the error reads the same.
    const connectTimer = setTimeout(
      () => give(Object.assign(new Error("Connection timeout"), { code: "ETIMEDOUT" })),
      c.timeoutMs,
    );
    socket.once("connect", () => give(null));
    socket.once("error", (e) => give(e));
  };

  #watch(socket: Socket): void {
    const c = this.#config;
    const stopped = this.#stopped.signal;
    if (stopped.aborted) return;
    // Still silent, and still wanted: the server has not greeted and the send is not over.
    const silent = () => socket.bytesRead === 0 && !socket.destroyed && !stopped.aborted && !this.#abort.signal.aborted;
    this.#timer = setTimeout(
      () => {
        if (!silent()) return;
        void (async () => {
          let what: "tls" | "http" | undefined;
          if (await speaksTls(c.host, c.port, 2000, stopped)) what = "tls";
          else if (silent() && (await speaksHttp(c.host, c.port, 2000, stopped))) what = "http";
          if (!what || !silent()) return;
          this.mismatch = what;
          this.#abort.abort();
        })();
      },
      Math.min(TLS_PROBE_AFTER_MS, c.timeoutMs / 2),
    );
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#stopped.abort();
  }
}

/**
 * nodemailer's sending side (its transports), loaded when a message is sent: a dry run or a
 * preview over SMTP needs only its MIME composer.
 */
export async function loadNodemailer(): Promise<Nodemailer> {
  return (await import("nodemailer")).default;
}

/** nodemailer's bare connection, used only to ask a server what it offers before sending. */
export function loadSmtpConnection(): Promise<typeof import("nodemailer/lib/smtp-connection")> {
  return import("nodemailer/lib/smtp-connection");
}
