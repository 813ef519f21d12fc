/**
 * What each outcome of a REST request means, with real servers on 127.0.0.1:
 * the result or the error code, above all the answer to "may this message
 * have been sent?". Every case runs as `mailsend send` makes its request (one
 * connection) and as a batch does (a keep-alive Agent of --concurrency sockets).
 */
import { randomBytes } from "node:crypto";
import { getEventListeners } from "node:events";
import { rmSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RestConfig } from "../../src/core/config.js";
import { MailsendError } from "../../src/core/errors.js";
import type { Message } from "../../src/core/message.js";
import type { TlsMaterial } from "../../src/sandbox/tls.js";
import { create } from "../../src/transports/rest.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";
import { failure } from "../helpers/failure.js";
import { until } from "../helpers/until.js";

const KEY = "msk_rest_failures_7c1d";

const message = (over: Partial<Message> = {}): Message => ({
  from: { name: "Sender", address: "a@example.com" },
  to: [{ address: "b@example.com" }],
  cc: [],
  bcc: [],
  subject: "failures",
  html: "<p>x</p>",
  attachments: [],
  headers: [],
  idempotencyKey: "failure-key-1",
  ...over,
});

const tmp = scratch("mailsend-rest-failures-");
let tls: TlsMaterial;
let plain: RestRecorder;
let secure: RestRecorder;
/** Accepts connections and never says a word: a TLS port seen by a plain client stalls like this too. */
let silent: TcpServer;
/** Greets like an SMTP server: what --base-url pointed at the SMTP port meets. */
let greeter: TcpServer;
/** Refuses every request from its headers alone (413) and closes, without reading the body. */
let refuser: HttpServer;
/** The same, and cuts the connection once the answer is written. */
let cutter: HttpServer;
const silentSockets = new Set<Socket>();

