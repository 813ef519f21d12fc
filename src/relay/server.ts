/**
 * The local SMTP relay: an SMTP server (smtp-server) for programs that can
 * only be given an SMTP host. A message is answered 250 only once it is in
 * the outbox, fsynced; the caller's `validate` and `store` do the work, so
 * this file knows SMTP and nothing of the outbox's layout.
 *
 * Replies (RFC 5321 / 3463):
 *   552 5.3.4  over --max-size (SIZE= on MAIL FROM, or the DATA itself)
 *   554 5.6.0  a message mailsend could not deliver as it is (bad data)
 *   553 5.1.3  at RCPT, a recipient address that is not valid (not fully qualified, bad syntax)
 *   451 4.3.5  this machine's setup (no key, no sender, settings that cannot carry the message):
 *              not the message's fault, so the client keeps it until that is fixed
 *   452 4.3.1  the outbox cannot be written (disk full, read-only): try later
 *   451 4.3.0  anything else that went wrong here: try later
 *   421        too many clients (--max-clients, or one address's share), a third wrong password, or shutting down
 *   530 5.7.0  MAIL FROM before AUTH, where AUTH is required
 */
import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import { MailsendError } from "../core/errors.js";
import { MAX_RECIPIENTS } from "../core/message.js";
import { wireSize } from "../core/size.js";
import type { Envelope } from "../core/envelope.js";
import type { RelayUsers } from "./auth.js";
import { isOutboxWriteFailure } from "../outbox/store.js";
import { SessionGuard } from "./guard.js";
import { hostPort, isLoopback } from "./listen.js";
import { SETUP_REPLY } from "./replies.js";

export interface AcceptedInfo {
  id: string;
  envelope: Envelope;
  size: number;
  /** The authenticated user, when AUTH is on. */
  user?: string;
  remote: string;
}

export interface RelayOptions {
  host: string;
  port: number;
  /** Largest message in bytes, advertised as SIZE. */
  maxSize: number;
  /** Concurrent connections; one more is answered 421. */
  maxClients: number;
  /** When set, AUTH (PLAIN, LOGIN) is required before MAIL FROM. */
  users?: RelayUsers;
  /** When set, STARTTLS is offered (and required before AUTH off loopback). */
  tls?: { key: string | Buffer; cert: string | Buffer };
  /** Most recipients of one message. */
  maxRecipients?: number;
  /** How long a shutdown waits for clients to finish before it cuts them. */
  closeTimeoutMs?: number;
  /**
   * A recipient's RCPT TO: throws a MailsendError to refuse it (550 5.1.1), e.g. a local name that
   * the aliases file does not map.
   */
  checkRecipient?(address: string): Promise<void>;
  /**
   * The message and envelope as the relay takes them (local names mapped, the stamps an MTA adds);
   * validate and store get what this returns. Throws a MailsendError to refuse the message.
   */
  prepare?(raw: Buffer, envelope: Envelope): Promise<{ raw: Buffer; envelope: Envelope }>;
  /** Throws a MailsendError when the message cannot be delivered as it is (nothing is stored then). */
  validate(raw: Buffer, envelope: Envelope): Promise<void>;
  /**
   * Resolves to the outbox id once the message is durable; throws when it cannot be written. The
   * validation runs beside the write: `gate` is it, and the message enters the queue only once it
   * passed (a store rejects with the gate's error as it is).
   */
  store(raw: Buffer, envelope: Envelope, gate: Promise<void>): Promise<string>;
  onAccepted?(info: AcceptedInfo): void;
  /**
   * A message refused after DATA, or a recipient at its RCPT TO (`rcpt`, the envelope's `to` being
   * it alone): logged by the caller, never a password.
   */
  onRefused?(info: {
    code: number;
    reply: string;
    envelope: Envelope;
    remote: string;
    error?: MailsendError;
    rcpt?: string;
  }): void;
  /**
   * Connections one client address may hold at once; one more is answered 421. Default: a quarter
   * of maxClients when listening beyond loopback, none on loopback (this machine's own programs).
   */
  maxClientsPerAddress?: number;
  /** Clients come from a network (what the rules below are for): by default, when `host` is not loopback. */
  network?: boolean;
  /** How long a session has to log in when AUTH is required (guard.ts's LOGIN_DEADLINE_MS unless said). */
  loginDeadlineMs?: number;
  /** The growth of the delay before a wrong password is answered, per recent failure from the address. */
  failureDelayStepMs?: number;
  /** Each wrong password (the address and the user name given, never the password): logged by the caller whatever -v says. */
  onAuthFailed?(info: { address: string; user: string; closing: boolean }): void;
}

