/**
 * SMTP submission in the spec's two roles, with smtp-server:
 *   "starttls" (the 587 role): plain greeting, STARTTLS offered, AUTH refused
 *              until TLS is on (538), MAIL refused until AUTH (530);
 *   "implicit" (the 465 role): TLS from the first byte.
 * AUTH LOGIN and PLAIN, username fixed (default "mailsend"), password = an
 * API key; 535 for a wrong, revoked or expired key. One message (one DATA)
 * is one request for the shared limit; over it, 451 4.7.1 with the wait.
 * A message is stored only when its DATA ended with "." and everything
 * passed; a client that goes away mid-DATA leaves nothing behind.
 */
import type { Socket } from "node:net";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import { parseBareAddress } from "../core/address.js";
import { IDEMPOTENCY_KEY, type SandboxCore } from "./core.js";
import { IdempotencyCache } from "./idempotency.js";
import { headerValue, summarize, type Summary } from "./summarize.js";
import type { TlsMaterial } from "./tls.js";

export type SmtpRole = "starttls" | "implicit";

const MAX_RECIPIENTS = 100;

function reply(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

function rateText(retryAfter: number, limit: number, windowMs: number): string {
  // The wait comes first: clients (mailsend among them) read the first "<n> s" as it.
  return `4.7.1 Rate limit exceeded, try again in ${retryAfter} s (limit: ${limit} messages per rolling ${windowMs / 1000} seconds for this API key)`;
}

export function createSmtpServer(core: SandboxCore, role: SmtpRole, tls: TlsMaterial): SMTPServer {
  const { keys, limiter, idempotency, faults, stats, store } = core;
  let server: SMTPServer;

  const socketOf = (session: SMTPServerSession): Socket | undefined => {
    const conns = (server as unknown as { connections: Set<{ session?: { id: string }; _socket?: Socket }> }).connections;
    for (const c of conns) if (c.session?.id === session.id) return c._socket;
    return undefined;
  };

  const refused = (what?: "rateLimited" | "authFailed" | "faults") => {
    stats.count("smtp", "refused");
    if (what) stats.count("smtp", what);
  };

  async function accept(raw: Buffer, session: SMTPServerSession): Promise<string> {
    const keyId = session.user!;
    const state = keys.stateOf(keyId);
    if (state !== "active") {
      refused("authFailed");
      throw reply(535, `5.7.8 Authentication credentials no longer valid: the API key is ${state}`);
    }
    const idemKey = headerValue(raw, "X-Idempotency-Key");
    if (idemKey !== undefined && !IDEMPOTENCY_KEY.test(idemKey)) {
      refused();
      throw reply(554, "5.6.0 X-Idempotency-Key must be 1 to 255 printable ASCII characters without spaces");
    }
    const scope = idemKey ? IdempotencyCache.scope(keyId, idemKey) : undefined;
    const release = scope ? await idempotency.lock(scope) : undefined;
    try {
      const replay = scope ? idempotency.get(scope) : undefined;
      if (replay) {
        stats.count("smtp", "duplicates");
        await faults.delay();
        return `2.0.0 Ok: queued as ${replay.id}`;
      }
      const decision = limiter.take(keyId);
      if (!decision.ok) {
        refused("rateLimited");
        await faults.delay();
        throw reply(451, rateText(decision.retryAfter, decision.limit, limiter.windowMs));
      }
      const fault = faults.decide();
      if (fault.kind === "fail") {
        refused("faults");
        await faults.delay();
        const code = faults.config.failSmtpCode;
        throw reply(code, `${code < 500 ? "4.3.0" : "5.3.0"} Injected failure (mailsend sandbox fault injection); the message was not stored`);
      }
      if (fault.kind === "drop" && fault.when === "before") {
        stats.count("smtp", "faults");
        socketOf(session)?.destroy();
        throw reply(421, "4.4.2 Connection dropped (fault injection)");
      }
      let summary: Summary;
      try {
        summary = await summarize(raw);
      } catch {
        summary = { from: "", to: [], subject: "", attachments: [] };
      }
      const envelope = {
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
        to: session.envelope.rcptTo.map((r) => r.address),
      };
      const stored = await store.add({
        raw,
        channel: "smtp",
        keyId,
        envelope,
        from: summary.from,
        to: summary.to,
        subject: summary.subject,
        attachments: summary.attachments,
        messageId: summary.messageIdHeader ?? "",
        ...(idemKey ? { idempotencyKey: idemKey } : {}),
      });
      if (scope) idempotency.set(scope, { id: stored.id, messageId: stored.messageId, at: Date.now() });
      stats.count("smtp", "accepted");
      if (fault.kind === "drop") {
        stats.count("smtp", "faults");
        socketOf(session)?.destroy();
      } else await faults.delay();
      return `2.0.0 Ok: queued as ${stored.id}`;
    } finally {
      release?.();
    }
  }

  const options: SMTPServerOptions = {
    secure: role === "implicit",
    key: tls.key,
    cert: tls.cert,
    name: "localhost",
    banner: "mailsend sandbox ESMTP",
    authMethods: ["LOGIN", "PLAIN"],
    authOptional: false,
    allowInsecureAuth: false,
    size: core.maxSize,
    disabledCommands: role === "implicit" ? ["STARTTLS"] : [],
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 1000,
    socketTimeout: 60_000,

    onAuth(auth, _session, cb) {
      if (auth.method !== "LOGIN" && auth.method !== "PLAIN") {
        refused("authFailed");
        return cb(reply(504, "5.5.4 Unrecognized authentication type"));
      }
      if (auth.username !== core.smtpUser) {
        refused("authFailed");
        return cb(reply(535, `5.7.8 Authentication credentials invalid (the username is ${core.smtpUser})`));
      }
      const check = keys.verify(auth.password ?? undefined);
      if (!check.ok) {
        refused("authFailed");
        const why =
          check.reason === "revoked" ? "the API key has been revoked" : check.reason === "expired" ? "the API key has expired" : "the password must be a valid API key";
        return cb(reply(535, `5.7.8 Authentication credentials invalid: ${why}`));
      }
      cb(null, { user: check.key.id });
    },

    onMailFrom(address, session, cb) {
      try {
        parseBareAddress(address.address, "MAIL FROM");
      } catch (e) {
        refused();
        return cb(reply(553, `5.1.7 Sender address rejected: ${(e as Error).message}`));
      }
      // Say so before the client sends the whole message; DATA counts it for real.
      const d = limiter.peek(session.user!);
      if (!d.ok) {
        refused("rateLimited");
        return cb(reply(451, rateText(d.retryAfter, d.limit, limiter.windowMs)));
      }
      cb();
    },

    onRcptTo(address, session, cb) {
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) {
        return cb(reply(452, `4.5.3 Too many recipients (at most ${MAX_RECIPIENTS} per message)`));
      }
      try {
        parseBareAddress(address.address, "RCPT TO");
      } catch (e) {
        return cb(reply(553, `5.1.3 Recipient address rejected: ${(e as Error).message}`));
      }
      cb();
    },

    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on("data", (c: Buffer) => {
        size += c.length;
        if (size <= core.maxSize) chunks.push(c);
      });
      // Destroyed when the client goes away mid-DATA: keep nothing.
      stream.on("error", () => {
        chunks.length = 0;
      });
      stream.on("end", () => {
        if (stream.sizeExceeded || size > core.maxSize) {
          refused();
          return cb(reply(552, `5.3.4 Message too big: the limit is ${core.maxSize} bytes`));
        }
        accept(Buffer.concat(chunks, size), session).then(
          (text) => cb(null, text),
          (e: Error & { responseCode?: number }) => {
            if (e.responseCode === undefined) refused();
            cb(e.responseCode ? e : reply(451, "4.3.0 Temporary failure while storing the message; it was not stored"));
          },
        );
      });
    },
  };
  server = new SMTPServer(options);
  // A client that misbehaves at the socket level must not take the sandbox down.
  server.on("error", () => {});
  return server;
}
