/**
 * `sendmail -bs`: one SMTP session on stdin and stdout, as Postfix's and Exim's sendmail offer
 * it to local programs (Symfony Mailer's and SwiftMailer's default sendmail transport, Laravel's
 * `sendmail -bs -i`, Drupal). The same SMTP server as the relay (smtp-server), given the pipes as
 * its connection: no listening socket, no AUTH, no TLS (the pipe is the local user's own). Each
 * message is answered only once `take` has it (sent, or in the outbox, fsynced).
 */
import { Duplex } from "node:stream";
import { SMTPServer } from "smtp-server";
import type { Envelope } from "../core/envelope.js";
import { MAX_RECIPIENTS } from "../core/message.js";
import { envelopeOf, rcptReplyFor, readData, replyFor, smtpReply, tooManyRecipients } from "./server.js";

export interface StdioOptions {
  input: NodeJS.ReadableStream;
  output: { write(chunk: Buffer | string, cb?: (e?: Error | null) => void): boolean };
  /** The machine's name for the greeting and EHLO. */
  name: string;
  /** Largest message in bytes, advertised as SIZE. */
  maxSize: number;
  /** Resolves to the id the message got (sent or queued); throws a MailsendError to refuse it. */
  take(raw: Buffer, envelope: Envelope): Promise<string>;
  /** A recipient's RCPT TO: throws a MailsendError to refuse that one (rcptReplyFor), the others not concerned. */
  checkRecipient?(address: string): void;
  /** A message refused (its SMTP reply), for -v. */
  onRefused?(reply: string): void;
  /** Idle time before the session is cut, as an MTA's (default 5 minutes). */
  idleMs?: number;
  /** Ends the session (a signal): the messages being taken are answered first, nothing more is read. */
  stop?: AbortSignal;
}

/** The pipes as the socket smtp-server expects: what it reads and writes, its timeout, an address. */
class PipeSocket extends Duplex {
  readonly remoteAddress = "127.0.0.1";
  readonly remotePort = 0;
  readonly localAddress = "127.0.0.1";
  readonly localPort = 0;
  /** As a connected net.Socket says: smtp-server writes its replies only to an open one. */
  get readyState(): string {
    return this.destroyed ? "closed" : "open";
  }
  #timer: NodeJS.Timeout | undefined;
  #idleMs = 0;
  #onIdle: (() => void) | undefined;
  /** Nothing is read before the greeting went out: a script that pipes its whole session is no "early talker". */
  #greeted = false;

  constructor(
    readonly input: NodeJS.ReadableStream,
    readonly output: StdioOptions["output"],
  ) {
    // Half open: a script's whole session piped in (ending at EOF right after QUIT) is still
    // answered line by line; serveStdio ends the session once the input ended and all is answered.
    super({ allowHalfOpen: true });
    input.on("data", (chunk: Buffer | string) => {
      this.#arm();
      if (!this.push(chunk)) input.pause();
    });
    input.pause();
    input.on("end", () => this.push(null));
    input.on("error", (e: Error) => this.destroy(e));
  }

  override _read(): void {
    if (this.#greeted) this.input.resume();
  }

  /** When the server last answered (Date.now()): it is still at work on piped commands while it answers. */
  lastWriteAt = Date.now();

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.lastWriteAt = Date.now();
    this.output.write(chunk, (e) => {
      if (!this.#greeted) {
        this.#greeted = true;
        this.input.resume();
      }
      cb(e ?? null);
    });
  }

  override _final(cb: (e?: Error | null) => void): void {
    cb();
    // The server ended the session (QUIT, or a refusal): nothing more is read.
    this.input.pause();
    process.nextTick(() => this.destroy());
  }

