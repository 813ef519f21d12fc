/**
 * POST {base_url}/send over node:http(s): one connection for a send, a keep-alive Agent of
 * --concurrency sockets for a batch.
 *
 * node:http rather than undici, for every body: a short-lived process pays far more to load
 * undici, and an undici Pool costs a batch no less CPU per request than the Agent.
 * A service that refuses a large body from its headers (413) and closes is still heard: a large
 * body is written in steps that let the answer be read first (#postHttp, writeBody).
 *
 * The JSON body is streamed: attachments are read from disk and base64'd
 * chunk by chunk, with the Content-Length computed up front, so a large file
 * never sits in memory as a string.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { closeSync, createReadStream, openSync, readSync } = process.getBuiltinModule("node:fs");
import type http from "node:http";
import type { AgentOptions } from "node:https";
import { urlToHttpOptions } from "node:url";
import type { RestConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { Attachment, Message } from "../core/message.js";
import { allRecipients } from "../core/message.js";
import { whenAborted } from "../core/abort.js";
import { makeRedactor, REDACTED } from "../core/redact.js";
import { base64Length, sendRequestFields } from "../core/request.js";
import type { PreviewSink, SendContext, SendResult, Transport, TransportOptions } from "../core/transport.js";
import { trustedCas } from "../net/ca.js";
import { revokedKeyHint, TOO_LARGE_HINT } from "./hints.js";
import {
  afterResetFailure,
  brokenAfterSent,
  failureOf,
  timeoutFailure,
  type PostContext,
  type Progress,
} from "./rest-failure.js";
import { isReset } from "../net/errors.js";
import { absoluteForm, proxyAgent, proxyAnswerError } from "./proxy.js";

/** Bytes read per chunk: a multiple of 3, so each chunk base64-encodes on its own. */
const CHUNK = 3 * 64 * 1024;
const EXCERPT = 300;
/**
 * Bodies longer than this are written in steps (writeBody): a service that refuses them from
 * the headers alone and closes is heard, not run into with the rest of the upload.
 */
const LARGE_BODY = 1024 * 1024;
/** Bytes written at a time of a large body that is one string (an HTML report, no attachments). */
const SLICE = 256 * 1024;
/** The first bytes of a large body, and how long to wait after them for an answer to the headers alone. */
const FIRST = 16 * 1024;
const HEARING_MS = 25;

async function* base64OfFile(path: string, size: number): AsyncGenerator<Buffer> {
  let carry: Buffer = Buffer.alloc(0);
  let total = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK })) {
    total += (chunk as Buffer).length;
    // Grown since it was checked: stop before a byte beyond the planned Content-Length goes out
    // (on a keep-alive connection it would be read as the start of the next request).
    if (total > size) {
      throw new MailsendError(
        "file_unreadable",
        `attachment ${path} changed size while it was being sent (${size} -> more than ${size} bytes)`,
      );
    }
    const buf: Buffer = carry.length ? Buffer.concat([carry, chunk as Buffer]) : (chunk as Buffer);
    const usable = buf.length - (buf.length % 3);
    if (usable > 0) yield Buffer.from(buf.subarray(0, usable).toString("base64"), "latin1");
    carry = buf.subarray(usable);
  }
  if (carry.length) yield Buffer.from(carry.toString("base64"), "latin1");
  if (total !== size) {
    throw new MailsendError(
      "file_unreadable",
      `attachment ${path} changed size while it was being sent (${size} -> ${total} bytes)`,
    );
  }
}

interface BodyPlan {
  length: number;
  chunks: () => AsyncGenerator<Buffer>;
  /**
   * The whole body, when it has no attachments (most of a batch): a string, written in one go.
   * node:http joins a string body to the head and writes both with one write(); a Buffer body
   * goes as a second chunk of a writev, and its copy is one more allocation per request.
   */
  text?: string;
}

/**
 * A request made ready for the next send of one message (RestTransport.prepare): its connection
 * opened, nothing written on it.
 */
