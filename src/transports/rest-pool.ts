/**
 * The REST engine for bodies over 1 MB: one keep-alive undici Pool per
 * transport (N connections for a batch of --concurrency N), because undici
 * reads a service's early 413 where node:http mostly sees a broken pipe.
 * Ordinary bodies, in a send or a batch, go through node:http (rest.ts): in
 * a batch of small messages undici's load cost more than it saved (issue 16).
 *
 * Loaded only when such a body is sent, so neither `mailsend send` nor a
 * batch of ordinary messages pays for undici's start-up. Requests
 * go through `dispatch` with a handler, not `request()`, because the handler
 * is told when the whole body has been written (`onRequestSent`): that is what
 * decides whether a broken connection may have sent the message, exactly as
 * on the node:http path. Failures are classified by the same `failureOf`.
 */
import type { Readable } from "node:stream";
import { Pool, ProxyAgent, type Dispatcher } from "undici";
import type { ProxySetting } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { PROXY_AUTH_ERROR, proxyFailure } from "./proxy.js";
import { failureOf, timeoutFailure, type Answer, type PostContext, type Progress } from "./rest-failure.js";

/** What rest.ts hands over: the body as a length, and whole or as chunks. */
export interface PoolBody {
  length: number;
  whole?: Buffer;
  chunks: () => AsyncGenerator<Buffer>;
}

export interface PoolOptions {
  connections: number;
  timeoutMs: number;
  ca?: string[];
  insecure?: boolean;
  /** Through this proxy: undici's ProxyAgent, CONNECT for https://, the absolute form for http://. */
  proxy?: ProxySetting;
}

/** Keep only the start of a huge error page: enough for an excerpt. */
const KEEP = 64 * 1024;

const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/** A failure while reading an attachment is the file's, as on the node:http path: never a connection's. */
async function* readingErrors(chunks: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* chunks;
  } catch (e) {
    throw e instanceof MailsendError ? e : new MailsendError("file_unreadable", `cannot read an attachment: ${(e as Error).message}`, { cause: e });
  }
}

/** Bytes undici is given at a time of a body that is one buffer. */
const SLICE = 256 * 1024;
/** The first of them, and how long to wait after it for an answer to the headers alone. */
const FIRST = 16 * 1024;
const HEARING_MS = 25;

/**
 * A body that is one buffer (a large HTML report, no attachments), in slices: undici writes it
 * with backpressure and says it was sent only once the last slice is written. Given whole, it is
 * "sent" as soon as the socket took the write, and a service that refuses from the headers (413
 * for the Content-Length) and closes was heard only as a broken pipe after the message went
 * (outcome unknown, 76). After a first small slice it waits a moment, as reading an attachment's
 * first bytes from disk does on that path: an early answer is read then, not run into (a poor
 * man's Expect: 100-continue, which undici does not do over HTTP/1.1).
 */
async function* slices(whole: Buffer): AsyncGenerator<Buffer> {
  yield whole.subarray(0, FIRST);
  await new Promise<void>((r) => setTimeout(r, HEARING_MS));
  for (let i = FIRST; i < whole.length; i += SLICE) {
    // A turn of the event loop between slices: an answer that came meanwhile is read first.
    await new Promise<void>((r) => setImmediate(r));
    yield whole.subarray(i, i + SLICE);
  }
}

export class PoolPoster {
  readonly #pool: Dispatcher;
  readonly #path: string;
  readonly #origin: string;
  readonly #proxy: ProxySetting | undefined;

  constructor(url: URL, opts: PoolOptions) {
    this.#path = `${url.pathname}${url.search}`;
    this.#origin = url.origin;
    this.#proxy = opts.proxy;
    const common = { connections: opts.connections, pipelining: 1, connectTimeout: opts.timeoutMs, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs };
    const tls = { ...(opts.ca ? { ca: opts.ca } : {}), ...(opts.insecure ? { rejectUnauthorized: false } : {}) };
    const proxy = opts.proxy;
    this.#pool = proxy
      ? new ProxyAgent({
          ...common,
          uri: `${proxy.protocol}//${proxy.host.includes(":") ? `[${proxy.host}]` : proxy.host}:${proxy.port}`,
          ...(proxy.authorization ? { token: proxy.authorization } : {}),
          proxyTunnel: false,
          requestTls: tls,
          ...(opts.ca ? { proxyTls: { ca: opts.ca } } : {}),
        })
      : new Pool(url.origin, { ...common, ...(url.protocol === "https:" ? { connect: tls } : {}) });
  }

