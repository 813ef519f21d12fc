import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { USER_AGENT } from "../../src/core/version.js";
import { checkKey, resolveApiKey, resolveTransportConfig, resolveTransportName } from "../../src/settings/resolve.js";
import { scratch } from "../helpers/tmp.js";
import { failure } from "../helpers/failure.js";
import type { Env } from "../../src/core/env.js";

const KEY = "msk_test_unit_4f1c9a";
const tmp = scratch();
afterAll(() => tmp.remove());

function stdin(text?: string, isTTY = false) {
  const s = Readable.from(text === undefined ? [] : [Buffer.from(text)]) as Readable & { isTTY?: boolean };
  s.isTTY = isTTY;
  return { stdin: s };
}

describe("the API key", () => {
  it("comes from MAILSEND_API_KEY", async () => {
    expect(await resolveApiKey({}, { MAILSEND_API_KEY: KEY }, stdin())).toBe(KEY);
  });

  it("comes from MAILSEND_API_KEY_FILE, without the file's final newline", async () => {
    const p = tmp.file("key-nl", `${KEY}\n`);
    expect(await resolveApiKey({}, { MAILSEND_API_KEY_FILE: p }, stdin())).toBe(KEY);
    const crlf = tmp.file("key-crlf", `${KEY}\r\n`);
    expect(await resolveApiKey({}, { MAILSEND_API_KEY_FILE: crlf }, stdin())).toBe(KEY);
  });

  it("comes from stdin with --api-key-stdin, which beats the environment", async () => {
    expect(await resolveApiKey({ apiKeyStdin: true }, { MAILSEND_API_KEY: "other" }, stdin(`${KEY}\n`))).toBe(KEY);
  });

  it("--api-key-stdin on a terminal is a usage error", async () => {
    const e = await failure(resolveApiKey({ apiKeyStdin: true }, {}, stdin(undefined, true)));
    expect(e.code).toBe("usage");
    expect(e.exitCode).toBe(64);
  });

  it("is required: a config error (78) that says how to set it", async () => {
    const e = await failure(resolveApiKey({}, {}, stdin()));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toMatch(/MAILSEND_API_KEY/);
    expect(e.hint).toMatch(/sandbox/);
  });

  it("treats an empty MAILSEND_API_KEY as unset", async () => {
    const e = await failure(resolveApiKey({}, { MAILSEND_API_KEY: "" }, stdin()));
    expect(e.exitCode).toBe(78);
    expect(e.message).toMatch(/no API key/);
  });

  it("refuses both variables at once", async () => {
    const p = tmp.file("key-both", KEY);
    const e = await failure(resolveApiKey({}, { MAILSEND_API_KEY: KEY, MAILSEND_API_KEY_FILE: p }, stdin()));
    expect(e.exitCode).toBe(78);
    expect(e.message).toMatch(/both/);
  });

  it("refuses an empty key file and empty stdin", async () => {
    const p = tmp.file("key-empty", "");
    expect((await failure(resolveApiKey({}, { MAILSEND_API_KEY_FILE: p }, stdin()))).exitCode).toBe(78);
    expect((await failure(resolveApiKey({ apiKeyStdin: true }, {}, stdin("")))).exitCode).toBe(78);
    expect((await failure(resolveApiKey({ apiKeyStdin: true }, {}, stdin("\n")))).exitCode).toBe(78);
  });

  it("a missing key file is a config error that names the variable", async () => {
    const e = await failure(resolveApiKey({}, { MAILSEND_API_KEY_FILE: `${tmp.dir}/nope` }, stdin()));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toMatch(/MAILSEND_API_KEY_FILE/);
  });

  it.each([
    ["a leading space", ` ${KEY}`],
    ["a trailing space", `${KEY} `],
    ["an inner space", "abc def"],
    ["a tab", "abc\tdef"],
    ["two lines", `${KEY}\n${KEY}`],
    ["a quote-wrapped newline", `"${KEY}\n"`],
    ["non-ASCII", "clé"],
  ])("refuses a key with %s, without echoing it", async (_why, raw) => {
    const e = await failure(resolveApiKey({}, { MAILSEND_API_KEY: raw }, stdin()));
    expect(e.exitCode).toBe(78);
    expect(e.message).not.toContain(raw.trim());
    expect(e.hint ?? "").not.toContain(raw.trim());
  });

  it("checkKey strips exactly one final newline", () => {
    expect(checkKey(`${KEY}\n`, "x")).toBe(KEY);
    expect(() => checkKey(`${KEY}\n\n`, "x")).toThrow(MailsendError);
  });
});

