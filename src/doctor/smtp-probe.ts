/**
 * One SMTP session that goes as far as AUTH and then QUITs: it connects,
 * completes STARTTLS (required) or implicit TLS, judges the certificate, and
 * authenticates with the key. No MAIL FROM, so no mail and no request against
 * the service's limit (for the limit, a request is one DATA).
 */
import type { TLSSocket } from "node:tls";
import SMTPConnection from "nodemailer/lib/smtp-connection";
import type { SmtpConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { makeRedactor, shownSmtpUser } from "../core/redact.js";
import { noStartTlsError, revokedKeyHint } from "../transports/hints.js";
import { connectError, TRUST_HINT } from "../net/errors.js";
import type { SmtpError } from "../transports/smtp.js";
import { speaksTls } from "../net/errors.js";
import { describeCertificate, tlsClientOptions, trustFailure, type CertificateInfo } from "./tls-info.js";

export type Outcome<T> = ({ ok: true } & T) | { ok: false; error: MailsendError };

export interface SmtpProbe {
  connect: Outcome<{ ms: number }> & { certificate?: CertificateInfo };
  /** Absent when the session did not get as far as AUTH, or no key was given. */
  auth?: Outcome<{ method: string }>;
}

/** After this long without a finished handshake in STARTTLS mode, look whether the port speaks TLS from the first byte. */
const TLS_PROBE_AFTER_MS = 2500;

function label(c: SmtpConfig): string {
  return `${c.host}:${c.port}`;
}

function tlsHint(c: SmtpConfig): string {
  return c.tls === "implicit"
    ? "This port does not speak TLS from the first byte: it is probably a STARTTLS port (587); use --smtp-tls starttls (or port 587)."
    : "STARTTLS failed on this port: if it expects TLS from the first byte (465), use --smtp-tls implicit (or port 465).";
}

function classifyConnect(e: SmtpError, c: SmtpConfig, redact: (s: string) => string): MailsendError {
  if (e instanceof MailsendError) return e;
  const endpoint = {
    label: label(c),
    setting: "--smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT)",
    tlsHint: tlsHint(c),
  };
  const sys = Object.assign(new Error(e.message), { code: e.originalCode ?? e.code });
  const early = connectError(sys, endpoint, TRUST_HINT);
  if (early && !e.responseCode) return early;
  const reply = e.response ? redact(e.response.replace(/\s+/g, " ").trim()) : "";
  if (e.command === "STARTTLS" || (/STARTTLS/i.test(e.message) && e.responseCode === undefined))
    return noStartTlsError(label(c), reply, e.responseCode, e);
  if (e.responseCode !== undefined) {
    return e.responseCode >= 400 && e.responseCode < 500
      ? new MailsendError("temporary_failure", `${label(c)} turned the session away for now: ${reply}`, {
          status: e.responseCode,
          hint: "Try again later.",
        })
      : new MailsendError("service_error", `${label(c)} refused the session: ${reply}`, {
          status: e.responseCode,
          hint: "Check --smtp-host / --smtp-port: this may not be the service's submission server.",
        });
  }
  if (e.code === "ETIMEDOUT") {
    return new MailsendError(
      "timeout",
      `${label(c)} did not complete the SMTP greeting and TLS in time (${redact(e.message)})`,
      {
        cause: e,
        hint: `${tlsHint(c)} Otherwise check the network, or raise --timeout.`,
      },
    );
  }
  return new MailsendError("connection_failed", `SMTP session with ${label(c)} failed: ${redact(e.message)}`, {
    cause: e,
    hint: "Check --smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT).",
  });
}

function classifyAuth(e: SmtpError, c: SmtpConfig, redact: (s: string) => string): MailsendError {
  const reply = e.response ? redact(e.response.replace(/\s+/g, " ").trim()) : redact(e.message);
  const code = e.responseCode;
  if (code === 535 || code === 534 || code === 530) {
    const revoked = /revoked|expired|disabled/i.test(reply);
    return new MailsendError(revoked ? "key_revoked" : "auth_failed", `SMTP authentication failed: ${reply}`, {
      status: code,
      hint: revoked
        ? revokedKeyHint(c.host)
        : `Check the API key and the username (${shownSmtpUser(c.user, c.apiKey)}; MAILSEND_SMTP_USER).`,
    });
  }
  if (code !== undefined && code >= 400 && code < 500) {
    return new MailsendError("temporary_failure", `the SMTP server deferred authentication: ${reply}`, {
      status: code,
      hint: "Try again later.",
    });
  }
  if (code !== undefined)
    return new MailsendError("protocol_error", `unexpected SMTP reply to ${e.command ?? "AUTH"}: ${reply}`, {
      status: code,
    });
  return new MailsendError("connection_failed", `the SMTP session with ${label(c)} broke during AUTH: ${reply}`, {
    cause: e,
  });
}

function login(conn: SMTPConnection, c: SmtpConfig, method: "LOGIN" | "PLAIN"): Promise<void> {
  return new Promise((resolve, reject) => {
    // `method` is read by SMTPConnection though its types leave it out.
    const auth = { user: c.user, pass: c.apiKey, method } as unknown as SMTPConnection.AuthenticationType;
    // A connection that drops mid-AUTH may never call back: its close ends the wait.
    const gone = (e?: Error) =>
      reject(e ?? Object.assign(new Error("the server closed the connection during AUTH"), { code: "ECONNECTION" }));
    conn.once("error", gone);
    conn.once("end", gone);
    conn.login(auth, (err) => {
      conn.off("error", gone);
      conn.off("end", gone);
      if (err) reject(err);
      else resolve();
    });
  });
}

function smtpConnection(c: SmtpConfig): SMTPConnection {
  const conn = new SMTPConnection({
    host: c.host,
    port: c.port,
    secure: c.tls === "implicit",
    requireTLS: c.tls !== "implicit",
    ...(c.clientName ? { name: c.clientName } : {}),
    tls: tlsClientOptions(c.host, c),
    connectionTimeout: c.timeoutMs,
    // As for a send: a server that has not greeted within 10 s is not going to.
    greetingTimeout: Math.min(c.timeoutMs, 10_000),
    socketTimeout: c.timeoutMs,
    logger: false,
  });
  // Every failure is taken from the promises below; an 'error' without a listener would throw.
  conn.on("error", () => {});
  return conn;
}

/** Resolves once the server has greeted (and TLS is up); over STARTTLS, a port that speaks TLS at once is said to be one. */
async function greeted(conn: SMTPConnection, c: SmtpConfig): Promise<void> {
  let probeTimer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      conn.once("error", reject);
      conn.once("end", () =>
        reject(
          Object.assign(new Error("the server closed the connection during the greeting or TLS"), {
            code: "ECONNECTION",
          }),
        ),
      );
      conn.connect((err) => (err ? reject(err) : resolve()));
      if (c.tls === "starttls") {
        // A STARTTLS client on an implicit-TLS port waits for a greeting that never comes.
        probeTimer = setTimeout(
          () => {
            void speaksTls(c.host, c.port, 2000).then((yes) => {
              if (!yes) return;
              reject(
                new MailsendError(
                  "tls_mismatch",
                  `${label(c)} expects TLS from the first byte, but mailsend is set to STARTTLS`,
                  {
                    hint: "Use --smtp-tls implicit (MAILSEND_SMTP_TLS=implicit) for this port, or the STARTTLS port (587).",
                  },
                ),
              );
            });
          },
          Math.min(TLS_PROBE_AFTER_MS, c.timeoutMs),
        );
      }
    });
  } finally {
    clearTimeout(probeTimer);
  }
}