interface Prepared {
  message: Message;
  plan: BodyPlan;
  headers: Record<string, string>;
  req: http.ClientRequest;
  /** Its connection is up (TLS too). */
  connected: boolean;
  /** Told when it comes up, once the send has it. */
  onConnected?: () => void;
  /** It failed before anything was written: the send makes a request of its own. */
  failed: boolean;
  timer: NodeJS.Timeout;
}
/** Calls `up` once the request's connection is up (over TLS: once its handshake is done). */
function whenConnected(req: http.ClientRequest, tls: boolean, up: () => void): void {
  req.on("socket", (socket) => {
    if (!socket.connecting) up();
    else socket.once(tls ? "secureConnect" : "connect", up);
  });
}
/** How long a prepared request is kept for its send (deliver() makes it shortly before its slot). */
const PREPARED_TTL_MS = 1_000;

/** How many times one request is made again after a kept-alive connection was found closed (#postHttp). */
const STALE_RETRIES = 8;
/** No proxy headers (an http:// service reached directly): the request's headers go as they are. */
const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** The wire body as a length and a generator. `shorten` is for --dry-run. */
function planBody(m: Message, shorten = false): BodyPlan {
  const fields = sendRequestFields(m);
  if (m.attachments.length === 0) {
    const text = JSON.stringify(fields);
    return {
      length: Buffer.byteLength(text),
      text,
      chunks: async function* () {
        yield Buffer.from(text);
      },
    };
  }
  const head = JSON.stringify(fields).slice(0, -1);
  const parts = m.attachments.map((a, i) => {
    const open = Buffer.from(`${i === 0 ? ',"attachments":[' : ","}{"content":"`);
    const close = Buffer.from(`","filename":${JSON.stringify(a.filename)}}`);
    const size = a.source.kind === "file" ? a.source.size : a.source.data.length;
    return { a, open, close, size };
  });
  const start = Buffer.from(head);
  const end = Buffer.from("]}");
  const length =
    start.length + end.length + parts.reduce((n, p) => n + p.open.length + base64Length(p.size) + p.close.length, 0);
  return {
    length,
    chunks: async function* () {
      yield start;
      for (const p of parts) {
        yield p.open;
        if (shorten) yield Buffer.from(shortContent(p.a, p.size));
        else if (p.a.source.kind === "file") yield* base64OfFile(p.a.source.path, p.size);
        else yield Buffer.from(p.a.source.data.toString("base64"), "latin1");
        yield p.close;
      }
      yield end;
    },
  };
}

function shortContent(a: Attachment, size: number): string {
  const head = a.source.kind === "bytes" ? a.source.data.subarray(0, 24).toString("base64") : readHead(a.source.path);
  return `${head}...(base64 of ${size} bytes, ${base64Length(size)} characters)`;
}

