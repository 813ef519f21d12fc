import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import type { Message } from "../../src/core/message.js";
import { makeRedactor } from "../../src/core/redact.js";
import { create, retryAfterSeconds, statusError } from "../../src/transports/rest.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_rest_unit_81b2";
const URL_ = new URL("http://127.0.0.1:9/send");
const redact = makeRedactor(KEY);

describe("retryAfterSeconds", () => {
  const now = Date.parse("2026-11-22T10:00:00Z");

  it("reads delta-seconds", () => {
    expect(retryAfterSeconds({ "retry-after": "7" }, now)).toBe(7);
    expect(retryAfterSeconds({ "retry-after": " 0 " }, now)).toBe(0);
  });

  it("reads an HTTP date, rounding up, never negative", () => {
    expect(retryAfterSeconds({ "retry-after": "Sun, 22 Nov 2026 10:00:30 GMT" }, now)).toBe(30);
    expect(retryAfterSeconds({ "retry-after": new Date(now + 1500).toUTCString() }, now)).toBe(1);
    expect(retryAfterSeconds({ "retry-after": "Sun, 22 Nov 2026 09:59:00 GMT" }, now)).toBe(0);
    expect(retryAfterSeconds({ "retry-after": "Sunday, 22-Nov-26 10:01:00 GMT" }, now)).toBe(60);
  });

  it("falls back to RateLimit-Reset", () => {
    expect(retryAfterSeconds({ "ratelimit-reset": "12" }, now)).toBe(12);
    expect(retryAfterSeconds({ "retry-after": "soon", "ratelimit-reset": "3" }, now)).toBe(3);
  });

  it("prefers Retry-After", () => {
    expect(retryAfterSeconds({ "retry-after": "5", "ratelimit-reset": "50" }, now)).toBe(5);
  });

  it("is undefined without a usable header", () => {
    expect(retryAfterSeconds({}, now)).toBeUndefined();
    expect(retryAfterSeconds({ "retry-after": "" }, now)).toBeUndefined();
    expect(retryAfterSeconds({ "retry-after": "-5" }, now)).toBeUndefined();
    expect(retryAfterSeconds({ "retry-after": "10.5" }, now)).toBeUndefined();
    expect(retryAfterSeconds({ "ratelimit-reset": "1.5" }, now)).toBeUndefined();
  });
});

describe("HTTP status -> error", () => {
  it.each([
    [400, "invalid_message", 65],
    [422, "invalid_message", 65],
    [401, "auth_failed", 77],
    [403, "key_revoked", 77],
    [404, "config_invalid", 78],
    [405, "config_invalid", 78],
    [408, "timeout", 75],
    [413, "too_large", 65],
    [429, "rate_limited", 75],
    [500, "service_error", 69],
    [502, "service_error", 69],
    [503, "service_error", 69],
    [504, "service_error", 69],
    [415, "protocol_error", 76],
    [302, "protocol_error", 76],
  ])("%i -> %s (%i)", (status, code, exit) => {
    const e = statusError(status, '{"success":false,"error":{"code":"x","message":"nope"}}', {}, URL_, redact);
    expect(e.code).toBe(code);
    expect(e.exitCode).toBe(exit);
    expect(e.status).toBe(status);
  });

  it("quotes a short, one-line excerpt of the body", () => {
    const e = statusError(
      400,
      '{\n  "success": false,\n  "error": { "message": "to is invalid" }\n}',
      {},
      URL_,
      redact,
    );
    expect(e.message).toContain('{ "success": false, "error": { "message": "to is invalid" } }');
    const long = statusError(500, "x".repeat(5000), {}, URL_, redact);
    expect(long.message.length).toBeLessThan(400);
    expect(long.message).toContain("...");
    expect(statusError(500, "", {}, URL_, redact).message).toContain("(empty body)");
  });

  it("never quotes the key, even when the service echoes it", () => {
    const e = statusError(401, `invalid key ${KEY} (${Buffer.from(KEY).toString("base64")})`, {}, URL_, redact);
    expect(e.message).not.toContain(KEY);
    expect(e.message).not.toContain(Buffer.from(KEY).toString("base64"));
    expect(e.message).toContain("[redacted]");
  });

  it("429 carries Retry-After", () => {
    const e = statusError(429, "", { "retry-after": "9" }, URL_, redact);
    expect(e.retryAfter).toBe(9);
    expect(e.message).toContain("9 s");
  });

  it("a 500 may have sent the message; 502/503/504 (from a proxy) did not", () => {
    expect(statusError(500, "", {}, URL_, redact).mayHaveBeenSent).toBe(true);
    expect(statusError(503, "", {}, URL_, redact).mayHaveBeenSent).toBe(false);
  });

  it("404 points at the base URL", () => {
    expect(statusError(404, "", {}, URL_, redact).hint).toMatch(/--base-url/);
  });
});