beforeAll(async () => {
  tls = await tmp.tls();
  plain = await startRestRecorder();
  secure = await startRestRecorder({ tls });
  silent = createTcpServer((s) => {
    silentSockets.add(s);
    s.on("close", () => silentSockets.delete(s));
    s.resume();
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  greeter = createTcpServer((s) => {
    silentSockets.add(s);
    s.on("close", () => silentSockets.delete(s));
    s.on("error", () => {});
    s.resume();
    s.write("220 mx.example ESMTP ready\r\n");
  });
  await new Promise<void>((r) => greeter.listen(0, "127.0.0.1", r));
  refuser = createHttpServer((_req, res) => {
    res.writeHead(413, { "Content-Type": "application/json", Connection: "close" });
    res.end(JSON.stringify({ success: false, error: { code: "payload_too_large", message: "too large" } }));
  });
  await new Promise<void>((r) => refuser.listen(0, "127.0.0.1", r));
  cutter = createHttpServer((req, res) => {
    res.writeHead(413, { "Content-Type": "application/json", Connection: "close" });
    res.end(JSON.stringify({ success: false, error: { code: "payload_too_large", message: "too large" } }), () =>
      req.socket.destroy(),
    );
  });
  await new Promise<void>((r) => cutter.listen(0, "127.0.0.1", r));
});
afterAll(async () => {
  await plain?.close();
  await secure?.close();
  for (const s of silentSockets) s.destroy();
  await new Promise((r) => silent?.close(r));
  await new Promise((r) => greeter?.close(r));
  refuser?.closeAllConnections();
  await new Promise((r) => refuser?.close(r));
  cutter?.closeAllConnections();
  await new Promise((r) => cutter?.close(r));
  tmp.remove();
});
beforeEach(() => {
  plain.reset();
  secure.reset();
});

describe.each([
  ["one connection (send)", 1],
  ["a keep-alive agent (batch)", 4],
] as const)("%s", (_name, pool) => {
  const transport = (over: Partial<RestConfig> = {}) =>
    create(
      { baseUrl: plain.url, apiKey: KEY, timeoutMs: 5000, userAgent: "mailsend/test", insecure: false, ...over },
      { pool },
    );

  it("streams attachments with a matching Content-Length, the spec's headers, and returns the message id", async () => {
    const data = randomBytes(3 * 64 * 1024 + 2);
    const path = tmp.file(`a-${pool}.bin`, data);
    const t = transport();
    const lines: string[] = [];
    const r = await t.send(
      message({
        attachments: [
          { filename: "a.bin", source: { kind: "file", path, size: data.length } },
          { filename: "b.txt", source: { kind: "bytes", data: Buffer.from("hi") } },
        ],
      }),
      { trace: (l) => lines.push(l) },
    );
    await t.close();
    expect(r).toMatchObject({ transport: "rest", status: 200, idempotencyKey: "failure-key-1" });
    expect(r.messageId).toMatch(/^msg_/);
    const req = plain.requests[0]!;
    expect(Number(req.headers["content-length"])).toBe(req.body.length);
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers["idempotency-key"]).toBe("failure-key-1");
    expect(req.json.attachments[0].content).toBe(data.toString("base64"));
    expect(req.json.attachments[1]).toEqual({ content: Buffer.from("hi").toString("base64"), filename: "b.txt" });
    // --verbose: both directions, the key never.
    expect(lines.some((l) => /^< HTTP\/1\.1 200/.test(l))).toBe(true);
    expect(lines.join("\n")).not.toContain(KEY);
  });

  it("sends many at once over one pool, each once", async () => {
    const t = transport();
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => t.send(message({ subject: `m${i}`, idempotencyKey: `k${i}` }))),
    );
    await t.close();
    expect(new Set(results.map((r) => r.messageId)).size).toBe(12);
    expect(plain.requests.map((r) => r.json.subject).sort()).toEqual(
      Array.from({ length: 12 }, (_, i) => `m${i}`).sort(),
    );
    expect(plain.connections).toBeLessThanOrEqual(Math.max(pool, 1));
  });

  it("429 -> rate_limited with the server's Retry-After", async () => {
    plain.script({
      status: 429,
      headers: { "Retry-After": "7" },
      body: { success: false, error: { code: "rate_limited" } },
    });
    const t = transport();
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "rate_limited", retryAfter: 7, status: 429, exitCode: 75 });
  });

  it("a body that is not a success -> protocol_error that may have sent", async () => {
    plain.script({ status: 200, body: "<html>proxy</html>" });
    const t = transport();
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "protocol_error", mayHaveBeenSent: true });
  });

  it("connection refused -> connection_failed (nothing sent)", async () => {
    const closed = createTcpServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const t = transport({ baseUrl: `http://127.0.0.1:${port}` });
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "connection_failed", exitCode: 69 });
    expect(e.mayHaveBeenSent).toBeFalsy();
  });

  it("the connection breaks after the whole request was read -> outcome_unknown (may have been sent)", async () => {
    plain.script({ destroy: "after-body" });
    const t = transport();
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "outcome_unknown", mayHaveBeenSent: true, exitCode: 76 });
    expect(e.hint).toContain("--idempotency-key failure-key-1");
  });

  it("no answer within the timeout after the request was sent -> outcome_unknown", async () => {
    plain.script({ delayMs: 5_000 });
    const t = transport({ timeoutMs: 400 });
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "outcome_unknown", mayHaveBeenSent: true });
    expect(e.message).toMatch(/within 0\.4 s/);
  });

  it("an abort after the request was sent -> outcome_unknown; an abort before -> temporary_failure", async () => {
    plain.script({ delayMs: 5_000 });
    const t = transport();
    const late = new AbortController();
    const p = t.send(message(), { signal: late.signal });
    // Abort once the server holds the whole request.
    await until(() => plain.requests.length > 0, {
      what: "the server to hold the request",
      timeoutMs: 10_000,
      everyMs: 10,
    });
    expect(plain.requests).toHaveLength(1);
    late.abort(new MailsendError("temporary_failure", "interrupted twice"));
    expect(await failure(p)).toMatchObject({ code: "outcome_unknown", mayHaveBeenSent: true });

    const early = new AbortController();
    early.abort(new MailsendError("temporary_failure", "interrupted twice"));
    const e = await failure(t.send(message(), { signal: early.signal }));
    expect(e.code).toBe("temporary_failure");
    expect(e.mayHaveBeenSent).toBeFalsy();
    await t.close();
  });

  it("requests in flight that share one signal are all ended by its abort, and leave no listener on it", async () => {
    plain.script({ delayMs: 5_000 });
    const t = transport();
    const shared = new AbortController();
    // As many as the engine has connections: each request is on the wire when the signal aborts.
    const sends = Array.from({ length: pool }, (_, i) =>
      failure(t.send(message({ idempotencyKey: `shared-${i}` }), { signal: shared.signal })),
    );
    await until(() => plain.requests.length >= pool, {
      what: `the server to hold ${pool} requests`,
      timeoutMs: 10_000,
      everyMs: 10,
    });
    expect(plain.requests).toHaveLength(pool);
    shared.abort(new MailsendError("temporary_failure", "interrupted twice"));
    for (const e of await Promise.all(sends))
      expect(e).toMatchObject({ code: "outcome_unknown", mayHaveBeenSent: true });
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(0);

    // Answered requests take their watch off the signal as they end.
    plain.script({});
    const kept = new AbortController();
    await Promise.all([1, 2, 3].map((i) => t.send(message({ idempotencyKey: `kept-${i}` }), { signal: kept.signal })));
    expect(getEventListeners(kept.signal, "abort")).toHaveLength(0);
    await t.close();
  });

  it("https: an untrusted certificate -> tls_untrusted; with --ca-file it is sent", async () => {
    const bad = transport({ baseUrl: secure.url });
    expect(await failure(bad.send(message()))).toMatchObject({ code: "tls_untrusted", exitCode: 78 });
    await bad.close();
    const good = transport({ baseUrl: secure.url, caFile: tls.caPath });
    expect((await good.send(message())).status).toBe(200);
    await good.close();
    const insecure = transport({ baseUrl: secure.url, insecure: true });
    expect((await insecure.send(message())).status).toBe(200);
    await insecure.close();
    expect(secure.requests).toHaveLength(2);
  });

  it("http:// to a TLS port -> tls_mismatch (nothing sent), not 'may have been sent'", async () => {
    const t = transport({ baseUrl: secure.url.replace("https:", "http:") });
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "tls_mismatch", exitCode: 78 });
    expect(secure.requests).toHaveLength(0);
  });

  it("an attachment that changed size fails before anything is accepted", async () => {
    const path = tmp.file(`shrinks-${pool}.bin`, randomBytes(10));
    const t = transport();
    const e = await failure(
      t.send(message({ attachments: [{ filename: "s.bin", source: { kind: "file", path, size: 50 } }] })),
    );
    await t.close();
    expect(e.code).toBe("file_unreadable");
    expect(plain.requests).toHaveLength(0);
  });

  it("an attachment that grew, or was deleted, after it was checked -> file_unreadable (66, not retried), nothing accepted", async () => {
    const grown = tmp.file(`grows-${pool}.bin`, randomBytes(4000));
    const gone = tmp.file(`gone-${pool}.bin`, randomBytes(10));
    rmSync(gone);
    for (const [path, size] of [
      [grown, 1000],
      [gone, 10],
    ] as const) {
      const t = transport();
      const e = await failure(
        t.send(message({ attachments: [{ filename: "a.bin", source: { kind: "file", path, size } }] })),
      );
      await t.close();
      expect(e, path).toMatchObject({ code: "file_unreadable", exitCode: 66 });
    }
    expect(plain.requests).toHaveLength(0);
  });

  it("a large body the server refuses at once (413 from Content-Length, then close) -> too_large, not a broken pipe", async () => {
    const path = tmp.file(`large-${pool}.bin`, randomBytes(3 * 1024 * 1024));
    for (let i = 0; i < 3; i++) {
      const t = transport({ baseUrl: `http://127.0.0.1:${(refuser.address() as { port: number }).port}` });
      const e = await failure(
        t.send(
          message({ attachments: [{ filename: "big.bin", source: { kind: "file", path, size: 3 * 1024 * 1024 } }] }),
        ),
      );
      await t.close();
      expect(e).toMatchObject({ code: "too_large", status: 413, exitCode: 65 });
    }
    // The same for a large body without attachments (one JSON buffer: an 11 MB HTML report), to a
    // service that cuts the connection as soon as its answer is out (a write after it meets a
    // closed socket: the answer must have been read first).
    for (let i = 0; i < 3; i++) {
      const t = transport({ baseUrl: `http://127.0.0.1:${(cutter.address() as { port: number }).port}` });
      const e = await failure(t.send(message({ html: `<p>${"a".repeat(11 * 1024 * 1024)}</p>` })));
      await t.close();
      expect(e).toMatchObject({ code: "too_large", status: 413, exitCode: 65 });
    }
  });

  it("a server that does not speak HTTP (an SMTP port) -> config_invalid naming what it said (never retried: a configuration error)", async () => {
    const t = transport({ baseUrl: `http://127.0.0.1:${(greeter.address() as { port: number }).port}` });
    const e = await failure(t.send(message()));
    await t.close();
    expect(e).toMatchObject({ code: "config_invalid", exitCode: 78 });
    expect(e.message).toContain('"220 mx.example ESMTP ready"');
    expect(e.hint).toMatch(/SMTP server's greeting.*--transport smtp/);
  });

  it("a server that accepts and never answers -> timeout or outcome_unknown, never a hang", async () => {
    const t = transport({ baseUrl: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, timeoutMs: 400 });
    const e = await failure(t.send(message()));
    await t.close();
    expect(["timeout", "outcome_unknown"]).toContain(e.code);
  });
});
