/**
 * Hostile and broken input: each gets the documented answer and nothing is
 * stored. REST: oversized bodies (declared and streamed), bad JSON, wrong
 * content types, header injection, non-UTF-8, a request cut halfway. SMTP:
 * commands out of order, AUTH before STARTTLS, a client gone mid-DATA, an
 * oversized message.
 */
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inProcessSandbox, post, sendRequest, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { until } from "../helpers/until.js";

const MAX = 256 * 1024;
let t: TestSandbox;
let auth: Record<string, string>;

beforeAll(async () => {
  t = await inProcessSandbox({ maxSize: MAX, rateLimit: 10_000 });
  auth = { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" };
});

afterAll(async () => {
  await t?.stop();
  t?.scratch.remove();
});

async function expectNothingStored<T>(fn: () => Promise<T>): Promise<T> {
  const before = t.sb.store.count;
  const r = await fn();
  expect(t.sb.store.count).toBe(before);
  return r;
}

function error(r: { json: any }) {
  expect(r.json?.success).toBe(false);
  return r.json.error as { code: string; message: string };
}

describe("REST", () => {
  it("a declared body over the limit gets 413 before it is sent", async () => {
    await expectNothingStored(async () => {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = http.request(`${t.sb.urls.baseUrl}/send`, {
          method: "POST",
          headers: { ...auth, "Content-Length": String(100 * 1024 * 1024), Expect: "100-continue" },
        });
        req.on("response", resolve);
        req.on("error", reject);
        req.flushHeaders();
      });
      expect(res.statusCode).toBe(413);
      const body = JSON.parse(
        await new Promise<string>((r) => {
          let s = "";
          res.on("data", (c) => (s += c));
          res.on("end", () => r(s));
        }),
      );
      expect(body.error.code).toBe("payload_too_large");
      res.destroy();
    });
  });

  it("a streamed (chunked) body is cut off at the limit with 413, long before it ends", async () => {
    await expectNothingStored(async () => {
      const total = 64 * 1024 * 1024;
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let written = 0;
      const status = await new Promise<{ status: number; writtenAtAnswer: number }>((resolve, reject) => {
        const req = http.request(`${t.sb.urls.baseUrl}/send`, {
          method: "POST",
          headers: { ...auth, "Transfer-Encoding": "chunked" },
        });
        let answered = false;
        req.on("response", (res) => {
          answered = true;
          resolve({ status: res.statusCode!, writtenAtAnswer: written });
          res.resume();
          req.destroy();
        });
        req.on("error", (e) => (answered ? undefined : reject(e)));
        const pump = () => {
          while (!answered && written < total) {
            written += chunk.length;
            if (!req.write(chunk)) return void req.once("drain", pump);
          }
          if (!answered) req.end();
        };
        pump();
      });
      expect(status.status).toBe(413);
      expect(status.writtenAtAnswer).toBeLessThan(total / 4);
    });
  });

  it("a body of exactly the limit is read; one byte more is not", async () => {
    const base = JSON.stringify(sendRequest({ html: "x" })).length;
    const body = (extra: number) => JSON.stringify(sendRequest({ html: "x".repeat(1 + extra) }));
    const atLimit = body(MAX - base);
    expect(Buffer.byteLength(atLimit)).toBe(MAX);
    expect((await post(t.sb.urls.baseUrl, atLimit, auth)).status).toBe(200);
    await expectNothingStored(async () => {
      expect((await post(t.sb.urls.baseUrl, body(MAX - base + 1), auth)).status).toBe(413);
    });
  });

  it("invalid JSON: 400 invalid_json", async () => {
    const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, '{"from": "a@example.com", ', auth));
    expect(r.status).toBe(400);
    expect(error(r).code).toBe("invalid_json");
  });

  it("JSON that is not an object: 400", async () => {
    for (const body of ["[]", "null", '"x"', "42"]) {
      const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, body, auth));
      expect(r.status).toBe(400);
      expect(error(r).code).toBe("invalid_request");
    }
  });

  it("wrong or missing Content-Type: 415", async () => {
    const body = JSON.stringify(sendRequest());
    for (const ct of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/json; charset=latin1",
      "multipart/form-data; boundary=x",
    ]) {
      const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, body, { ...auth, "Content-Type": ct }));
      expect(r.status, ct).toBe(415);
      expect(error(r).code).toBe("unsupported_media_type");
    }
    const { "Content-Type": _ct, ...noType } = auth;
    const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, Buffer.from(body), noType));
    expect(r.status).toBe(415);
    expect(
      (await post(t.sb.urls.baseUrl, body, { ...auth, "Content-Type": "application/json; charset=UTF-8" })).status,
    ).toBe(200);
  });

  it("a body that is not UTF-8: 400 invalid_encoding", async () => {
    const latin1 = Buffer.from(JSON.stringify(sendRequest({ subject: "Gr\u00fc\u00dfe" })), "latin1");
    const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, latin1, auth));
    expect(r.status).toBe(400);
    expect(error(r).code).toBe("invalid_encoding");
  });

  it("missing required fields are named", async () => {
    const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, JSON.stringify({ to: "b@example.com" }), auth));
    expect(r.status).toBe(400);
    const { code, message } = error(r);
    expect(code).toBe("invalid_request");
    for (const f of ["from", "subject", "html"]) expect(message).toContain(`${f} is required`);
    expect(message).not.toContain("to is required");
  });

  it("unknown fields and malformed attachments are refused, naming the field", async () => {
    const a = await expectNothingStored(() =>
      post(t.sb.urls.baseUrl, JSON.stringify(sendRequest({ cc: "c@example.com" })), auth),
    );
    expect(a.status).toBe(400);
    expect(error(a).message).toContain("cc");
    const b = await expectNothingStored(() =>
      post(
        t.sb.urls.baseUrl,
        JSON.stringify(sendRequest({ attachments: [{ content: "not base64!", filename: "a.txt" }] })),
        auth,
      ),
    );
    expect(b.status).toBe(400);
    expect(error(b).message).toContain("attachments.0.content");
    const c = await expectNothingStored(() =>
      post(
        t.sb.urls.baseUrl,
        JSON.stringify(sendRequest({ attachments: [{ content: "aGk=", filename: "../../etc/passwd" }] })),
        auth,
      ),
    );
    expect(c.status).toBe(400);
    expect(error(c).message).toContain("attachments.0.filename");
  });

  it("header injection in any field is refused (400), never stored", async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ["subject", { subject: "Hi\r\nBcc: victim@example.com" }],
      ["name", { name: "Eve\nBcc: victim@example.com" }],
      ["to", { to: "b@example.com\r\nBcc: victim@example.com" }],
      ["from", { from: "a@example.com\r\nBcc: victim@example.com" }],
      ["reply_to", { reply_to: "r@example.com\nBcc: victim@example.com" }],
      ["headers", { headers: { "X-Note": "ok\r\nBcc: victim@example.com" } }],
      ["headers", { headers: { "X-Note\r\nBcc": "victim@example.com" } }],
      ["headers", { headers: { Bcc: "victim@example.com" } }],
      ["headers", { headers: { "Content-Type": "text/plain" } }],
      ["attachments.0.filename", { attachments: [{ content: "aGk=", filename: "a.txt\r\nBcc: victim@example.com" }] }],
    ];
    for (const [field, over] of cases) {
      const r = await expectNothingStored(() => post(t.sb.urls.baseUrl, JSON.stringify(sendRequest(over)), auth));
      expect(r.status, JSON.stringify(over)).toBe(400);
      expect(error(r).message, JSON.stringify(over)).toContain(field);
    }
  });

  it("authentication: none, not Bearer, wrong key", async () => {
    const body = JSON.stringify(sendRequest());
    const none = await expectNothingStored(() => post(t.sb.urls.baseUrl, body, { "Content-Type": "application/json" }));
    expect(none.status).toBe(401);
    expect(error(none).code).toBe("missing_api_key");
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer/);
    const basic = await expectNothingStored(() =>
      post(t.sb.urls.baseUrl, body, {
        ...auth,
        Authorization: `Basic ${Buffer.from(`mailsend:${t.key}`).toString("base64")}`,
      }),
    );
    expect(basic.status).toBe(401);
    expect(error(basic).code).toBe("invalid_authorization");
    const wrong = await expectNothingStored(() =>
      post(t.sb.urls.baseUrl, body, { ...auth, Authorization: "Bearer msk_wrong" }),
    );
    expect(wrong.status).toBe(401);
    expect(error(wrong).code).toBe("invalid_api_key");
    expect(wrong.text).not.toContain("msk_wrong");
  });

  it("other methods on /send: 405 with Allow", async () => {
    const r = await fetch(`${t.sb.urls.baseUrl}/send`, { headers: auth });
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("POST");
  });

  it("a request cut off halfway stores nothing, and the server goes on", async () => {
    await expectNothingStored(async () => {
      const body = Buffer.from(JSON.stringify(sendRequest({ html: "y".repeat(50_000) })));
      await new Promise<void>((resolve) => {
        const req = http.request(`${t.sb.urls.baseUrl}/send`, {
          method: "POST",
          headers: { ...auth, "Content-Length": String(body.length) },
        });
        req.on("error", () => resolve());
        req.write(body.subarray(0, body.length / 2), () =>
          setTimeout(() => {
            req.destroy();
            resolve();
          }, 50),
        );
      });
      await new Promise((r) => setTimeout(r, 100));
    });
    expect((await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest()), auth)).status).toBe(200);
  });

  it("a bad Idempotency-Key is refused", async () => {
    const r = await expectNothingStored(() =>
      post(t.sb.urls.baseUrl, JSON.stringify(sendRequest()), { ...auth, "Idempotency-Key": "has space" }),
    );
    expect(r.status).toBe(400);
    expect(error(r).code).toBe("invalid_idempotency_key");
  });
});

