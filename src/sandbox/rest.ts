/**
 * POST /send as the service answers it, with the service's error answers:
 * {"success":false,"error":{"code","message"}} and 400 (naming
 * the field), 401, 403, 413, 415, 429 (+ Retry-After, RateLimit-*).
 *
 * Order of checks: method, key, content type, declared size, idempotent
 * replay, rate limit, then the body (read with a hard cap), its encoding,
 * JSON, and the shared zod schema. Nothing is stored unless all pass, and the
 * answer is sent only once the message is durable.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { describeIssues, sendRequestSchema, type SendRequest } from "../core/schema.js";
import { prepareRest } from "./compose.js";
import { IDEMPOTENCY_KEY, type SandboxCore } from "./core.js";
import { IdempotencyCache } from "./idempotency.js";
import type { RateDecision } from "./ratelimit.js";
import { newMessageId } from "./store.js";

type Headers = Record<string, string>;

/** After a refusal, how much of an unread body we swallow so the client can read the answer. */
const DRAIN_BYTES = 256 * 1024 * 1024;
const DRAIN_MS = 10_000;

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Headers = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(text)),
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(text);
}

function errorBody(code: string, message: string) {
  return { success: false, error: { code, message } };
}

function rateHeaders(d: RateDecision): Headers {
  return {
    "RateLimit-Limit": String(d.limit),
    "RateLimit-Remaining": String(d.remaining),
    "RateLimit-Reset": String(d.reset),
  };
}

/**
 * The body was not read: close after answering, and swallow (without
 * keeping) what the client is still sending, up to a cap, so that it sees
 * our answer instead of a reset connection.
 */
function closeAfter(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("Connection", "close");
  if (req.complete) return;
  let seen = 0;
  const timer = setTimeout(() => req.socket.destroy(), DRAIN_MS);
  timer.unref();
  req.on("data", (c: Buffer) => {
    seen += c.length;
    if (seen > DRAIN_BYTES) req.socket.destroy();
  });
  req.on("end", () => clearTimeout(timer));
  req.on("close", () => clearTimeout(timer));
  req.resume();
}

type BodyResult = { kind: "ok"; body: Buffer } | { kind: "too_large" } | { kind: "aborted" };

function readBody(req: IncomingMessage, limit: number): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (r: BodyResult) => {
      if (done) return;
      done = true;
      req.off("data", onData);
      resolve(r);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        chunks.length = 0;
        req.pause();
        finish({ kind: "too_large" });
        return;
      }
      chunks.push(c);
    };
    req.on("data", onData);
    req.on("end", () => finish({ kind: "ok", body: Buffer.concat(chunks, size) }));
    req.on("aborted", () => finish({ kind: "aborted" }));
    req.on("error", () => finish({ kind: "aborted" }));
    req.on("close", () => {
      if (!req.complete) finish({ kind: "aborted" });
    });
  });
}

function bearer(req: IncomingMessage): { key?: string; malformed: boolean } {
  const h = req.headers.authorization;
  if (h === undefined || h === "") return { malformed: false };
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(h);
  return m ? { key: m[1]!, malformed: false } : { malformed: true };
}