export interface Relay {
  readonly host: string;
  readonly port: number;
  readonly server: SMTPServer;
  /** Stop accepting; let the transactions in flight end (their messages stored and answered); then resolve. */
  close(): Promise<void>;
}

/** An SMTP reply as smtp-server takes it from a handler: an Error with its code. */
export function smtpReply(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

/** One line, printable, bounded: an error message as an SMTP reply text. */
function replyText(s: string): string {
  const one = s.replace(/[\r\n\t]+/g, " ").replace(/[^\x20-\x7e]/g, "?");
  return one.length > 400 ? `${one.slice(0, 397)}...` : one;
}

/**
 * The SMTP answer for an error of validation or storage, the relay's and `sendmail -bs`'s alike.
 * Never 250: what was not stored is not accepted. `stage` "store": the error came from the write.
 */
export function replyFor(e: unknown, stage: "validate" | "store" = "validate"): { code: number; text: string } {
  const err = e instanceof MailsendError ? e : undefined;
  if (isOutboxWriteFailure(e) || (stage === "store" && err?.exitClass !== "config")) {
    // A full disk, a read-only or unwritable outbox: the client keeps the message and tries again.
    const why = err ? replyText(err.message.replace(/; the message was NOT queued$/, "")) : "internal error";
    return { code: 452, text: `4.3.1 Insufficient system storage: the message was not queued (${why})` };
  }
  if (
    !err ||
    err.code === "internal" ||
    err.exitClass === "tempfail" ||
    err.exitClass === "unavailable" ||
    err.exitClass === "cantcreat" ||
    err.exitClass === "ioerr"
  ) {
    return {
      code: 451,
      text: `4.3.0 Temporary local problem, try again later${err && err.code !== "internal" ? ` (${replyText(err.message)})` : ""}`,
    };
  }
  if (err.code === "too_large") return { code: 552, text: `5.3.4 ${replyText(err.message)}` };
  // RFC 3463 4.3.5 "system incorrectly configured": the key, the sender, the transports of this
  // machine; 5xx is for what is wrong with the message itself.
  if (err.exitClass === "config" || err.exitClass === "noperm" || err.local)
    return { code: SETUP_REPLY.code, text: `${SETUP_REPLY.status} ${replyText(err.message)}` };
  return { code: 554, text: `5.6.0 ${replyText(err.message)}` };
}

/**
 * The answer to a RCPT TO that `checkRecipient` refused: 553 5.1.3 for an address that is not
 * valid (RFC 5321 3.3, RFC 3463 "bad destination mailbox address syntax"), 550 5.1.1 for one that
 * goes nowhere (a local name the aliases file does not map), a fault here 4xx. The other
 * recipients of the message are not concerned.
 */
export function rcptReplyFor(e: unknown, address: string): Error {
  const err = e instanceof MailsendError ? e : undefined;
  if (err?.code === "invalid_address")
    return smtpReply(553, `5.1.3 <${replyText(address)}>: ${replyText(err.message)}`);
  if (err && !err.local && (err.exitClass === "config" || err.exitClass === "dataerr" || err.exitClass === "usage")) {
    return smtpReply(550, `5.1.1 <${replyText(address)}>: ${replyText(err.message)}`);
  }
  const r = replyFor(e, "validate");
  return smtpReply(r.code, r.text);
}

/**
 * The DATA of one message, kept up to `maxSize` (past it only counted, and measured with CRLF line
 * ends, as it goes on): the bytes, "too_big", or
 * "cut" when the client went away mid-DATA (nothing was accepted, so nothing is kept).
 */
export function readData(
  stream: NodeJS.ReadableStream & { sizeExceeded?: boolean },
  maxSize: number,
  done: (got: Buffer | "too_big" | "cut") => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let broken = false;
  stream.on("data", (c: Buffer) => {
    size += c.length;
    if (size <= maxSize) chunks.push(c);
  });
  stream.on("error", () => {
    broken = true;
    chunks.length = 0;
  });
  stream.on("end", () => {
    if (broken) return done("cut");
    if (stream.sizeExceeded || size > maxSize) return done("too_big");
    const got = Buffer.concat(chunks, size);
    // A client that sends bare LF line ends: the message goes on with CRLF, and is measured so.
    done(wireSize(got) > maxSize ? "too_big" : got);
  });
}

/** The reply to a recipient beyond `max`: 452 4.5.3, which SMTP clients answer with another transaction. */
export const tooManyRecipients = (max: number) =>
  smtpReply(452, `4.5.3 Too many recipients (at most ${max} per message)`);

/** A recipient through the caller's check: the reply to give (undefined: taken), said to onRefused too. */
async function checkRecipient(
  opts: RelayOptions,
  address: string,
  session: SMTPServerSession,
): Promise<Error | undefined> {
  try {
    await opts.checkRecipient!(address);
    return undefined;
  } catch (e) {
    const reply = rcptReplyFor(e, address) as Error & { responseCode: number };
    // Said where the relay logs, too: a 451 here (no aliases file, a broken one) is this
    // machine's to fix, and an MTA in front only keeps retrying.
    const envelope = { from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", to: [address] };
    opts.onRefused?.({
      code: reply.responseCode,
      reply: reply.message,
      envelope,
      remote: `${session.remoteAddress}:${session.remotePort}`,
      rcpt: address,
      ...(e instanceof MailsendError ? { error: e } : {}),
    });
    return reply;
  }
}

/** One message's DATA through prepare, validate and store: answered 250 only once it is stored. */
async function takeMessage(
  opts: RelayOptions,
  got: Buffer,
  offered: Envelope,
  session: SMTPServerSession,
  remote: string,
  cb: (err?: Error | null, message?: string) => void,
): Promise<void> {
  const size = got.length;
  let refusal: { error: unknown } | undefined;
  let envelope = offered;
  try {
    let raw = got;
    if (opts.prepare) {
      try {
        ({ raw, envelope } = await opts.prepare(got, envelope));
      } catch (e) {
        refusal = { error: e };
        throw e;
      }
    }
    const gate = opts.validate(raw, envelope).catch((error: unknown) => {
      refusal = { error };
      throw error;
    });
    // Handled where the store awaits it, or not needed when the write failed first.
    gate.catch(() => {});
    const id = await opts.store(raw, envelope, gate);
    cb(null, `2.0.0 queued as ${id}`);
    try {
      opts.onAccepted?.({
        id,
        envelope,
        size,
        remote,
        ...(typeof session.user === "string" ? { user: session.user } : {}),
      });
    } catch {
      // Logging or waking the runner failed: the message is stored and answered; the next wake-up finds it.
    }
  } catch (e) {
    const r = replyFor(e, refusal && refusal.error === e ? "validate" : "store");
    opts.onRefused?.({
      code: r.code,
      reply: r.text,
      envelope,
      remote,
      ...(e instanceof MailsendError ? { error: e } : {}),
    });
    cb(smtpReply(r.code, r.text));
  }
}

/** Listen, or say in the user's terms why this address cannot be listened on. */
function listen(server: SMTPServer, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const fail = (e: NodeJS.ErrnoException) => {
      const where = hostPort(host, port);
      if (e.code === "EADDRINUSE") {
        reject(
          new MailsendError("config_invalid", `cannot listen on ${where}: the address is already in use`, {
            hint: "Another relay (or mail server) runs there; stop it or choose another --listen.",
          }),
        );
      } else if (e.code === "EACCES") {
        reject(
          new MailsendError("config_invalid", `cannot listen on ${where}: permission denied`, {
            hint: "Ports below 1024 need root or CAP_NET_BIND_SERVICE; the default 2525 does not.",
          }),
        );
      } else if (e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND" || e.code === "EAI_AGAIN") {
        reject(
          new MailsendError("config_invalid", `cannot listen on ${where}: no such address on this machine`, {
            hint: "Give an address of one of this machine's interfaces, e.g. --listen 127.0.0.1:2525.",
          }),
        );
      } else reject(new MailsendError("config_invalid", `cannot listen on ${where}: ${e.message}`));
    };
    server.server.once("error", fail);
    server.listen(port, host, () => {
      server.server.off("error", fail);
      resolve();
    });
  });
}