describe("SMTP", () => {
  async function secured(): Promise<SmtpDialog> {
    const d = await SmtpDialog.connect(t.sb.ports.smtp);
    await d.cmd("EHLO test");
    await d.starttls(t.sb.tls.ca);
    await d.cmd("EHLO test");
    return d;
  }

  it("the 587 role offers STARTTLS, refuses AUTH before it (538) and MAIL before AUTH (530)", async () => {
    const d = await SmtpDialog.connect(t.sb.ports.smtp);
    const ehlo = await d.cmd("EHLO test");
    expect(ehlo).toContain("STARTTLS");
    expect(await d.cmd(`AUTH PLAIN ${Buffer.from(`\0mailsend\0${t.key}`).toString("base64")}`)).toMatch(/^538/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^530/);
    await d.quit();
  });

  it("after STARTTLS: AUTH LOGIN and PLAIN are offered; MAIL still needs AUTH", async () => {
    const d = await secured();
    expect(await d.cmd("EHLO again")).toMatch(/AUTH.*LOGIN.*PLAIN|AUTH.*PLAIN.*LOGIN/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^530/);
    expect(await d.cmd(`AUTH PLAIN ${Buffer.from(`\0mailsend\0${t.key}`).toString("base64")}`)).toMatch(/^235/);
    await d.quit();
  });

  it("a wrong username or key: 535", async () => {
    const d = await secured();
    expect(await d.login("someone", t.key)).toMatch(/^535/);
    expect(await d.login("mailsend", "msk_wrong")).toMatch(/^535/);
    await d.quit();
  });

  it("commands out of order: 503", async () => {
    const d = await secured();
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^503/);
    expect(await d.cmd("DATA")).toMatch(/^503/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
    expect(await d.cmd("DATA")).toMatch(/^503/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^503/);
    await d.quit();
  });

  it("bad envelope addresses: 553", async () => {
    const d = await secured();
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    expect(await d.cmd("MAIL FROM:<not an address>")).toMatch(/^5\d\d/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
    expect(await d.cmd("RCPT TO:<b@localhost>")).toMatch(/^553/);
    await d.quit();
  });

  it("a client that disconnects mid-DATA leaves nothing stored", async () => {
    await expectNothingStored(async () => {
      const d = await secured();
      expect(await d.login("mailsend", t.key)).toMatch(/^235/);
      await d.cmd("MAIL FROM:<a@example.com>");
      await d.cmd("RCPT TO:<b@example.com>");
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(`Subject: cut\r\n\r\n${"half a message\r\n".repeat(2000)}`);
      await new Promise((r) => setTimeout(r, 100));
      d.destroy();
      await new Promise((r) => setTimeout(r, 200));
    });
    const d = await secured();
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    await d.cmd("MAIL FROM:<a@example.com>");
    await d.cmd("RCPT TO:<b@example.com>");
    await d.cmd("DATA");
    const before = t.sb.store.count;
    expect(await d.cmd("Subject: whole\r\n\r\nfine\r\n.")).toMatch(/^250/);
    await until(() => t.sb.store.count === before + 1);
    await d.quit();
  });

  it("a message over the size limit: 552, nothing stored", async () => {
    await expectNothingStored(async () => {
      const d = await secured();
      expect(await d.cmd("EHLO again")).toContain(`SIZE ${MAX}`);
      expect(await d.login("mailsend", t.key)).toMatch(/^235/);
      await d.cmd("MAIL FROM:<a@example.com>");
      await d.cmd("RCPT TO:<b@example.com>");
      await d.cmd("DATA");
      const line = `${"x".repeat(998)}\r\n`;
      d.write(`Subject: big\r\n\r\n${line.repeat(Math.ceil((MAX * 1.5) / line.length))}`);
      expect(await d.cmd(".")).toMatch(/^552/);
      await d.quit();
    });
  });

  it("8-bit, non-UTF-8 message bytes are stored exactly as received", async () => {
    const d = await secured();
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    await d.cmd("MAIL FROM:<a@example.com>");
    await d.cmd("RCPT TO:<b@example.com>");
    await d.cmd("DATA");
    const msg = Buffer.concat([
      Buffer.from(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: latin1\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n",
      ),
      Buffer.from([
        0x47, 0x72, 0xfc, 0xdf, 0x65, 0x0d, 0x0a, 0x2e, 0x2e, 0x6c, 0x65, 0x61, 0x64, 0x69, 0x6e, 0x67, 0x20, 0x64,
        0x6f, 0x74, 0x0d, 0x0a,
      ]),
    ]);
    d.write(msg);
    const r = await d.cmd(".");
    expect(r).toMatch(/^250 .*queued as ([0-9a-z]{18})/);
    const id = /queued as ([0-9a-z]{18})/.exec(r)![1]!;
    const raw = (await t.sb.store.raw(id))!;
    // Dot-stuffing undone: "..leading dot" arrives as ".leading dot".
    const expected = Buffer.concat([msg.subarray(0, msg.length - 15), Buffer.from(".leading dot\r\n")]);
    expect(raw.equals(expected)).toBe(true);
    expect((await t.sb.store.get(id))!.subject).toBe("latin1");
    await d.quit();
  });
});