/** application/json, optionally with charset=utf-8; anything else is 415. */
function jsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const [type, ...params] = value.split(";").map((s) => s.trim().toLowerCase());
  if (type !== "application/json") return false;
  for (const p of params) {
    const [k, v] = p.split("=").map((s) => s.trim());
    if (k === "charset" && v?.replace(/"/g, "") !== "utf-8") return false;
  }
  return true;
}

function issuesMessage(error: Parameters<typeof describeIssues>[0]): string {
  return describeIssues(error)
    .map(({ path, message }) => {
      if (/received undefined/.test(message)) return `${path} is required`;
      return message.startsWith(`${path}:`) || message.startsWith(`${path} `) ? message : `${path}: ${message}`;
    })
    .join("; ");
}

/** A refusal to answer: status, code, message, extra headers, and whether the faults' latency applies. */
type Refusal = [status: number, code: string, message: string, headers?: Headers, afterAuth?: boolean];

/** The API key of the request, or why it is refused (401, 403): these answers are never delayed. */
function authenticate(req: IncomingMessage, keys: SandboxCore["keys"]): { keyId: string } | { refusal: Refusal } {
  const auth = bearer(req);
  const challenge = { "WWW-Authenticate": 'Bearer realm="mailsend sandbox"' };
  if (auth.malformed) {
    return {
      refusal: [401, "invalid_authorization", "the Authorization header must be: Bearer <API key>", challenge, false],
    };
  }
  const check = keys.verify(auth.key);
  if (check.ok) return { keyId: check.key.id };
  switch (check.reason) {
    case "missing":
      return {
        refusal: [
          401,
          "missing_api_key",
          "no API key: send the header Authorization: Bearer <API key>",
          challenge,
          false,
        ],
      };
    case "invalid":
      return { refusal: [401, "invalid_api_key", "the API key is not valid", challenge, false] };
    case "revoked":
      return { refusal: [403, "key_revoked", `the API key ${check.key!.id} has been revoked`, {}, false] };
    case "expired":
      return {
        refusal: [403, "key_expired", `the API key ${check.key!.id} expired at ${check.key!.expires}`, {}, false],
      };
  }
}

/** What the headers alone refuse: the content type, a declared size over the limit, a bad Idempotency-Key. */
function headerRefusal(req: IncomingMessage, maxSize: number): Refusal | undefined {
  if (!jsonContentType(req.headers["content-type"])) {
    const got = req.headers["content-type"]
      ? `got ${JSON.stringify(req.headers["content-type"])}`
      : "no Content-Type was sent";
    return [415, "unsupported_media_type", `the body must be JSON with Content-Type: application/json (${got})`];
  }
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxSize) {
    return [413, "payload_too_large", `the request body is ${declared} bytes; the limit is ${maxSize} bytes`];
  }
  const idemKey = req.headers["idempotency-key"];
  if (idemKey !== undefined && (typeof idemKey !== "string" || !IDEMPOTENCY_KEY.test(idemKey))) {
    return [
      400,
      "invalid_idempotency_key",
      "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces",
    ];
  }
  return undefined;
}

/** The body as a send request: UTF-8, JSON, an object, and what the shared schema takes. */
function parseSendRequest(body: Buffer, rl: Headers): { data: SendRequest } | { refusal: Refusal } {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return { refusal: [400, "invalid_encoding", "the request body is not valid UTF-8", rl] };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { refusal: [400, "invalid_json", `the request body is not valid JSON: ${(e as Error).message}`, rl] };
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return { refusal: [400, "invalid_request", "the request body must be a JSON object (the send request)", rl] };
  }
  const parsed = sendRequestSchema.safeParse(json);
  if (!parsed.success) return { refusal: [400, "invalid_request", issuesMessage(parsed.error), rl] };
  return { data: parsed.data };
}

/** A new request takes its place in the window; a replay is not a new request, and is answered even when the window is full. */
function takeRate(limiter: SandboxCore["limiter"], keyId: string): { rl: Headers } | { refusal: Refusal } {
  const decision = limiter.take(keyId);
  if (decision.ok) return { rl: rateHeaders(decision) };
  return {
    refusal: [
      429,
      "rate_limited",
      `rate limit exceeded: at most ${decision.limit} requests per ${limiter.windowMs / 1000} s for this key; retry in ${decision.retryAfter} s`,
      { "Retry-After": String(decision.retryAfter), ...rateHeaders(decision) },
    ],
  };
}

/** Store the message, and remember it under its Idempotency-Key; resolves once it is durable. */
async function storeSend(
  core: SandboxCore,
  data: SendRequest,
  keyId: string,
  idem: { key?: string; scope?: string; requestHash?: string },
) {
  const id = newMessageId();
  const mail = prepareRest(data, id);
  const { requestHash } = idem;
  const stored = await core.store.add({
    id,
    compose: mail.options,
    channel: "rest",
    keyId,
    envelope: mail.envelope,
    from: mail.from,
    to: mail.to,
    subject: mail.subject,
    attachments: mail.attachments,
    messageId: id,
    ...(idem.key ? { idempotencyKey: idem.key, requestHash } : {}),
  });
  if (idem.scope)
    core.idempotency.set(idem.scope, {
      id,
      messageId: stored.messageId,
      ...(requestHash ? { requestHash } : {}),
      at: Date.now(),
    });
  core.stats.count("rest", "accepted");
  return stored;
}

type Refuse = (...r: Refusal) => Promise<void>;

/** A valid request through the injected faults to the store, then the answer (once it is durable). */
async function storeAndAnswer(
  core: SandboxCore,
  req: IncomingMessage,
  res: ServerResponse,
  refuse: Refuse,
  data: SendRequest,
  o: { keyId: string; rl: Headers; key?: string; scope?: string; requestHash?: string },
): Promise<void> {
  const { faults, stats } = core;
  const fault = faults.decide();
  if (fault.kind === "fail") {
    stats.count("rest", "faults");
    return refuse(
      faults.config.failStatus,
      "injected_fault",
      `injected failure (mailsend sandbox fault injection, status ${faults.config.failStatus}); nothing was stored`,
      faults.config.failStatus === 429 ? { "Retry-After": "1", ...o.rl } : o.rl,
    );
  }
  if (fault.kind === "drop" && fault.when === "before") {
    stats.count("rest", "faults");
    req.socket.destroy();
    return;
  }
  const stored = await storeSend(core, data, o.keyId, o);
  if (fault.kind === "drop") {
    stats.count("rest", "faults");
    req.socket.destroy();
    return;
  }
  await faults.delay();
  sendJson(res, 200, { success: true, message_id: stored.messageId }, o.rl);
}