/** The envelope of a session's transaction: MAIL FROM and the RCPT TOs it took. */
export const envelopeOf = (session: SMTPServerSession): Envelope => ({
  from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
  to: session.envelope.rcptTo.map((r) => r.address),
});

/** The policies of guard.ts for these options. */
function guardFor(opts: RelayOptions): SessionGuard {
  const network = opts.network ?? !isLoopback(opts.host);
  const perAddress = opts.maxClientsPerAddress ?? (network ? Math.max(1, Math.floor(opts.maxClients / 4)) : undefined);
  return new SessionGuard({
    auth: opts.users !== undefined,
    authAfterTls: opts.users !== undefined && opts.tls !== undefined && network,
    ...(perAddress !== undefined ? { perAddress } : {}),
    ...(opts.loginDeadlineMs !== undefined ? { loginDeadlineMs: opts.loginDeadlineMs } : {}),
    ...(opts.failureDelayStepMs !== undefined ? { failureDelayStepMs: opts.failureDelayStepMs } : {}),
    ...(opts.onAuthFailed ? { onAuthFailed: opts.onAuthFailed } : {}),
  });
}

/** AUTH: the login checked against the relay's users, the guard counting the failures. */
function loginHandler(users: RelayUsers | undefined, guard: SessionGuard): SMTPServerOptions["onAuth"] {
  return (auth, session, cb) => {
    if (!users) return cb(smtpReply(503, "5.5.1 AUTH not available"));
    users.verify(auth.username, auth.password ?? undefined).then(
      async (ok) => {
        if (ok) {
          guard.authenticated(session);
          return cb(null, { user: auth.username });
        }
        const closing = await guard.failed(session, auth.username ?? "");
        cb(
          closing
            ? smtpReply(421, "4.7.0 Too many authentication failures, closing connection")
            : smtpReply(535, "5.7.8 Authentication credentials invalid"),
        );
      },
      () => cb(smtpReply(454, "4.7.0 Temporary authentication failure")),
    );
  };
}

