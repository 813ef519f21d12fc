/**
 * The API key never appears in stdout or stderr, in any mode: success,
 * --json, --verbose (REST headers, SMTP AUTH LOGIN and PLAIN exchanges),
 * --dry-run, and error paths, including servers that echo the key back.
 * Checked as itself, in the base64 forms AUTH uses, and as fragments.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, type CliResult } from "../helpers/cli.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

// Characters that make every encoding of the key distinct from the key itself.
const KEY = "msk_live_9fQ2+x/Lr7=Wk3Tz0Pa8";
const FORMS = [
  KEY,
  Buffer.from(KEY).toString("base64"),
  Buffer.from(KEY).toString("base64url"),
  Buffer.from(`\0mailsend\0${KEY}`).toString("base64"),
  Buffer.from(`mailsend\0mailsend\0${KEY}`).toString("base64"),
  encodeURIComponent(KEY),
  Buffer.from(KEY).toString("hex"),
  // Fragments: a leak cut short is still a leak.
  KEY.slice(0, 14),
  KEY.slice(10),
  Buffer.from(KEY).toString("base64").slice(4, 24),
];

const tmp = scratch();
let rec: RestRecorder;
let tlsRec: RestRecorder;
let starttls: SmtpSink;
let implicit: SmtpSink;
let plainOnly: SmtpSink;
let caPath: string;

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  [rec, tlsRec, starttls, implicit, plainOnly] = await Promise.all([
    startRestRecorder(),
    startRestRecorder({ tls }),
    startSmtpSink({ mode: "starttls", tls, key: KEY }),
    startSmtpSink({ mode: "implicit", tls, key: KEY }),
    startSmtpSink({ mode: "starttls", tls, key: KEY, authMethods: ["PLAIN"] }),
  ]);
});
afterAll(async () => {
  await Promise.all([rec?.close(), tlsRec?.close(), starttls?.close(), implicit?.close(), plainOnly?.close()]);
  tmp.remove();
});
beforeEach(() => {
  for (const s of [rec, tlsRec]) s.reset();
  for (const s of [starttls, implicit, plainOnly]) s.reset();
});

function expectNoKey(r: CliResult) {
  for (const form of FORMS) {
    expect(r.stdout, `stdout contains ${form}`).not.toContain(form);
    expect(r.stderr, `stderr contains ${form}`).not.toContain(form);
  }
}

const MB = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--html", "<p>x</p>"];

function rest(extra: string[], env: Record<string, string | undefined> = {}, input?: string) {
  return runInProcess(["send", ...MB, ...extra], {
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...env },
    ...(input !== undefined ? { input } : {}),
  });
}

function smtp(sink: SmtpSink, extra: string[], env: Record<string, string | undefined> = {}) {
  return runInProcess(
    ["send", "--transport", "smtp", "--smtp-host", "127.0.0.1", "--smtp-port", String(sink.port), "--smtp-tls", sink.mode, "--ca-file", caPath, ...MB, ...extra],
    { env: { MAILSEND_API_KEY: KEY, ...env } },
  );
}

describe("REST", () => {
  it.each([
    ["human", []],
    ["--json", ["--json"]],
    ["--verbose", ["--verbose"]],
    ["--verbose --json", ["--verbose", "--json"]],
    ["--quiet", ["--quiet"]],
    ["--dry-run", ["--dry-run"]],
    ["--dry-run --json", ["--dry-run", "--json"]],
    ["--dry-run --verbose", ["--dry-run", "--verbose"]],
  ])("success, %s", async (_mode, extra) => {
    const r = await rest(extra);
    expect(r.exitCode).toBe(0);
    expectNoKey(r);
    if (extra.includes("--verbose") && !extra.includes("--dry-run")) expect(r.stderr).toMatch(/Authorization: Bearer \[redacted\]/);
  });

  it("the key from a file and from stdin, --verbose", async () => {
    const f = tmp.file("key", `${KEY}\n`);
    const a = await rest(["--verbose"], { MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: f });
    expect(a.exitCode).toBe(0);
    expectNoKey(a);
    const b = await rest(["--verbose", "--api-key-stdin"], { MAILSEND_API_KEY: undefined }, `${KEY}\n`);
    expect(b.exitCode).toBe(0);
    expectNoKey(b);
  });

  it.each([
    [401, ["--verbose"]],
    [401, ["--json"]],
    [403, []],
    [400, ["--verbose", "--json"]],
    [500, ["--verbose"]],
    [429, ["--json"]],
  ])("a %i whose body and headers echo the key, %j", async (status, extra) => {
    rec.script({
      status,
      body: { success: false, error: { message: `bad key ${KEY} (${Buffer.from(KEY).toString("base64")})`, got: `Bearer ${KEY}` } },
      headers: { "X-Echo": KEY, "WWW-Authenticate": `Bearer error="invalid_token", token="${KEY}"` },
    });
    const r = await rest(extra);
    expect(r.exitCode).not.toBe(0);
    expectNoKey(r);
  });

  it("a 200 whose message_id is the key", async () => {
    rec.script({ status: 200, body: { success: true, message_id: `msg_${KEY}` } });
    const r = await rest(["--json", "--verbose"]);
    expectNoKey(r);
  });

  it("a timeout, a hang-up and a refused connection, --verbose", async () => {
    rec.script({ delayMs: 3000 });
    expectNoKey(await rest(["--verbose", "--timeout", "1"]));
    rec.script({ destroy: "after-body" });
    expectNoKey(await rest(["--verbose"]));
    const closed = await startRestRecorder();
    await closed.close();
    expectNoKey(await rest(["--verbose", "--json"], { MAILSEND_BASE_URL: closed.url }));
  });

  it("HTTPS: an untrusted certificate and a success, --verbose", async () => {
    const bad = await rest(["--verbose"], { MAILSEND_BASE_URL: tlsRec.url });
    expect(bad.exitCode).toBe(78);
    expectNoKey(bad);
    const ok = await rest(["--verbose", "--ca-file", caPath], { MAILSEND_BASE_URL: tlsRec.url });
    expect(ok.exitCode).toBe(0);
    expectNoKey(ok);
  });

  it("a key that is refused as malformed is not echoed", async () => {
    for (const bad of [`${KEY} `, ` ${KEY}`, `${KEY}\n${KEY}`, `"${KEY}"x y`]) {
      const r = await rest(["--verbose"], { MAILSEND_API_KEY: bad });
      expect(r.exitCode).toBe(78);
      expectNoKey(r);
    }
  });

  it("bad input with a key in the environment", async () => {
    expectNoKey(await rest(["--verbose", "--to", "nope"]));
    expectNoKey(await rest(["--json", "--cc", "c@example.com"]));
  });
});

describe("SMTP", () => {
  it.each([
    ["STARTTLS, human", "starttls", []],
    ["STARTTLS, --verbose (AUTH LOGIN in the trace)", "starttls", ["--verbose"]],
    ["STARTTLS, --verbose --json", "starttls", ["--verbose", "--json"]],
    ["implicit TLS, --verbose", "implicit", ["--verbose"]],
    ["AUTH PLAIN, --verbose", "plain", ["--verbose"]],
    ["--dry-run", "starttls", ["--dry-run"]],
    ["--dry-run --json", "starttls", ["--dry-run", "--json"]],
  ] as Array<[string, "starttls" | "implicit" | "plain", string[]]>)("success, %s", async (_mode, which, extra) => {
    const sink = which === "implicit" ? implicit : which === "plain" ? plainOnly : starttls;
    const r = await smtp(sink, [...extra]);
    expect(r.exitCode).toBe(0);
    expectNoKey(r);
    if (extra.includes("--verbose") && !extra.includes("--dry-run")) {
      expect(r.stderr).toMatch(which === "plain" ? /AUTH PLAIN/ : /AUTH LOGIN/);
      expect(sink.messages).toHaveLength(1);
    }
  });

  it("535 for a wrong key, --verbose (the wrong key is the secret here)", async () => {
    const wrong = KEY.replace("msk_live", "msk_gone");
    const r = await smtp(starttls, ["--verbose"], { MAILSEND_API_KEY: wrong });
    expect(r.exitCode).toBe(77);
    for (const form of [wrong, Buffer.from(wrong).toString("base64"), Buffer.from(`\0mailsend\0${wrong}`).toString("base64")]) {
      expect(r.stderr).not.toContain(form);
      expect(r.stdout).not.toContain(form);
    }
  });

  it("535 under AUTH PLAIN, --verbose --json", async () => {
    plainOnly.script({ auth: { code: 535, message: "5.7.8 nope" } });
    const r = await smtp(plainOnly, ["--verbose", "--json"]);
    expect(r.exitCode).toBe(77);
    expectNoKey(r);
  });

  it("server replies that echo the key (RCPT, DATA), --verbose and --json", async () => {
    starttls.script({ rcpt: { code: 550, message: `5.1.1 unknown user; key was ${KEY}` } });
    const a = await smtp(starttls, ["--verbose"]);
    expect(a.exitCode).toBe(65);
    expectNoKey(a);
    starttls.script({ data: { code: 554, message: `5.7.1 rejected ${Buffer.from(KEY).toString("base64")}` } });
    const b = await smtp(starttls, ["--json"]);
    expect(b.exitCode).toBe(65);
    expectNoKey(b);
  });

  it("TLS failures, --verbose", async () => {
    expectNoKey(await smtp(starttls, ["--verbose", "--smtp-tls", "implicit"]));
    const untrusted = await runInProcess(
      ["send", "--transport", "smtp", "--smtp-host", "127.0.0.1", "--smtp-port", String(starttls.port), "--smtp-tls", "starttls", "--verbose", ...MB],
      { env: { MAILSEND_API_KEY: KEY } },
    );
    expect(untrusted.exitCode).toBe(78);
    expectNoKey(untrusted);
  });
});