/** The same request again under its Idempotency-Key: the first answer; another request under it: 422. */
async function answerReplay(
  core: SandboxCore,
  res: ServerResponse,
  refuse: Refuse,
  replay: { messageId: string; requestHash?: string },
  requestHash: string | undefined,
): Promise<void> {
  if (replay.requestHash !== undefined && replay.requestHash !== requestHash) {
    return refuse(
      422,
      "idempotency_key_reused",
      "this Idempotency-Key was already used for a different request in the last 24 hours; use a new key for a new message",
    );
  }
  core.stats.count("rest", "duplicates");
  await core.faults.delay();
  sendJson(res, 200, { success: true, message_id: replay.messageId }, { "Idempotent-Replayed": "true" });
}

/**
 * How a request is refused: counted, delayed as the faults say once past the key check, and with
 * the connection closed after the answer while its body is unread.
 */
function refuserFor(core: SandboxCore, req: IncomingMessage, res: ServerResponse, bodyRead: () => boolean): Refuse {
  return async (...[status, code, message, headers = {}, afterAuth = true]: Refusal) => {
    core.stats.count("rest", "refused");
    if (status === 429) core.stats.count("rest", "rateLimited");
    if (status === 401 || status === 403) core.stats.count("rest", "authFailed");
    if (afterAuth) await core.faults.delay();
    if (!bodyRead()) closeAfter(req, res);
    sendJson(res, status, errorBody(code, message), headers);
  };
}

/** The body within the size limit, or its refusal (413); nothing when the client went away before it ended. */
async function takeBody(
  req: IncomingMessage,
  maxSize: number,
  rl: Headers,
): Promise<{ body: Buffer } | { refusal: Refusal } | undefined> {
  const got = await readBody(req, maxSize);
  if (got.kind === "aborted") return undefined;
  if (got.kind === "too_large")
    return {
      refusal: [413, "payload_too_large", `the request body is larger than the limit of ${maxSize} bytes`, rl],
    };
  return { body: got.body };
}

export function createSendHandler(core: SandboxCore) {
  const { idempotency, stats } = core;

  return async function handleSend(req: IncomingMessage, res: ServerResponse, expectContinue = false): Promise<void> {
    let bodyRead = false;
    const refuse = refuserFor(core, req, res, () => bodyRead);

    if (req.method !== "POST") {
      return refuse(
        405,
        "method_not_allowed",
        `${req.method} is not allowed on /send; use POST`,
        { Allow: "POST" },
        false,
      );
    }
    const auth = authenticate(req, core.keys);
    if ("refusal" in auth) return refuse(...auth.refusal);
    const { keyId } = auth;
    const early = headerRefusal(req, core.maxSize);
    if (early) return refuse(...early);
    const idemKey = req.headers["idempotency-key"] as string | undefined;

    const scope = idemKey ? IdempotencyCache.scope(keyId, idemKey) : undefined;
    const release = scope ? await idempotency.lock(scope) : undefined;
    try {
      const replay = scope ? idempotency.get(scope) : undefined;
      const rate = replay ? { rl: {} } : takeRate(core.limiter, keyId);
      if ("refusal" in rate) return refuse(...rate.refusal);
      const { rl } = rate;

      if (expectContinue) res.writeContinue();
      const got = await takeBody(req, core.maxSize, rl);
      if (!got) {
        stats.count("rest", "refused");
        return;
      }
      if ("refusal" in got) return refuse(...got.refusal);
      bodyRead = true;
      const requestHash = scope ? createHash("sha256").update(got.body).digest("hex") : undefined;

      if (replay) return await answerReplay(core, res, refuse, replay, requestHash);

      const request = parseSendRequest(got.body, rl);
      if ("refusal" in request) return refuse(...request.refusal);

      await storeAndAnswer(core, req, res, refuse, request.data, {
        keyId,
        rl,
        ...(idemKey ? { key: idemKey } : {}),
        ...(scope ? { scope } : {}),
        ...(requestHash ? { requestHash } : {}),
      });
    } finally {
      release?.();
    }
  };
}
