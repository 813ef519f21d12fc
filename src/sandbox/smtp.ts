/**
 * SMTP submission in the service's two roles, with smtp-server:
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
import { WireRecorder } from "./wire.js";

export type SmtpRole = "starttls" | "implicit";

const MAX_RECIPIENTS = 100;

function reply(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

function rateText(retryAfter: number, limit: number, windowMs: number): string {
  // The wait comes first: clients (mailsend among them) read the first "<n> s" as it.
  return `4.7.1 Rate limit exceeded, try again in ${retryAfter} s (limit: ${limit} messages per rolling ${windowMs / 1000} seconds for this API key)`;
}

type Refusal = "rateLimited" | "authFailed" | "faults";

/** What the handlers of one server share: the sandbox, its counters, the sockets of its sessions. */
interface Side {
  core: SandboxCore;
  refused(what?: Refusal): void;
  socketOf(session: SMTPServerSession): Socket | undefined;
  /** The envelope's addresses as the client wrote them. */
  wire: WireRecorder;
}

/** A message whose DATA ended: "250 queued as" once stored, or the reply error to give. */
async function accept(side: Side, raw: Buffer, session: SMTPServerSession): Promise<string> {
  const { keys, idempotency, stats } = side.core;
  const keyId = session.user!;
  const state = keys.stateOf(keyId);
  if (state !== "active") {
    side.refused("authFailed");
    throw reply(535, `5.7.8 Authentication credentials no longer valid: the API key is ${state}`);
  }
  const idemKey = headerValue(raw, "X-Idempotency-Key");
  if (idemKey !== undefined && !IDEMPOTENCY_KEY.test(idemKey)) {
    side.refused();
    throw reply(554, "5.6.0 X-Idempotency-Key must be 1 to 255 printable ASCII characters without spaces");
  }
  const scope = idemKey ? IdempotencyCache.scope(keyId, idemKey) : undefined;
  const release = scope ? await idempotency.lock(scope) : undefined;
  try {
    const replay = scope ? idempotency.get(scope) : undefined;
    if (replay) {
      stats.count("smtp", "duplicates");
      await side.core.faults.delay();
      return `2.0.0 Ok: queued as ${replay.id}`;
    }
    const fault = await admit(side, keyId, session);
    const stored = await storeMessage(side, raw, session, idemKey);
    if (scope) idempotency.set(scope, { id: stored.id, messageId: stored.messageId, at: Date.now() });
    stats.count("smtp", "accepted");
    if (fault.kind === "drop") {
      stats.count("smtp", "faults");
      side.socketOf(session)?.destroy();
    } else await side.core.faults.delay();
    return `2.0.0 Ok: queued as ${stored.id}`;
  } finally {
    release?.();
  }
}

/** The shared limit, then the injected faults that strike before the message is stored. */
async function admit(side: Side, keyId: string, session: SMTPServerSession) {
  const { limiter, faults, stats } = side.core;
  const decision = limiter.take(keyId);
  if (!decision.ok) {
    side.refused("rateLimited");
    await faults.delay();
    throw reply(451, rateText(decision.retryAfter, decision.limit, limiter.windowMs));
  }
  const fault = faults.decide();
  if (fault.kind === "fail") {
    side.refused("faults");
    await faults.delay();
    const code = faults.config.failSmtpCode;
    throw reply(
      code,
      `${code < 500 ? "4.3.0" : "5.3.0"} Injected failure (mailsend sandbox fault injection); the message was not stored`,
    );
  }
  if (fault.kind === "drop" && fault.when === "before") {
    stats.count("smtp", "faults");
    side.socketOf(session)?.destroy();
    throw reply(421, "4.4.2 Connection dropped (fault injection)");
  }
  return fault;
}

async function storeMessage(side: Side, raw: Buffer, session: SMTPServerSession, idemKey: string | undefined) {
  let summary: Summary;
  try {
    summary = await summarize(raw);
  } catch {
    summary = { from: "", to: [], subject: "", attachments: [] };
  }
  return side.core.store.add({
    raw,
    channel: "smtp",
    keyId: session.user!,
    ...side.wire.envelopeOf(session.envelope.mailFrom, session.envelope.rcptTo),
    from: summary.from,
    to: summary.to,
    subject: summary.subject,
    attachments: summary.attachments,
    messageId: summary.messageIdHeader ?? "",
    ...(idemKey ? { idempotencyKey: idemKey } : {}),
  });
}

