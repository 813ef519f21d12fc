/**
 * A stand-in for the service's SMTP submission server (smtp-server on
 * 127.0.0.1, port 0), in the service's two roles:
 *
 *   mode "starttls": the 587 role. Plain text first, STARTTLS offered, AUTH
 *                    refused until TLS is on (smtp-server's default without
 *                    allowInsecureAuth), AUTH required before MAIL.
 *   mode "implicit": the 465 role. TLS from the first byte.
 *
 * Accepts username `mailsend` (configurable) with the test key as password,
 * answers 535 otherwise, and records everything a test may assert on. Replies
 * can be scripted (550 on RCPT, 452, 554 at the end of DATA, ...).
 */
import type { AddressInfo } from "node:net";
import PostalMime, { type Email } from "postal-mime";
import { SMTPServer, type SMTPServerSession } from "smtp-server";
import type { TlsMaterial } from "../../src/sandbox/tls.js";

export type SmtpMode = "starttls" | "implicit";

export interface SmtpReply {
  code: number;
  message: string;
}

export interface SinkScript {
  mailFrom?: SmtpReply;
  /** One reply for every RCPT, or decide per address (undefined accepts). */
  rcpt?: SmtpReply | ((address: string) => SmtpReply | undefined);
  /** The reply after the final "." of DATA. */
  data?: SmtpReply;
  /** Replaces the credential check. */
  auth?: SmtpReply;
  /** Refuse the connection with this greeting (e.g. 421 busy); the server then closes it. */
  connect?: SmtpReply;
  /** Hold the reply to RCPT TO, or to the end of DATA, this long (a stalled server). */
  delayMs?: { rcpt?: number; data?: number };
}

export interface AuthRecord {
  method: string;
  username: string | undefined;
  ok: boolean;
  /** Whether TLS was on when AUTH was given. */
  secure: boolean;
}

export interface ReceivedMessage {
  sessionId: string;
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  /** Whether the session was under TLS when DATA was sent. */
  secure: boolean;
  authMethod: string | undefined;
  user: string | undefined;
  /** False when the script refused it at the end of DATA. */
  accepted: boolean;
}

export interface SmtpSink {
  readonly port: number;
  readonly mode: SmtpMode;
  /** Messages whose DATA completed (accepted or refused by the script). */
  readonly messages: ReceivedMessage[];
  readonly auths: AuthRecord[];
  /** RCPT TO addresses seen, accepted or not. */
  readonly rcptSeen: string[];
  /** Connections accepted since the last reset. */
  readonly connections: number;
  script(s: SinkScript): void;
  reset(): void;
  close(): Promise<void>;
}

export interface SinkOptions {
  mode: SmtpMode;
  tls: TlsMaterial;
  /** The password the sink accepts. */
  key: string;
  /** Default "mailsend". */
  user?: string;
  /** Default ["LOGIN", "PLAIN"]. */
  authMethods?: string[];
}

function smtpError(r: SmtpReply): Error {
  return Object.assign(new Error(r.message), { responseCode: r.code });
}

export async function startSmtpSink(opts: SinkOptions): Promise<SmtpSink> {
  const user = opts.user ?? "mailsend";
  const messages: ReceivedMessage[] = [];
  const auths: AuthRecord[] = [];
  const rcptSeen: string[] = [];
  const authBySession = new Map<string, { method: string; username: string | undefined }>();
  let scripted: SinkScript = {};
  let connections = 0;
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number | undefined, f: () => void) => {
    if (!ms) return f();
    const t = setTimeout(() => {
      timers.delete(t);
      f();
    }, ms);
    timers.add(t);
  };

  const server = new SMTPServer({
    secure: opts.mode === "implicit",
    key: opts.tls.key,
    cert: opts.tls.cert,
    name: "sink.test",
    banner: "mailsend test sink",
    hideSTARTTLS: false,
    allowInsecureAuth: false,
    authOptional: false,
    authMethods: opts.authMethods ?? ["LOGIN", "PLAIN"],
    disableReverseLookup: true,
    closeTimeout: 200,
    socketTimeout: 15_000,
    logger: false,
    onConnect(_session, cb) {
      connections += 1;
      if (scripted.connect) return cb(smtpError(scripted.connect));
      cb();
    },
    onAuth(auth, session, cb) {
      const ok = scripted.auth === undefined && auth.username === user && auth.password === opts.key;
      auths.push({ method: auth.method, username: auth.username, ok, secure: session.secure });
      if (!ok)
        return cb(smtpError(scripted.auth ?? { code: 535, message: "5.7.8 Authentication credentials invalid" }));
      authBySession.set(session.id, { method: auth.method, username: auth.username });
      cb(null, { user: auth.username });
    },
    onMailFrom(_address, _session, cb) {
      if (scripted.mailFrom) return cb(smtpError(scripted.mailFrom));
      cb();
    },
    onRcptTo(address, _session, cb) {
      rcptSeen.push(address.address);
      const r = typeof scripted.rcpt === "function" ? scripted.rcpt(address.address) : scripted.rcpt;
      later(scripted.delayMs?.rcpt, () => (r ? cb(smtpError(r)) : cb()));
    },
    onData(stream, session: SMTPServerSession, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const auth = authBySession.get(session.id);
        const refuse = scripted.data;
        messages.push({
          sessionId: session.id,
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          authMethod: auth?.method,
          user: auth?.username,
          accepted: refuse === undefined,
        });
        const n = messages.length;
        later(scripted.delayMs?.data, () =>
          refuse ? cb(smtpError(refuse)) : cb(null, `2.0.0 Ok: queued as SINK${n}`),
        );
      });
    },
  });
  server.on("error", () => {});

  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;

  return {
    port,
    mode: opts.mode,
    messages,
    auths,
    rcptSeen,
    get connections() {
      return connections;
    },
    script(s) {
      scripted = s;
    },
    reset() {
      messages.length = 0;
      auths.length = 0;
      rcptSeen.length = 0;
      authBySession.clear();
      scripted = {};
      connections = 0;
    },
    close: () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Parse a received message for assertions. */
export async function parseMessage(raw: Buffer): Promise<Email> {
  return PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
}

/** The header section of a raw message, as text (for "Bcc is absent" style checks). */
export function headerSection(raw: Buffer): string {
  const text = raw.toString("latin1");
  const end = text.search(/\r?\n\r?\n/);
  return end < 0 ? text : text.slice(0, end);
}