describe("RestTransport against a recorder (in process)", () => {
  let rec: RestRecorder;
  const tmp = scratch();
  useRestRecorder((r) => (rec = r));
  afterAll(() => tmp.remove());

  const message = (over: Partial<Message> = {}): Message => ({
    from: { name: "Ünïcode Sender", address: "a@example.com" },
    to: [{ address: "b@example.com" }],
    cc: [],
    bcc: [],
    subject: 'Grüße 📧 "quoted" \\ back',
    html: "<p>é</p>",
    attachments: [],
    headers: [],
    idempotencyKey: "idem-1",
    ...over,
  });

  const transport = (baseUrl = rec.url) =>
    create({ baseUrl, apiKey: KEY, timeoutMs: 5000, userAgent: "mailsend/test", insecure: false });

  it("streams a body whose Content-Length matches, for every attachment size mod 3", async () => {
    const files = [0, 1, 2, 3, 4, 5, 200_000, 3 * 64 * 1024 + 1].map((n, i) => {
      const data = randomBytes(n);
      return { data, path: tmp.file(`f${i}.bin`, data), name: `f${i}.bin` };
    });
    const m = message({
      attachments: [
        ...files.map((f) => ({
          filename: f.name,
          source: { kind: "file" as const, path: f.path, size: f.data.length },
        })),
        { filename: "bytes — ü.bin", source: { kind: "bytes" as const, data: Buffer.from([9, 8, 7, 6]) } },
      ],
    });
    const t = transport();
    const r = await t.send(m);
    await t.close();
    expect(r).toMatchObject({
      transport: "rest",
      status: 200,
      idempotencyKey: "idem-1",
      recipients: ["b@example.com"],
    });
    const req = rec.requests[0]!;
    expect(Number(req.headers["content-length"])).toBe(req.body.length);
    expect(req.json.attachments).toHaveLength(files.length + 1);
    files.forEach((f, i) => {
      expect(req.json.attachments[i]).toEqual({ content: f.data.toString("base64"), filename: f.name });
    });
    expect(req.json.attachments[files.length]).toEqual({
      content: Buffer.from([9, 8, 7, 6]).toString("base64"),
      filename: "bytes — ü.bin",
    });
    expect(req.json.subject).toBe('Grüße 📧 "quoted" \\ back');
  });

  it("a body without attachments (written as one string) has its Content-Length in bytes, not characters", async () => {
    const html = `<p>é 📧 日本語 ${"ü".repeat(3000)}</p>`;
    const m = message({ html });
    const t = transport();
    await t.send(m);
    await t.send({ ...m, idempotencyKey: "idem-2" });
    await t.close();
    expect(rec.requests).toHaveLength(2);
    for (const req of rec.requests) {
      expect(Number(req.headers["content-length"])).toBe(req.body.length);
      expect(req.body.length).toBeGreaterThan(req.body.toString("utf8").length);
      expect(req.json).toMatchObject({ subject: 'Grüße 📧 "quoted" \\ back', html });
    }
  });

  it("a file that changed size after it was checked fails without a half-sent body being accepted", async () => {
    const p = tmp.file("shrinks.bin", randomBytes(10));
    const m = message({ attachments: [{ filename: "s.bin", source: { kind: "file", path: p, size: 50 } }] });
    const t = transport();
    await expect(t.send(m)).rejects.toBeInstanceOf(MailsendError);
    await t.close();
  });

  it("joins the base URL and /send whatever the slashes", async () => {
    for (const base of [rec.url, `${rec.url}/`, `${rec.url}/api`, `${rec.url}/api/`]) {
      const t = transport(base);
      await t.send(message());
      await t.close();
    }
    expect(rec.requests.map((r) => r.url)).toEqual(["/send", "/send", "/api/send", "/api/send"]);
  });

  it("a kept-alive connection the service closed is not a failure: the request goes again on a new one, same key", async () => {
    // A service whose connections each carry one answer, then drop the next request unanswered,
    // as a keep-alive timeout that fires while a request is on its way does.
    const seen: { key: string | undefined; socket: number }[] = [];
    const served = new WeakMap<object, number>();
    let sockets = 0;
    const server = createServer((req, res) => {
      const n = served.get(req.socket) ?? 0;
      if (!served.has(req.socket)) sockets++;
      served.set(req.socket, n + 1);
      seen.push({ key: req.headers["idempotency-key"] as string | undefined, socket: sockets });
      req.resume();
      if (n >= 1) return req.socket.destroy();
      req.on("end", () =>
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ success: true, message_id: `m${seen.length}` })),
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    const t = transport(`http://127.0.0.1:${port}`);
    try {
      expect((await t.send(message({ idempotencyKey: "first" }))).messageId).toBe("m1");
      expect((await t.send(message({ idempotencyKey: "second" }))).messageId).toBe("m3");
      expect(seen).toEqual([
        { key: "first", socket: 1 },
        { key: "second", socket: 1 },
        { key: "second", socket: 2 },
      ]);
    } finally {
      await t.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("refuses a base URL that is not http(s)", () => {
    expect(() => transport("ftp://example.com")).toThrow(MailsendError);
    expect(() => transport("not a url")).toThrow(MailsendError);
  });
});