/** DATA: the message read within --max-size, then taken; `inflight` holds the work until it is answered. */
function dataHandler(opts: RelayOptions, inflight: Set<Promise<unknown>>): SMTPServerOptions["onData"] {
  return (stream, session, cb) => {
    readData(stream, opts.maxSize, (got) => {
      if (got === "cut") return cb(smtpReply(451, "4.3.0 The message was cut off"));
      const offered = envelopeOf(session);
      const remote = `${session.remoteAddress}:${session.remotePort}`;
      if (got === "too_big") {
        const text = `5.3.4 Message too big: the limit is ${opts.maxSize} bytes`;
        opts.onRefused?.({ code: 552, reply: text, envelope: offered, remote });
        return cb(smtpReply(552, text));
      }
      const work = takeMessage(opts, got, offered, session, remote, cb);
      inflight.add(work);
      void work.finally(() => inflight.delete(work));
    });
  };
}

/** The server's settings and the handlers of AUTH, RCPT TO and DATA; `inflight` holds each DATA's work. */
function serverOptions(opts: RelayOptions, inflight: Set<Promise<unknown>>, guard: SessionGuard): SMTPServerOptions {
  // More than the service takes would be answered 250 here and refused in part later, with the app
  // long gone: a 452 at RCPT tells it now, and SMTP clients send those in a second transaction.
  const maxRecipients = opts.maxRecipients ?? MAX_RECIPIENTS;
  const disabled: string[] = [];
  if (!opts.tls) disabled.push("STARTTLS");
  if (!opts.users) disabled.push("AUTH");

  return {
    name: "localhost",
    // smtp-server puts "<name> ESMTP" before it.
    banner: "mailsend relay",
    ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
    secure: false,
    disabledCommands: disabled,
    authMethods: ["PLAIN", "LOGIN"],
    authOptional: !opts.users,
    // On loopback the password never leaves the machine; elsewhere AUTH only under TLS.
    allowInsecureAuth: !(opts.network ?? !isLoopback(opts.host)),
    size: opts.maxSize,
    maxClients: opts.maxClients,
    disableReverseLookup: true,
    logger: false,
    closeTimeout: opts.closeTimeoutMs ?? 5000,
    socketTimeout: 5 * 60_000,

    onConnect(session, cb) {
      const refused = guard.connect(session, disabled);
      cb(refused ? smtpReply(421, refused) : null);
    },

    onSecure(_socket, session, cb) {
      guard.secured(session, disabled);
      cb();
    },

    onClose(session) {
      guard.close(session);
    },

    onAuth: loginHandler(opts.users, guard),

    onMailFrom(_address, session, cb) {
      // AUTH hidden until TLS takes it out of what smtp-server asks for: the relay asks itself.
      if (opts.users && !session.user) return cb(smtpReply(530, "5.7.0 Authentication required"));
      cb();
    },

    onRcptTo(address, session, cb) {
      if (session.envelope.rcptTo.length >= maxRecipients) return cb(tooManyRecipients(maxRecipients));
      if (!opts.checkRecipient) return cb();
      checkRecipient(opts, address.address, session).then(cb);
    },

    onData: dataHandler(opts, inflight),
  };
}