describe("transport settings", () => {
  const io = { ...stdin(), needKey: false };

  it("transport: flag > env > default rest", () => {
    expect(resolveTransportName({}, {})).toBe("rest");
    expect(resolveTransportName({}, { MAILSEND_TRANSPORT: "smtp" })).toBe("smtp");
    expect(resolveTransportName({ transport: "rest" }, { MAILSEND_TRANSPORT: "smtp" })).toBe("rest");
    expect(() => resolveTransportName({}, { MAILSEND_TRANSPORT: "carrier-pigeon" })).toThrow(MailsendError);
  });

  it("REST: base URL flag > env, user agent, default timeout", async () => {
    const env: Env = { MAILSEND_BASE_URL: "http://env.example" };
    const a = await resolveTransportConfig({}, env, io);
    expect(a).toMatchObject({
      transport: "rest",
      baseUrl: "http://env.example",
      timeoutMs: 30_000,
      userAgent: USER_AGENT,
      insecure: false,
    });
    const b = await resolveTransportConfig({ baseUrl: "http://flag.example", timeout: 5 }, env, io);
    expect(b).toMatchObject({ baseUrl: "http://flag.example", timeoutMs: 5000 });
    expect(USER_AGENT).toMatch(/^mailsend\//);
  });

  it("REST without a base URL is a config error pointing at the sandbox", async () => {
    const e = await failure(resolveTransportConfig({}, {}, io));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toMatch(/MAILSEND_BASE_URL/);
    expect(e.hint).toMatch(/sandbox/);
  });

  it("SMTP: host required, port 587 STARTTLS by default, 465 implicit, user default mailsend", async () => {
    const e = await failure(resolveTransportConfig({ transport: "smtp" }, {}, io));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toMatch(/MAILSEND_SMTP_HOST/);

    const a = await resolveTransportConfig({ transport: "smtp" }, { MAILSEND_SMTP_HOST: "smtp.example.com" }, io);
    expect(a).toMatchObject({
      transport: "smtp",
      host: "smtp.example.com",
      port: 587,
      tls: "starttls",
      user: "mailsend",
    });
    const b = await resolveTransportConfig(
      { transport: "smtp", smtpPort: 465 },
      { MAILSEND_SMTP_HOST: "h.example" },
      io,
    );
    expect(b).toMatchObject({ port: 465, tls: "implicit" });
    const c = await resolveTransportConfig(
      {},
      {
        MAILSEND_TRANSPORT: "smtp",
        MAILSEND_SMTP_HOST: "h.example",
        MAILSEND_SMTP_PORT: "465",
        MAILSEND_SMTP_USER: "someone",
      },
      io,
    );
    expect(c).toMatchObject({ port: 465, tls: "implicit", user: "someone" });
    const d = await resolveTransportConfig(
      { transport: "smtp", smtpHost: "flag.example", smtpUser: "flaguser" },
      { MAILSEND_SMTP_HOST: "env.example", MAILSEND_SMTP_USER: "envuser" },
      io,
    );
    expect(d).toMatchObject({ host: "flag.example", user: "flaguser" });
  });

  it("SMTP: an explicit TLS mode on another port is honoured", async () => {
    const a = await resolveTransportConfig(
      { transport: "smtp", smtpHost: "h.example", smtpPort: 2525, smtpTls: "implicit" },
      {},
      io,
    );
    expect(a).toMatchObject({ port: 2525, tls: "implicit" });
  });

  it.each([
    [465, "starttls"],
    [587, "implicit"],
  ])("SMTP: port %i with %s is a TLS mismatch (78)", async (port, mode) => {
    const e = await failure(
      resolveTransportConfig({ transport: "smtp", smtpHost: "h.example", smtpPort: port, smtpTls: mode }, {}, io),
    );
    expect(e.code).toBe("tls_mismatch");
    expect(e.exitCode).toBe(78);
  });

  it.each([
    ["a port out of range", { MAILSEND_SMTP_PORT: "70000" }],
    ["a port that is not a number", { MAILSEND_SMTP_PORT: "smtp" }],
    ["an unknown TLS mode", { MAILSEND_SMTP_TLS: "ssl" }],
    ["a zero timeout", { MAILSEND_TIMEOUT: "0" }],
  ])("SMTP: %s is a config error", async (_why, env) => {
    const e = await failure(
      resolveTransportConfig({ transport: "smtp" }, { MAILSEND_SMTP_HOST: "h.example", ...env }, io),
    );
    expect(e.exitCode).toBe(78);
  });

  it("reads the key only when it is needed (not for --dry-run)", async () => {
    const dry = await resolveTransportConfig({ baseUrl: "http://x.example" }, {}, { ...stdin(), needKey: false });
    expect(dry.apiKey).toBe("");
    const real = await resolveTransportConfig(
      { baseUrl: "http://x.example" },
      { MAILSEND_API_KEY: KEY },
      { ...stdin(), needKey: true },
    );
    expect(real.apiKey).toBe(KEY);
    const e = await failure(resolveTransportConfig({ baseUrl: "http://x.example" }, {}, { ...stdin(), needKey: true }));
    expect(e.exitCode).toBe(78);
  });

  it("passes --ca-file and --insecure through", async () => {
    const c = await resolveTransportConfig({ baseUrl: "https://x.example", caFile: "/ca.pem", insecure: true }, {}, io);
    expect(c).toMatchObject({ caFile: "/ca.pem", insecure: true });
  });
});