/** AUTH: the fixed username and an API key that is active as the password. */
const onAuth =
  (side: Side): SMTPServerOptions["onAuth"] =>
  (auth, _session, cb) => {
    const { core } = side;
    if (auth.method !== "LOGIN" && auth.method !== "PLAIN") {
      side.refused("authFailed");
      return cb(reply(504, "5.5.4 Unrecognized authentication type"));
    }
    if (auth.username !== core.smtpUser) {
      side.refused("authFailed");
      return cb(reply(535, `5.7.8 Authentication credentials invalid (the username is ${core.smtpUser})`));
    }
    const check = core.keys.verify(auth.password ?? undefined);
    if (!check.ok) {
      side.refused("authFailed");
      const why =
        check.reason === "revoked"
          ? "the API key has been revoked"
          : check.reason === "expired"
            ? "the API key has expired"
            : "the password must be a valid API key";
      return cb(reply(535, `5.7.8 Authentication credentials invalid: ${why}`));
    }
    cb(null, { user: check.key.id });
  };

/** DATA kept up to the size limit; a client that goes away mid-DATA leaves nothing. */
const onData =
  (side: Side): SMTPServerOptions["onData"] =>
  (stream, session, cb) => {
    const { maxSize } = side.core;
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= maxSize) chunks.push(c);
    });
    // Destroyed when the client goes away mid-DATA: keep nothing.
    stream.on("error", () => {
      chunks.length = 0;
    });
    stream.on("end", () => {
      if (stream.sizeExceeded || size > maxSize) {
        side.refused();
        return cb(reply(552, `5.3.4 Message too big: the limit is ${maxSize} bytes`));
      }
      accept(side, Buffer.concat(chunks, size), session).then(
        (text) => cb(null, text),
        (e: Error & { responseCode?: number }) => {
          if (e.responseCode === undefined) side.refused();
          cb(e.responseCode ? e : reply(451, "4.3.0 Temporary failure while storing the message; it was not stored"));
        },
      );
    });
  };

/** MAIL FROM: a valid address, and a key with room in its window (said before the client sends the whole message). */
const onMailFrom =
  (side: Side): SMTPServerOptions["onMailFrom"] =>
  (address, session, cb) => {
    side.wire.take(session.id, address);
    try {
      // The null sender (MAIL FROM:<>) of a delivery notice is taken, as RFC 5321 4.5.5 requires.
      if (address.address !== "") parseBareAddress(address.address, "MAIL FROM");
    } catch (e) {
      side.refused();
      return cb(reply(553, `5.1.7 Sender address rejected: ${(e as Error).message}`));
    }
    // Say so before the client sends the whole message; DATA counts it for real.
    const { limiter } = side.core;
    const d = limiter.peek(session.user!);
    if (!d.ok) {
      side.refused("rateLimited");
      return cb(reply(451, rateText(d.retryAfter, d.limit, limiter.windowMs)));
    }
    cb();
  };

const onRcptTo =
  (side: Side): SMTPServerOptions["onRcptTo"] =>
  (address, session, cb) => {
    side.wire.take(session.id, address);
    if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) {
      return cb(reply(452, `4.5.3 Too many recipients (at most ${MAX_RECIPIENTS} per message)`));
    }
    try {
      parseBareAddress(address.address, "RCPT TO");
    } catch (e) {
      return cb(reply(553, `5.1.3 Recipient address rejected: ${(e as Error).message}`));
    }
    cb();
  };

export function createSmtpServer(core: SandboxCore, role: SmtpRole, tls: TlsMaterial): SMTPServer {
  const { stats } = core;
  let server: SMTPServer;
  const side: Side = {
    core,
    wire: new WireRecorder(),
    refused(what) {
      stats.count("smtp", "refused");
      if (what) stats.count("smtp", what);
    },
    socketOf(session) {
      const conns = (server as unknown as { connections: Set<{ session?: { id: string }; _socket?: Socket }> })
        .connections;
      for (const c of conns) if (c.session?.id === session.id) return c._socket;
      return undefined;
    },
  };

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
    // The only way to the command lines as sent (wire.ts); it logs nothing.
    logger: side.wire.logger,
    closeTimeout: 1000,
    socketTimeout: 60_000,
    onAuth: onAuth(side),

    onMailFrom: onMailFrom(side),
    onRcptTo: onRcptTo(side),
    onData: onData(side),
    onClose: (session) => side.wire.forget(session.id),
  };
  server = new SMTPServer(options);
  // A client that misbehaves at the socket level must not take the sandbox down.
  server.on("error", () => {});
  return server;
}