export async function startRelay(opts: RelayOptions): Promise<Relay> {
  const inflight = new Set<Promise<unknown>>();
  let closing = false;
  const guard = guardFor(opts);
  const options = serverOptions(opts, inflight, guard);
  const server = new SMTPServer(options);
  // A client that misbehaves at the socket level must not take the relay down.
  server.on("error", () => {});
  guard.watch(server.server);

  await listen(server, opts.host, opts.port);
  const addr = server.server.address() as AddressInfo;

  return {
    host: opts.host,
    port: addr.port,
    server,
    async close() {
      if (closing) return;
      closing = true;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // A transaction whose DATA ended is answered only after its message is stored.
      while (inflight.size) await Promise.allSettled([...inflight]);
    },
  };
}

/** The Subject and From headers as written (unfolded), for `mailsend queue`. */
export function summaryHeaders(raw: Buffer): { subject?: string; headerFrom?: string } {
  // A message that starts with an empty line has no header at all.
  if (raw[0] === 0x0a || (raw[0] === 0x0d && raw[1] === 0x0a)) return {};
  const crlf = raw.indexOf("\r\n\r\n");
  const lf = raw.indexOf("\n\n");
  const ends = [crlf, lf].filter((i) => i >= 0);
  const end = ends.length ? Math.min(...ends) : Math.min(raw.length, 64 * 1024);
  const head = raw
    .subarray(0, Math.min(end, 256 * 1024))
    .toString("utf8")
    .replace(/\r?\n[ \t]+/g, " ");
  const out: { subject?: string; headerFrom?: string } = {};
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line
      .slice(colon + 1)
      .trim()
      .slice(0, 998);
    if (name === "subject" && out.subject === undefined) out.subject = value;
    else if (name === "from" && out.headerFrom === undefined) out.headerFrom = value;
  }
  return out;
}
