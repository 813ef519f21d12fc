/**
 * The API key never appears in stdout or stderr, in any mode: success,
 * --json, --verbose (REST headers, SMTP AUTH LOGIN and PLAIN exchanges),
 * --dry-run, and error paths, including servers that echo the key back.
 * Checked as itself, in the base64 forms AUTH uses, and as fragments.
 */
import { join } from "node:path";
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
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--smtp-tls",
      sink.mode,
      "--ca-file",
      caPath,
      ...MB,
      ...extra,
    ],
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
    if (extra.includes("--verbose") && !extra.includes("--dry-run"))
      expect(r.stderr).toMatch(/Authorization: Bearer \[redacted\]/);
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
      body: {
        success: false,
        error: { message: `bad key ${KEY} (${Buffer.from(KEY).toString("base64")})`, got: `Bearer ${KEY}` },
      },
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
    for (const form of [
      wrong,
      Buffer.from(wrong).toString("base64"),
      Buffer.from(`\0mailsend\0${wrong}`).toString("base64"),
    ]) {
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
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(starttls.port),
        "--smtp-tls",
        "starttls",
        "--verbose",
        ...MB,
      ],
      { env: { MAILSEND_API_KEY: KEY } },
    );
    expect(untrusted.exitCode).toBe(78);
    expectNoKey(untrusted);
  });
});

/**
 * A key pasted where another value goes (an address, a profile's name, a file, a host, a header):
 * every error that quotes the value shows it as one phrase instead, through the one redactor the
 * reporting goes through. The CLI in this process (main's own entry points, run and runSendmail):
 * a process adds nothing to what is printed.
 */
describe("a key typed where another value goes", () => {
  const PASTED = ["msk_Zq3xY9pL0aBcDeFgHiJkLmNoPq-s", "Zq3xY9pL0aBcDeFgHiJkLmNoPqRsTuVw12"];
  const SHOWN = "(a value that looks like an API key, not shown)";
  const MSG = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--text", "x"];

  async function inProcess(
    argv: string[],
    opts: { sendmail?: boolean; input?: string } = {},
  ): Promise<{ code: number; out: string }> {
    const { PassThrough } = await import("node:stream");
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = "";
    for (const s of [stdout, stderr]) s.on("data", (d: Buffer) => (out += d.toString()));
    const stdin = new PassThrough();
    stdin.end(opts.input ?? "");
    const env = {
      NO_COLOR: "1",
      HOME: tmp.dir,
      MAILSEND_STATE_DIR: join(tmp.dir, "state"),
      MAILSEND_CONFIG: join(tmp.dir, "no-config.json"),
      MAILSEND_API_KEY: KEY,
      MAILSEND_BASE_URL: rec.url,
      MAILSEND_RATE_LIMIT: "0",
      MAILSEND_QUEUE: "never",
    };
    const io = { stdout, stderr, stdin, env };
    const code = opts.sendmail
      ? await (await import("../../src/cli/commands/sendmail.js")).runSendmail(argv, io)
      : await (await import("../../src/cli/program.js")).run(argv, io);
    return { code, out };
  }

  const cases: Array<[string, (k: string) => string[], { sendmail?: boolean; input?: string; json?: boolean }?]> = [
    ["an unknown command", (k) => [k]],
    ["an unknown command, --json", (k) => [k, "--json"], { json: true }],
    ["-t", (k) => ["send", ...MSG, "-t", k, "--dry-run"]],
    ["-f", (k) => ["send", ...MSG, "-f", k, "--dry-run"]],
    ["--cc", (k) => ["send", ...MSG, "--cc", k, "--dry-run"]],
    ["--reply-to, --json", (k) => ["send", ...MSG, "--reply-to", k, "--dry-run", "--json"], { json: true }],
    ["--profile", (k) => ["send", ...MSG, "--profile", k]],
    ["config get", (k) => ["config", "get", k]],
    ["--attach", (k) => ["send", ...MSG, "--attach", k, "--dry-run"]],
    ["--html-file", (k) => ["send", ...MSG.slice(0, -2), "--html-file", k]],
    ["batch <file>", (k) => ["batch", k]],
    ["--base-url", (k) => ["send", ...MSG, "--base-url", k]],
    ["-H", (k) => ["send", ...MSG, "-H", k, "--dry-run"]],
    ["sandbox keys revoke", (k) => ["sandbox", "keys", "revoke", k, "--dir", join(tmp.dir, "sb")]],
    [
      "sendmail --profile",
      (k) => ["--profile", k, "b@example.com"],
      { sendmail: true, input: "From: a@example.com\nSubject: x\n\nhi\n" },
    ],
    ["sendmail's local name", (k) => [k], { sendmail: true, input: "From: a@example.com\nSubject: x\n\nhi\n" }],
  ];

  it.each(cases)("%s", async (_what, argv, opts = {}) => {
    for (const k of PASTED) {
      const r = await inProcess(argv(k), opts);
      expect(r.code, r.out).not.toBe(0);
      expect(r.code, r.out).not.toBe(70);
      expect(r.out).not.toContain(k);
      for (const part of [k.slice(0, 16), k.slice(-16)]) expect(r.out).not.toContain(part);
      expect(r.out).toContain(SHOWN);
      if (opts.json) expect(() => JSON.parse(r.out.trim().split("\n").at(-1)!)).not.toThrow();
    }
  });

  it("--smtp-host: the connection error that names the host (no lookup made: the classifier and the reporter alone)", async () => {
    const { connectError } = await import("../../src/net/errors.js");
    const { reportError } = await import("../../src/cli/report.js");
    const { PassThrough } = await import("node:stream");
    for (const k of PASTED) {
      const e = connectError(
        Object.assign(new Error(`getaddrinfo ENOTFOUND ${k}`), { code: "ENOTFOUND" }),
        { label: `${k}:587`, setting: "--smtp-host", tlsHint: "" },
        "",
      );
      let out = "";
      const stderr = new PassThrough();
      stderr.on("data", (d: Buffer) => (out += d.toString()));
      expect(
        reportError(
          e,
          { stdout: new PassThrough(), stderr, stdin: new PassThrough(), env: { NO_COLOR: "1" } },
          { json: false },
        ),
      ).toBe(69);
      expect(out).toContain(`cannot reach ${SHOWN}:587`);
      expect(out).not.toContain(k);
    }
  });

  it("what is not a key is still quoted as typed: an address without @, a path, a UUID", async () => {
    const r = await inProcess(["send", ...MSG, "-t", "bob.example.com", "--dry-run"]);
    expect(r.out).toContain("bob.example.com");
    const a = await inProcess([
      "send",
      ...MSG,
      "--attach",
      "/no/such/mailsend-attachment-name-2026-v2.pdf",
      "--dry-run",
    ]);
    expect(a.out).toContain("/no/such/mailsend-attachment-name-2026-v2.pdf");
    const u = await inProcess(["queue", "retry", "123e4567-e89b-12d3-a456-426614174000"]);
    expect(u.out).toContain("123e4567-e89b-12d3-a456-426614174000");
  });
});