/** The first bytes of a file, read without loading the rest (a dry run of a 2 GB attachment). */
function readHead(path: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(24);
    return buf.subarray(0, readSync(fd, buf, 0, 24, 0)).toString("base64");
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function sendUrl(baseUrl: string): URL {
  const url = new URL(baseUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/send`;
  return url;
}

function excerpt(body: string, redact: (s: string) => string): string {
  const flat = body.replace(/\s+/g, " ").trim();
  const cut = flat.length > EXCERPT ? `${flat.slice(0, EXCERPT)}...` : flat;
  return redact(cut) || "(empty body)";
}

const HTTP_DATE_MONTH = /\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b/;

/** Seconds from Retry-After (seconds or HTTP date) or RateLimit-Reset. */
export function retryAfterSeconds(headers: http.IncomingHttpHeaders, now = Date.now()): number | undefined {
  const ra = headers["retry-after"];
  if (typeof ra === "string" && ra.trim()) {
    if (/^\d+$/.test(ra.trim())) return Number(ra.trim());
    // Date.parse takes almost anything ("-5" is the year -5): only an HTTP-date, which names its month.
    const at = HTTP_DATE_MONTH.test(ra) ? Date.parse(ra) : Number.NaN;
    if (!Number.isNaN(at)) return Math.max(0, Math.ceil((at - now) / 1000));
  }
  const reset = headers["ratelimit-reset"];
  if (typeof reset === "string" && /^\d+$/.test(reset.trim())) return Number(reset.trim());
  return undefined;
}

export function statusError(
  status: number,
  body: string,
  headers: http.IncomingHttpHeaders,
  url: URL,
  redact: (s: string) => string,
): MailsendError {
  const ex = excerpt(body, redact);
  const at = `${url.origin}${url.pathname}`;
  if (status === 400 || status === 422) {
    return new MailsendError("invalid_message", `the service rejected the message as invalid (HTTP ${status}): ${ex}`, {
      status,
    });
  }
  if (status === 401) {
    return new MailsendError("auth_failed", `the service refused the API key (HTTP 401): ${ex}`, {
      status,
      hint: (s) => `Check ${s.env("apiKey")} (or ${s.env("apiKeyFile")}): the key is wrong or missing.`,
    });
  }
  if (status === 403) {
    return new MailsendError("key_revoked", `the API key is not allowed to send (HTTP 403): ${ex}`, {
      status,
      hint: revokedKeyHint(url.hostname),
    });
  }
  if (status === 404 || status === 405) {
    return new MailsendError("config_invalid", `there is no send endpoint at ${at} (HTTP ${status})`, {
      status,
      hint: (s) => `Check ${s.either("baseUrl")}: it is the address before /send.`,
    });
  }
  if (status === 413) {
    return new MailsendError("too_large", `the message is too large for the service (HTTP 413): ${ex}`, {
      status,
      hint: TOO_LARGE_HINT,
    });
  }
  if (status === 429) {
    const retryAfter = retryAfterSeconds(headers);
    return new MailsendError(
      "rate_limited",
      `rate limit exceeded (HTTP 429)${retryAfter !== undefined ? `; the service asks to wait ${retryAfter} s` : ""}`,
      {
        status,
        ...(retryAfter !== undefined ? { retryAfter } : {}),
        hint: "The service allows 60 requests per minute per key by default. Nothing was sent; try again later.",
      },
    );
  }
  if (status === 408) {
    return new MailsendError("timeout", `the service timed out reading the request (HTTP 408)`, { status });
  }
  if (status >= 500) {
    return new MailsendError("service_error", `the service failed (HTTP ${status}): ${ex}`, {
      status,
      mayHaveBeenSent: status !== 502 && status !== 503 && status !== 504,
      hint: "This is on the service's side; try again later.",
    });
  }
  return new MailsendError("protocol_error", `unexpected answer from the service (HTTP ${status}): ${ex}`, { status });
}

/**
 * A node:http answer. Its headers and raw header pairs are made only when read (a refusal, a
 * trace): most answers of a batch never need them. A class, not an object literal with getters,
 * which costs more to make than the pairs it would save.
 */
class HttpAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly httpVersion: string;
  readonly body: string;
  afterReset?: boolean;
  readonly #res: http.IncomingMessage;
  constructor(res: http.IncomingMessage, body: string) {
    this.status = res.statusCode ?? 0;
    this.statusText = res.statusMessage ?? "";
    this.httpVersion = res.httpVersion;
    this.body = body;
    this.#res = res;
  }
  get headers(): http.IncomingHttpHeaders {
    return this.#res.headers;
  }
  get rawHeaders(): [string, string][] {
    const raw = this.#res.rawHeaders;
    const pairs: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
    return pairs;
  }
}

/** Resolves when `req` takes more of its body, or will take no more (closed, or answered). */
function writable(req: http.ClientRequest): Promise<void> {
  return new Promise<void>((resolve) => {
    const go = () => {
      req.off("drain", go);
      req.off("close", go);
      req.off("response", go);
      resolve();
    };
    req.on("drain", go);
    req.on("close", go);
    req.on("response", go);
  });
}

/** Two turns of the event loop, with a poll phase between: what came on a connection is read before the caller goes on. */
const polled = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

/** A large body that is one string, as its first bytes and then slices (writeBody). */
function* slices(text: string): Generator<Buffer> {
  const whole = Buffer.from(text);
  yield whole.subarray(0, FIRST);
  for (let i = FIRST; i < whole.length; i += SLICE) yield whole.subarray(i, i + SLICE);
}

/**
 * Writes a body chunk by chunk with backpressure, and ends the request; false when it stopped
 * because `stop()` said so (the request failed, or was answered before its body was all sent).
 * A large body waits a moment after its first bytes, then lets the event loop read from the
 * connection before each further write: a service that refuses from the headers (413 for the
 * Content-Length) and closes has its answer read, where a write that ran into the closed
 * connection first would report only a broken pipe, after the message might have gone.
 */
async function writeBody(req: http.ClientRequest, plan: BodyPlan, stop: () => boolean): Promise<boolean> {
  const large = plan.length > LARGE_BODY;
  const chunks = plan.text !== undefined ? slices(plan.text) : plan.chunks();
  let n = 0;
  for await (const chunk of chunks) {
    if (large && n > 0)
      await (n === 1 ? process.getBuiltinModule("node:timers/promises").setTimeout(HEARING_MS) : polled());
    if (stop()) return false;
    if (!req.write(chunk)) await writable(req);
    n++;
  }
  if (stop() || req.destroyed) return false;
  req.end();
  return true;
}

/**
 * One request's course in RestTransport.#postHttp: how far it got (what a failure means), the start
 * of its answer's body, and its one outcome, an answer or a failure (or a repeat on another
 * connection, which #postHttp makes).
 */
class Exchange {
  /** The request may have reached the service only once the connection is up and the whole body has been written to it. */
  readonly progress: Progress = { connected: false, sent: false, answered: false };
  settled = false;
  /** failureOf is judging an error of the request: later errors of it add nothing. */
  classifying = false;
  res: http.IncomingMessage | undefined;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #unlisten: () => void = () => {};

  constructor(
    readonly req: http.ClientRequest,
    readonly ctx: PostContext,
    readonly afterReset: boolean,
    readonly resolve: (a: HttpAnswer) => void,
    readonly reject: (e: unknown) => void,
  ) {}

  /**
   * Follows the caller's signal, the connection's coming up and the timeout. The signal aborts the
   * request as node:http's own `signal` option would (an AbortError, judged by failureOf by how far
   * the request got), watched until the request ends: the option's stream plumbing costs a batch
   * more per request, and so would a listener each on the signal that a batch's requests share
   * (core/abort.ts).
   */
  watch(tls: boolean, ready: Prepared | undefined): void {
    const { req, progress, ctx } = this;
    const onAbort = () =>
      req.destroy(Object.assign(new Error("the request was aborted"), { name: "AbortError", code: "ABORT_ERR" }));
    this.#unlisten = whenAborted(ctx.signal, onAbort);
    if (!ready) whenConnected(req, tls, () => (progress.connected = true));
    else if (ready.connected) progress.connected = true;
    else ready.onConnected = () => (progress.connected = true);
    req.setTimeout(ctx.timeoutMs, () => this.fail(timeoutFailure(progress, ctx)));
  }

  /** Marks the outcome decided and stops following the signal; false when it was decided already. */
  settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.#unlisten();
    return true;
  }

  fail(e: MailsendError): void {
    if (!this.settle()) return;
    this.req.destroy();
    this.reject(this.afterReset ? afterResetFailure(e, this.ctx.url, this.ctx.headers["Idempotency-Key"]) : e);
  }

  /** The answer has come whole (or a refusal as far as it came). */
  answered(): void {
    if (!this.settle()) return;
    // Answered before its body was all written (a refusal from the headers): the connection
    // still owes the service the rest, so it is not kept for another request.
    if (!this.req.writableEnded) this.req.destroy();
    const chunks = this.#chunks;
    const answer = new HttpAnswer(
      this.res!,
      chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8"),
    );
    if (this.afterReset) answer.afterReset = true;
    this.resolve(answer);
  }

  /** Reads the answer as it comes. */
  read(r: http.IncomingMessage): void {
    this.res = r;
    this.progress.answered = true;
    this.ctx.answered?.();
    r.on("data", (c: Buffer) => {
      // Keep only the start of a huge error page: enough for an excerpt.
      if (this.#size < 64 * 1024) this.#chunks.push(c);
      this.#size += c.length;
    });
    r.on("error", (e) => this.req.emit("error", e));
    r.on("end", () => this.answered());
  }

  /** Writes the body: a small one in one go, a large one or one with attachments in steps (writeBody). */
  sendBody(plan: BodyPlan): void {
    const { req, progress } = this;
    if (plan.text !== undefined && plan.length <= LARGE_BODY) {
      progress.sent = true;
      req.end(plan.text);
      return;
    }
    writeBody(req, plan, () => this.settled || progress.answered).then(
      (whole) => (progress.sent ||= whole),
      (e) =>
        this.fail(
          e instanceof MailsendError
            ? e
            : new MailsendError("file_unreadable", `cannot read an attachment: ${(e as Error).message}`, { cause: e }),
        ),
    );
  }
}

export class RestTransport implements Transport {
  readonly name = "rest" as const;
  readonly #config: RestConfig;
  readonly #url: URL;
  /** #url as request options, converted once rather than on every request of a batch. */
  #target: http.RequestOptions;
  /** https:// (read once: a URL's getters are not free, and a batch would read them per request). */
  readonly #tls: boolean;
  /** The Host header: the URL's host, read once too. */
  readonly #host: string;
  /**
   * The options of every request but its headers, made once: http.request copies them as it
   * starts, so each request sets `headers` on this object and passes it (no copy per request).
   */
  #options: http.RequestOptions | undefined;
  #client: Pick<typeof http, "request"> | undefined;
  /** Made on the first request: a dry run never loads node:http. */
  #agentMade: http.Agent | undefined;
  readonly #makeAgent: () => http.Agent;
  /** Proxy-Authorization for an http:// service through a proxy (a tunnel carries it in its CONNECT). */
  #proxyHeaders: Record<string, string> = NO_HEADERS;
  readonly #redact: (s: string) => string;
  readonly #connections: number;
  #prepared: Prepared | undefined;

  constructor(config: RestConfig, opts: TransportOptions = {}) {
    this.#config = config;
    try {
      this.#url = sendUrl(config.baseUrl);
    } catch {
      throw new MailsendError("config_invalid", `base URL is not a valid URL: ${config.baseUrl}`, {
        hint: (s) => `Set ${s.either("baseUrl", " or ")} to e.g. https://api.example.com`,
      });
    }
    if (this.#url.protocol !== "http:" && this.#url.protocol !== "https:") {
      throw new MailsendError(
        "config_invalid",
        `base URL must start with http:// or https://, not ${this.#url.protocol}`,
      );
    }
    // Only what node:http reads of it (the URL's hash, search, pathname and href it ignores, and a
    // user:password in the URL too, as mailsend sends its own Authorization): ClientRequest copies
    // its options on every request of a batch.
    const { protocol, hostname, port, path } = urlToHttpOptions(this.#url);
    this.#target = { protocol, hostname, path, ...(port === undefined ? {} : { port }) };
    this.#host = this.#url.host;
    this.#redact = makeRedactor(config.apiKey);
    const tls = this.#url.protocol === "https:";
    this.#tls = tls;
    const agentOptions: AgentOptions = { keepAlive: true, maxSockets: opts.pool ?? 1 };
    if (tls) {
      if (config.caFile) agentOptions.ca = trustedCas(config.caFile);
      if (config.insecure) agentOptions.rejectUnauthorized = false;
    }
    const proxy = config.proxy;
    if (proxy) {
      // https://: a CONNECT tunnel per connection; http://: the absolute form to the proxy.
      const agent = proxyAgent(proxy, this.#url, agentOptions, {
        timeoutMs: config.timeoutMs,
        ...(config.caFile ? { caFile: config.caFile } : {}),
      });
      this.#makeAgent = () => agent;
      if (!tls) {
        const form = absoluteForm(proxy, this.#url);
        this.#target = { ...this.#target, path: form.path };
        this.#proxyHeaders = form.headers;
      }
    } else {
      // node:https (and node:tls) only for an https:// service: an http:// send never needs them.
      this.#makeAgent = () =>
        tls
          ? new (process.getBuiltinModule("node:https").Agent)(agentOptions)
          : new (process.getBuiltinModule("node:http").Agent)(agentOptions);
    }
    this.#connections = opts.pool ?? 1;
  }

  get #agent(): http.Agent {
    return (this.#agentMade ??= this.#makeAgent());
  }

  #headers(m: Message, length: number): Record<string, string> {
    return {
      Authorization: `Bearer ${this.#config.apiKey}`,
      "Content-Type": "application/json",
      "Content-Length": String(length),
      "User-Agent": this.#config.userAgent,
      "Idempotency-Key": m.idempotencyKey,
      Accept: "application/json",
    };
  }

  async preview(m: Message, sink: PreviewSink, opts: { json: boolean }): Promise<void> {
    const plan = planBody(m, true);
    const real = planBody(m);
    const headers = { ...this.#headers(m, real.length), Authorization: `Bearer ${REDACTED}` };
    let body = "";
    for await (const c of plan.chunks()) body += c.toString("utf8");
    if (opts.json) {
      sink.write(
        `${JSON.stringify({ dry_run: true, transport: "rest", method: "POST", url: this.#url.href, headers, body: JSON.parse(body) })}\n`,
      );
      return;
    }
    sink.write(`POST ${this.#url.href}\n`);
    for (const [k, v] of Object.entries(headers)) sink.write(`${k}: ${v}\n`);
    sink.write(`\n${body}\n`);
  }

  /**
   * One message's request, connected ahead of its rate-limit slot: node:http writes a request's
   * headers only with its body, so until send() ends it nothing is on the wire (an Expect header,
   * or flushHeaders(), would send them at once: #headers must never have either). A pooled batch
   * keeps its connections open already: it is not prepared.
   */
  prepare(m: Message): void {
    if (this.#connections > 1) return;
    const kept = this.#prepared;
    if (kept && kept.message === m && !kept.failed && !kept.req.destroyed) {
      // Another wait for the same message (the slot went to another process): kept as long again.
      kept.timer.refresh();
      return;
    }
    this.#drop();
    try {
      const plan = planBody(m);
      const headers = this.#headers(m, plan.length);
      const req = this.#httpClient().request(this.#requestOptions(headers));
      const ready: Prepared = {
        message: m,
        plan,
        headers,
        req,
        connected: false,
        failed: false,
        timer: setTimeout(() => this.#prepared === ready && this.#drop(), PREPARED_TTL_MS),
      };
      ready.timer.unref();
      req.on("error", () => (ready.failed = true));
      whenConnected(req, this.#tls, () => {
        ready.connected = true;
        ready.onConnected?.();
      });
      this.#prepared = ready;
    } catch {
      // Best effort: the send makes its request as it always does.
    }
  }

  /** The prepared request, when it is this message's and still usable; anything else is dropped. */
  #takePrepared(m: Message): Prepared | undefined {
    const p = this.#prepared;
    if (!p) return undefined;
    if (p.message !== m || p.failed || p.req.destroyed) {
      this.#drop();
      return undefined;
    }
    this.#prepared = undefined;
    clearTimeout(p.timer);
    return p;
  }

  #drop(): void {
    const p = this.#prepared;
    if (!p) return;
    this.#prepared = undefined;
    clearTimeout(p.timer);
    p.req.destroy();
  }

  async send(m: Message, ctx: SendContext = {}): Promise<SendResult> {
    const ready = this.#takePrepared(m);
    const plan = ready?.plan ?? planBody(m);
    const trace = ctx.trace ? (line: string) => ctx.trace!(this.#redact(line)) : undefined;
    const answer = await this.#post(plan, ready?.headers ?? this.#headers(m, plan.length), trace, ctx, ready);
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.body);
    } catch {
      parsed = undefined;
    }
    if (answer.status < 200 || answer.status > 299) {
      // Through a proxy in the absolute form, the proxy's own refusals come back as answers.
      const byProxy =
        this.#config.proxy && this.#url.protocol === "http:"
          ? proxyAnswerError(answer.status, answer.body, this.#config.proxy, this.#url)
          : undefined;
      if (byProxy) throw byProxy;
      const refused = statusError(answer.status, answer.body, answer.headers, this.#url, this.#redact);
      // A repeat after a broken kept-alive connection that is answered with an error does not say
      // the first was not taken (deliver() judges which answers do: a refusal of the message).
      // It keeps its own code (a 429 its Retry-After, for the budget's wait); the doubt is its cause.
      if (answer.afterReset && !refused.mayHaveBeenSent) refused.cause = brokenAfterSent(this.#url, m.idempotencyKey);
      throw refused;
    }
    const res = parsed as { success?: unknown; message_id?: unknown } | undefined;
    if (res?.success === true && typeof res.message_id === "string" && res.message_id) {
      return {
        transport: "rest",
        // Printed and journaled: a service that echoes the key must not make us print it.
        messageId: this.#redact(res.message_id),
        recipients: allRecipients(m).map((r) => r.address),
        idempotencyKey: m.idempotencyKey,
        status: answer.status,
        attempts: 1,
      };
    }
    if (res?.success === false) {
      throw new MailsendError(
        "service_error",
        `the service answered success: false (HTTP ${answer.status}): ${excerpt(answer.body, this.#redact)}`,
        {
          status: answer.status,
        },
      );
    }
    throw new MailsendError(
      "protocol_error",
      `the service answered HTTP ${answer.status} without success and message_id: ${excerpt(answer.body, this.#redact)}`,
      {
        status: answer.status,
        mayHaveBeenSent: true,
        hint: "The message may have been sent. Check before sending again.",
      },
    );
  }

  async #post(
    plan: BodyPlan,
    headers: Record<string, string>,
    trace: ((l: string) => void) | undefined,
    send: SendContext,
    ready?: Prepared,
  ): Promise<HttpAnswer> {
    if (trace) {
      const url = this.#url;
      trace(`> POST ${url.pathname}${url.search} HTTP/1.1`);
      trace(`> Host: ${url.host}`);
      for (const [k, v] of Object.entries(headers))
        trace(`> ${k}: ${k === "Authorization" ? `Bearer ${REDACTED}` : v}`);
      trace(`> (body: ${plan.length} bytes of JSON)`);
      const { proxy, proxyBypass } = this.#config;
      if (proxy)
        trace(
          `* through the proxy ${proxy.label} (from ${proxy.source}${proxy.user ? `, as ${proxy.user}` : ""}): ${url.protocol === "https:" ? "CONNECT tunnel" : "absolute-form request"}`,
        );
      else if (proxyBypass) trace(`* direct, not through the proxy: ${proxyBypass}`);
    }
    const ctx: PostContext = { url: this.#url, headers, timeoutMs: this.#config.timeoutMs };
    if (send.signal) ctx.signal = send.signal;
    if (send.answered) ctx.answered = send.answered;
    const answer = await this.#postHttp(plan, ctx, STALE_RETRIES, false, ready);
    if (trace) {
      trace(`< HTTP/${answer.httpVersion} ${answer.status} ${answer.statusText}`.trimEnd());
      for (const [k, v] of answer.rawHeaders) trace(`< ${k}: ${v}`);
      trace(`< ${excerpt(answer.body, (s) => s)}`);
    }
    return answer;
  }

  /**
   * One request over node:http(s) and the keep-alive agent. A request that a kept-alive connection
   * fails with a reset before any answer is made again on another connection, up to `retries`
   * times: the service closes a connection that was idle for its keep-alive timeout, and a request
   * written as it does so never reaches it (the race node:http's docs describe for
   * `req.reusedSocket`). A new connection is never reused, so this ends. The Idempotency-Key is the
   * same, so in the rare case where the service did get it, it answers the repeat as the first;
   * but should the repeat fail, the first may still have been taken (`afterReset`): the failure
   * then says the outcome is unknown, never that nothing was sent.
   */
  #postHttp(
    plan: BodyPlan,
    ctx: PostContext,
    retries = STALE_RETRIES,
    afterReset = false,
    ready?: Prepared,
  ): Promise<HttpAnswer> {
    return new Promise<HttpAnswer>((resolve, reject) => {
      const req = ready?.req ?? this.#httpClient().request(this.#requestOptions(ctx.headers));
      const x = new Exchange(req, ctx, afterReset, resolve, reject);
      x.watch(this.#tls, ready);
      req.on("error", (e) => {
        if (x.settled || x.classifying) return;
        if (e instanceof MailsendError) return x.fail(e);
        // A refusal heard before the connection broke stands (a service that answers 413 to the
        // headers and closes while the body is still going): the excerpt is what came of its body.
        if (x.res && (x.res.statusCode ?? 0) >= 300) return x.answered();
        // A prepared connection waited idle as a kept-alive one does: the service may close it just as the request goes.
        if ((req.reusedSocket || ready) && retries > 0 && !x.progress.answered && !ctx.signal?.aborted && isReset(e)) {
          x.settle();
          req.destroy();
          this.#postHttp(plan, ctx, retries - 1, afterReset || (x.progress.connected && x.progress.sent)).then(
            resolve,
            reject,
          );
          return;
        }
        x.classifying = true;
        void failureOf(e, x.progress, ctx).then((f) => x.fail(f));
      });
      req.on("response", (r) => x.read(r));
      // Stopped before it began (the caller's signal, already aborted): nothing is written.
      if (req.destroyed) return;
      x.sendBody(plan);
    });
  }

  /** The module, looked up on first use: a dry run or a usage error never loads node:http or node:https. */
  #httpClient(): Pick<typeof http, "request"> {
    return (this.#client ??= this.#tls
      ? process.getBuiltinModule("node:https")
      : process.getBuiltinModule("node:http"));
  }

  /**
   * The request options for these headers (the object is reused: http.request copies it as it
   * starts). The headers go as node:http's raw name/value list, Host first as node:http would make
   * it (the URL's host: its port only when not the scheme's; the service's host through a proxy
   * too): node:http then checks each one as it writes the head, but makes no setHeader() call and
   * header map per header; #target is cut to what node:http reads, for the same reason. node:http
   * also stores the head at once; it still goes only with the body (RestTransport.prepare relies on
   * that).
   */
  #requestOptions(headers: Record<string, string>): http.RequestOptions {
    const options = (this.#options ??= { ...this.#target, method: "POST", agent: this.#agent });
    const raw = ["Host", this.#host];
    for (const name in headers) raw.push(name, headers[name]!);
    for (const name in this.#proxyHeaders) raw.push(name, this.#proxyHeaders[name]!);
    options.headers = raw;
    return options;
  }

  async close(): Promise<void> {
    this.#drop();
    this.#agentMade?.destroy();
  }
}

export function create(config: RestConfig, opts: TransportOptions = {}): Transport {
  return new RestTransport(config, opts);
}