/** Logs in with LOGIN, else (not offered) PLAIN: the outcome, and the mechanism that worked. */
async function tryLogin(
  conn: SMTPConnection,
  c: SmtpConfig,
  redact: (s: string) => string,
): Promise<SmtpProbe["auth"]> {
  try {
    try {
      await login(conn, c, "LOGIN");
      return { ok: true, method: "LOGIN" };
    } catch (e) {
      // 504: LOGIN not offered; the session is still good for another mechanism.
      if ((e as SmtpError).responseCode !== 504) throw e;
      await login(conn, c, "PLAIN");
      return { ok: true, method: "PLAIN" };
    }
  } catch (e) {
    return { ok: false, error: classifyAuth(e as SmtpError, c, redact) };
  }
}

export async function probeSmtp(c: SmtpConfig, opts: { auth: boolean }): Promise<SmtpProbe> {
  const redact = makeRedactor(c.apiKey || undefined, c.user);
  const started = Date.now();
  const conn = smtpConnection(c);
  try {
    await greeted(conn, c);
  } catch (e) {
    conn.close();
    return { connect: { ok: false, error: classifyConnect(e as SmtpError, c, redact) } };
  }

  const socket = (conn as unknown as { _socket: TLSSocket })._socket;
  const certificate = typeof socket?.getPeerCertificate === "function" ? describeCertificate(socket) : undefined;
  const untrusted = trustFailure(certificate, label(c), c);
  if (untrusted) {
    // The key is not sent on a connection whose certificate failed.
    conn.close();
    return { connect: { ok: false, error: untrusted, ...(certificate ? { certificate } : {}) } };
  }
  const connect = { ok: true as const, ms: Date.now() - started, ...(certificate ? { certificate } : {}) };
  if (!opts.auth) {
    conn.quit();
    return { connect };
  }
  const auth = await tryLogin(conn, c, redact);
  conn.quit();
  // QUIT is answered and the connection closed at once; do not wait on a server that lingers.
  setTimeout(() => conn.close(), 1000).unref();
  return { connect, auth };
}