  post(body: PoolBody, ctx: PostContext): Promise<Answer> {
    const { signal } = ctx;
    return new Promise<Answer>((resolve, reject) => {
      const progress: Progress = { connected: false, sent: false, answered: false };
      let settled = false;
      let abortRequest: ((err?: Error) => void) | undefined;
      let status = 0;
      let statusText = "";
      const headers: Record<string, string> = {};
      const rawHeaders: [string, string][] = [];
      const chunks: Buffer[] = [];
      let size = 0;

      const done = (e: MailsendError | undefined, answer?: Answer) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        if (e) reject(e);
        else resolve(answer!);
      };
      const failWith = (err: unknown): void => {
        if (settled) return;
        const code = (err as { code?: unknown })?.code;
        if (code === "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH") {
          // The body came out longer than planned: an attachment grew while it was being sent.
          done(new MailsendError("file_unreadable", "an attachment changed size while it was being sent", { cause: err }));
          return;
        }
        if (typeof code === "string" && TIMEOUT_CODES.has(code) && !signal?.aborted) {
          // undici's connect and headers timeouts are our --timeout.
          done(timeoutFailure(progress, ctx));
          return;
        }
        // Before a connection to the service, the only peer was the proxy: its failures name it. So
        // does its 407 to a request it forwards (an http:// service), whenever it comes.
        const proxyAuth = PROXY_AUTH_ERROR.test((err as Error)?.message ?? "");
        const byProxy = this.#proxy && (!progress.connected || proxyAuth) ? proxyFailure(err, this.#proxy, ctx.url.host) : undefined;
        if (byProxy) return done(byProxy);
        void failureOf(err, progress, ctx).then((m) => done(m));
      };
      function onAbort() {
        // Before the request has a connection there is nothing to abort on the
        // wire: it is refused at once, and dropped when its turn comes.
        // A plain error, not the signal's reason: failureOf() then judges it by how far the request got.
        const err = Object.assign(new Error("the request was aborted"), { name: "AbortError" });
        if (abortRequest) abortRequest(err);
        else failWith(err);
      }
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });

      const handler = {
        onConnect(abort: (err?: Error) => void) {
          if (settled) return abort(new Error("no longer wanted"));
          abortRequest = abort;
          progress.connected = true;
        },
        // Not in undici's handler types, but called by its core request: the whole body is written.
        onRequestSent() {
          progress.sent = true;
        },
        onHeaders(statusCode: number, raw: Buffer[], _resume: () => void, text: string): boolean {
          if (statusCode < 200) return true;
          ctx.answered?.();
          progress.answered = true;
          status = statusCode;
          statusText = text ?? "";
          for (let i = 0; i + 1 < raw.length; i += 2) {
            const name = raw[i]!.toString("latin1");
            const value = raw[i + 1]!.toString("latin1");
            rawHeaders.push([name, value]);
            const lower = name.toLowerCase();
            headers[lower] = lower in headers ? `${headers[lower]}, ${value}` : value;
          }
          return true;
        },
        onData(chunk: Buffer): boolean {
          if (size < KEEP) chunks.push(chunk);
          size += chunk.length;
          return true;
        },
        onComplete() {
          done(undefined, { status, statusText, httpVersion: "1.1", headers, rawHeaders, body: Buffer.concat(chunks).toString("utf8") });
        },
        onError(err: Error) {
          failWith(err);
        },
      };
      // An async iterable body is written chunk by chunk with backpressure (undici's own
      // iterable path; its types list only Readable): no stream buffering in between.
      const requestBody = (body.whole ? (body.whole.length <= SLICE ? body.whole : slices(body.whole)) : readingErrors(body.chunks())) as unknown as Readable;
      try {
        this.#pool.dispatch({ origin: this.#origin, path: this.#path, method: "POST", headers: ctx.headers, body: requestBody }, handler as never);
      } catch (e) {
        failWith(e);
      }
    });
  }

  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}