  override _destroy(err: Error | null, cb: (e: Error | null) => void): void {
    clearTimeout(this.#timer);
    cb(err);
  }

  setTimeout(ms: number, onIdle?: () => void): this {
    this.#idleMs = ms;
    if (onIdle) this.#onIdle = onIdle;
    this.#arm();
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  #arm(): void {
    clearTimeout(this.#timer);
    if (this.#idleMs > 0 && this.#onIdle) this.#timer = setTimeout(this.#onIdle, this.#idleMs);
  }
}

/** How long the server must have said nothing before a session whose input ended is closed. */
const QUIET_MS = 100;

/** Runs the session to its end (QUIT, or the caller closing the pipe); resolves once every message it took is answered. */
export async function serveStdio(opts: StdioOptions): Promise<void> {
  const inflight = new Set<Promise<unknown>>();
  const server = sessionServer(opts, inflight);
  server.on("error", () => {});
  const socket = new PipeSocket(opts.input, opts.output);
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  // The caller closed stdin without QUIT (or right after it), or this process was told to stop:
  // once every message taken is answered, the session ends as a dropped connection does (a
  // message cut mid-DATA is not taken, and its program still has it).
  let ending = false;
  const endWhenAnswered = () => {
    if (ending) return;
    ending = true;
    void dropWhenAnswered(socket, inflight);
  };
  opts.input.once("end", endWhenAnswered);
  if (opts.stop?.aborted) endWhenAnswered();
  else opts.stop?.addEventListener("abort", endWhenAnswered, { once: true });
  server.connect(socket as never, {} as never);
  await closed;
  while (inflight.size) await Promise.allSettled([...inflight]);
  // The session is over (QUIT): a caller that keeps its end of stdin open waits for this process
  // to exit before it closes it (Go's exec with StdinPipe, PHP's proc_close), so stop reading.
  (opts.input as { destroy?: () => void }).destroy?.();
}

/** The relay's SMTP server with the pipe's settings: no AUTH, no TLS; `inflight` holds each DATA's work. */
function sessionServer(opts: StdioOptions, inflight: Set<Promise<unknown>>): SMTPServer {
  return new SMTPServer({
    name: opts.name,
    banner: "mailsend sendmail -bs",
    disabledCommands: ["STARTTLS", "AUTH"],
    authOptional: true,
    size: opts.maxSize,
    disableReverseLookup: true,
    logger: false,
    socketTimeout: opts.idleMs ?? 5 * 60_000,
    // As the relay: what the service would refuse in part later is refused now, where the program hears it.
    onRcptTo(address, session, cb) {
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) return cb(tooManyRecipients(MAX_RECIPIENTS));
      try {
        opts.checkRecipient?.(address.address);
      } catch (e) {
        const refusal = rcptReplyFor(e, address.address);
        opts.onRefused?.(`${(refusal as { responseCode?: number }).responseCode} ${refusal.message}`);
        return cb(refusal);
      }
      cb();
    },
    onData(stream, session, cb) {
      readData(stream, opts.maxSize, (got) => {
        if (got === "cut") return cb(smtpReply(451, "4.3.0 The message was cut off"));
        if (got === "too_big") {
          const text = `5.3.4 Message too big: the limit is ${opts.maxSize} bytes`;
          opts.onRefused?.(`552 ${text}`);
          return cb(smtpReply(552, text));
        }
        const work = opts.take(got, envelopeOf(session)).then(
          (id) => cb(null, `2.0.0 Ok: ${id}`),
          (e: unknown) => {
            // A message refused for what it is (554), or a fault of this machine (4xx: the program keeps it).
            const r = replyFor(e);
            opts.onRefused?.(`${r.code} ${r.text}`);
            cb(smtpReply(r.code, r.text));
          },
        );
        inflight.add(work);
        void work.finally(() => inflight.delete(work));
      });
    },
  });
}

/**
 * What was read before the end (a whole session piped at once, 101 RCPTs among it) is answered
 * first: every byte taken by the server, no message being taken, every answer written, and the
 * server quiet for a moment (it answers each piped command as it gets to it). Then the session drops.
 */
async function dropWhenAnswered(socket: PipeSocket, inflight: Set<Promise<unknown>>): Promise<void> {
  for (let i = 0; i < 600_000 && !socket.destroyed; i++) {
    await new Promise((r) => setTimeout(r, 20));
    if (
      inflight.size === 0 &&
      socket.writableLength === 0 &&
      socket.readableLength === 0 &&
      Date.now() - socket.lastWriteAt >= QUIET_MS
    )
      break;
  }
  if (!socket.destroyed) socket.destroy();
}
