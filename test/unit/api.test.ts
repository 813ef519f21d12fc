/**
 * The programmatic API from source: send(), sendBatch() and createSandbox()
 * against an in-process sandbox; errors carry the CLI's exit classes; the
 * options resolve like the CLI's flags and environment; nothing is printed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createSandbox,
  EXIT,
  send,
  sendBatch,
  type BatchItem,
  type BatchItemResult,
  type MailSandbox,
  type SendOptions,
} from "../../src/index.js";
import { resolveConnection } from "../../src/api/options.js";
import { resolveTransportConfig } from "../../src/settings/resolve.js";
import { parseEml } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";
import { failure } from "../helpers/failure.js";

const tmp = scratch("mailsend-api-unit-");
let sb: MailSandbox;
let rest: SendOptions;
let stateN = 0;
/** A fresh budget state dir per test: no test's slots count against another's. */
const state = () => ({ stateDir: join(tmp.dir, `state-${stateN++}`) });
const msg = (over: Record<string, unknown> = {}) => ({
  from: "CI <ci@example.com>",
  to: "dev@example.com",
  subject: "Build 42",
  html: "<p>green</p>",
  ...over,
});

beforeAll(async () => {
  sb = await createSandbox({ dir: join(tmp.dir, "sb") });
  rest = { ...sb.options(), ...state() };
});
afterAll(async () => {
  await sb?.close();
  tmp.remove();
});

async function stored(messageId: string) {
  const all = await sb.messages();
  return all.filter((m) => m.messageId === messageId);
}

describe("send()", () => {
  it("sends over REST and returns the service's message id", async () => {
    const r = await send(msg({ reply_to: "ops@example.com", headers: { "X-Build": "42" } }), rest);
    expect(r).toMatchObject({ transport: "rest", recipients: ["dev@example.com"], status: 200, attempts: 1 });
    const [m] = await stored(r.messageId);
    expect(m).toMatchObject({ channel: "rest", subject: "Build 42", to: ["dev@example.com"] });
    const eml = await parseEml((await sb.raw(m!.id))!);
    expect(eml.from).toMatchObject({ name: "CI", address: "ci@example.com" });
    expect(eml.headers.find((h) => h.key === "x-build")?.value).toBe("42");
  });

  it("takes a field or option set to undefined as absent, as its types say (exactOptionalPropertyTypes)", async () => {
    const u = undefined;
    const message = msg({
      cc: u,
      bcc: u,
      text: u,
      name: u,
      reply_to: u,
      headers: u,
      attachments: [{ filename: "a.txt", content: "", contentType: u }],
    });
    const none = {
      proxy: u,
      timeoutMs: u,
      env: u,
      retries: u,
      maxWaitMs: u,
      wait: u,
      deadlineMs: u,
      rateLimitUrl: u,
      signal: u,
      onWait: u,
      onWarning: u,
      trace: u,
      idempotencyKey: u,
      insecure: u,
      apiKeyFile: u,
    };
    expect((await send(message, { ...none, ...rest })).transport).toBe("rest");
    const smtp = sb.options("smtp");
    expect(
      (await send(message, { ...none, ...smtp, ...state(), smtp: { ...smtp.smtp!, tls: u, user: u, proxy: u } }))
        .transport,
    ).toBe("smtp");
    const b = await sendBatch([{ ...message, idempotency_key: u, vars: u }], {
      ...none,
      ...rest,
      ...state(),
      concurrency: u,
      journal: u,
      template: { text: u, headers: u, attachments: u },
    });
    expect(b.summary).toMatchObject({ sent: 1, exitCode: 0 });
  });

  it("sends over SMTP with cc, bcc and attachments from a Buffer, base64 and a file", async () => {
    const file = tmp.file("report.txt", "report body\n");
    const r = await send(
      msg({
        to: ["a@example.com", "b@example.com"],
        cc: "c@example.com",
        bcc: ["hidden@example.com"],
        text: "plain",
        attachments: [
          { filename: "one.bin", content: Buffer.from([1, 2, 3]) },
          { filename: "two.txt", content: Buffer.from("two").toString("base64"), contentType: "text/plain" },
          { path: file },
          { path: file, filename: "renamed.txt" },
        ],
      }),
      { ...sb.options("smtp"), ...state() },
    );
    expect(r.transport).toBe("smtp");
    expect(r.recipients).toEqual(["a@example.com", "b@example.com", "c@example.com", "hidden@example.com"]);
    const [m] = await stored(r.messageId);
    expect(m!.envelope.to).toContain("hidden@example.com");
    expect(m!.attachments.map((a) => a.filename)).toEqual(["one.bin", "two.txt", "report.txt", "renamed.txt"]);
    const raw = (await sb.raw(m!.id))!;
    expect(raw.toString("latin1")).not.toMatch(/^bcc:/im);
    const eml = await parseEml(raw);
    expect(Buffer.from(eml.attachments[0]!.content as ArrayBuffer)).toEqual(Buffer.from([1, 2, 3]));
    expect(eml.text?.trim()).toBe("plain");
  });

  it("sends over implicit TLS (smtps) too", async () => {
    const r = await send(msg(), { ...sb.options("smtps"), ...state() });
    expect(r.smtpResponse).toMatch(/^250/);
  });

  it("reuses an idempotency key: a resend is stored once and answers the same id", async () => {
    const o = { ...rest, idempotencyKey: "api-unit-once-1" };
    const a = await send(msg(), o);
    const b = await send(msg(), o);
    expect(b.messageId).toBe(a.messageId);
    expect(b.idempotencyKey).toBe("api-unit-once-1");
    expect(await stored(a.messageId)).toHaveLength(1);
  });

  it.each([
    ["a missing field", msg({ subject: undefined }), "usage", 64, /missing subject/],
    ["no body", msg({ html: undefined }), "usage", 64, /html or text/],
    ["an unknown field", msg({ bodyy: "x" }), "usage", 64, /unknown message field\(s\): bodyy/],
    ["a bad address", msg({ to: "not an address" }), "invalid_address", 65, /message\.to/],
    ["a header with a line break", msg({ headers: { "X-A": "a\r\nBcc: x@example.com" } }), "invalid_header", 65, /X-A/],
    ["cc over REST", msg({ cc: "c@example.com" }), "usage", 64, /cc and bcc/],
    ["a reserved header", msg({ headers: { From: "x@example.com" } }), "invalid_header", 65, /From/],
    ["bad base64", msg({ attachments: [{ filename: "a", content: "not base64!" }] }), "invalid_message", 65, /base64/],
    [
      "a path in a filename",
      msg({ attachments: [{ filename: "../a", content: "" }] }),
      "invalid_message",
      65,
      /path separator/,
    ],
    [
      "a missing attachment file",
      msg({ attachments: [{ path: "/nonexistent/file.pdf" }] }),
      "file_not_found",
      66,
      /not found/,
    ],
  ])("refuses %s with the CLI's exit class, before sending", async (_what, message, code, exit, text) => {
    const before = (await sb.messages()).length;
    const e = await failure(send(message as never, rest));
    expect(e.code).toBe(code);
    expect(e.exitCode).toBe(exit);
    expect(e.message).toMatch(text);
    expect((await sb.messages()).length).toBe(before);
  });

  it("refuses a wrong key (77) and never shows it", async () => {
    const secret = "msk_not_a_real_key_4711";
    const e = await failure(send(msg(), { ...rest, apiKey: secret }));
    expect(e.code).toBe("auth_failed");
    expect(e.exitClass).toBe("noperm");
    expect(e.exitCode).toBe(77);
    expect(`${e.message} ${e.hint} ${JSON.stringify(e)} ${e.stack}`).not.toContain(secret);
  });

  it("refuses a wrong key over SMTP too (77)", async () => {
    const e = await failure(send(msg(), { ...sb.options("smtp"), ...state(), apiKey: "msk_wrong_smtp" }));
    expect(e.exitCode).toBe(77);
  });

  it("a key with a space is a configuration error that does not echo it", async () => {
    const e = await failure(send(msg(), { ...rest, apiKey: "msk_half key" }));
    expect(e.code).toBe("config_invalid");
    expect(e.exitCode).toBe(78);
    expect(e.message).not.toContain("half key");
  });

  it("a refused connection is 'unavailable' (69)", async () => {
    const e = await failure(send(msg(), { ...rest, baseUrl: "http://127.0.0.1:1", retries: 0 }));
    expect(e.code).toBe("connection_failed");
    expect(e.exitCode).toBe(EXIT.unavailable);
  });

  it("reads the key from a file", async () => {
    const r = await send(msg(), { baseUrl: sb.baseUrl, apiKeyFile: join(sb.dir, "api-key"), ...state() });
    expect(r.attempts).toBe(1);
    const e = await failure(send(msg(), { baseUrl: sb.baseUrl, apiKeyFile: join(tmp.dir, "no-such-key"), ...state() }));
    expect(e.code).toBe("config_missing");
  });

  it("takes the settings from `env` only when given one (never from process.env by itself)", async () => {
    vi.stubEnv("MAILSEND_BASE_URL", sb.baseUrl);
    vi.stubEnv("MAILSEND_API_KEY", sb.apiKey);
    try {
      const e = await failure(send(msg(), { ...state() }));
      expect(e.code).toBe("config_missing");
      expect(e.message).toBe("no API key");
      expect(e.hint).toMatch(/options\.env/);
      // Given explicitly, the sandbox's variables are all it takes (REST and SMTP, with its CA).
      expect((await send(msg(), { env: { ...sb.env, MAILSEND_STATE_DIR: state().stateDir } })).transport).toBe("rest");
      const smtp = await send(msg(), {
        env: { ...sb.env, MAILSEND_TRANSPORT: "smtp", MAILSEND_STATE_DIR: state().stateDir },
      });
      expect(smtp.transport).toBe("smtp");
      expect((await send(msg(), { env: process.env, ...state() })).transport).toBe("rest");
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("counts against the shared budget: with no slot left and wait: false, it fails at once (75) without sending", async () => {
    const o = { ...rest, ...state(), rateLimit: 2, rateWindowMs: 60_000, wait: false };
    await send(msg(), o);
    await send(msg(), o);
    const before = (await sb.messages()).length;
    const e = await failure(send(msg(), o));
    expect(e.code).toBe("rate_limited");
    expect(e.exitCode).toBe(75);
    expect((await sb.messages()).length).toBe(before);
  });

  it("waits for a slot (onWait tells), and an abort ends the wait at once (75)", async () => {
    const o = { ...rest, ...state(), rateLimit: 1, rateWindowMs: 60_000 };
    await send(msg(), o);
    const ac = new AbortController();
    const waits: number[] = [];
    const started = Date.now();
    const p = send(msg(), { ...o, signal: ac.signal, onWait: (w) => (waits.push(w.ms), ac.abort()) });
    const e = await failure(p);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(1000);
    expect(e.code).toBe("temporary_failure");
    expect(e.exitCode).toBe(75);
    expect(Date.now() - started).toBeLessThan(30_000); // the wait it ended was 60 s
  });

  it("aborted while waiting to retry a send that may have arrived: reports that (76), not 'nothing was sent'", async () => {
    await fetch(`${sb.baseUrl}/_sandbox/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ dropRate: 1, dropWhen: "after" }),
    });
    try {
      const ac = new AbortController();
      const e = await failure(
        send(msg({ subject: "in doubt" }), {
          ...rest,
          retries: 3,
          signal: ac.signal,
          onWait: (w) => w.reason === "retry" && ac.abort(),
        }),
      );
      expect(e.code).toBe("outcome_unknown");
      expect(e.exitCode).toBe(76);
      expect(e.mayHaveBeenSent).toBe(true);
      expect(e.attempts).toBe(1);
    } finally {
      await fetch(`${sb.baseUrl}/_sandbox/faults`, { method: "DELETE" });
    }
  });

  it("an already aborted signal sends nothing", async () => {
    const e = await failure(send(msg(), { ...rest, signal: AbortSignal.abort() }));
    expect(e.exitCode).toBe(75);
  });

  it("traces the protocol with the key redacted", async () => {
    const lines: string[] = [];
    await send(msg(), { ...sb.options("smtp"), ...state(), trace: (l) => lines.push(l) });
    expect(lines.length).toBeGreaterThan(3);
    expect(lines.join("\n")).not.toContain(sb.apiKey);
  });

  it("retries a 503 under the CLI's policy, then fails with 69 and the attempts made", async () => {
    const faults = (body: unknown) =>
      fetch(`${sb.baseUrl}/_sandbox/faults`, {
        method: body ? "POST" : "DELETE",
        headers: { "content-type": "application/json" },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    await faults({ failRate: 1, failStatus: 503 });
    try {
      const waits: string[] = [];
      const e = await failure(
        send(msg(), { ...rest, retries: 2, onWait: (w) => waits.push(`${w.reason}:${w.attempt}:${w.error?.code}`) }),
      );
      expect(e.code).toBe("service_error");
      expect(e.exitCode).toBe(69);
      expect(e.attempts).toBe(3);
      expect(waits).toEqual(["retry:2:service_error", "retry:3:service_error"]);
    } finally {
      await faults(undefined);
    }
  });
});

describe("options", () => {
  const KEY = "msk_options_unit";

  it("resolve like the CLI's environment (the same config for the same variables)", async () => {
    const envs: Record<string, string>[] = [
      { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: "https://api.example.com/v1", MAILSEND_TIMEOUT: "7" },
      { MAILSEND_API_KEY: KEY, MAILSEND_TRANSPORT: "smtp", MAILSEND_SMTP_HOST: "smtp.example.com" },
      {
        MAILSEND_API_KEY: KEY,
        MAILSEND_TRANSPORT: "smtp",
        MAILSEND_SMTP_HOST: "smtp.example.com",
        MAILSEND_SMTP_PORT: "465",
        MAILSEND_SMTP_USER: "u",
      },
      {
        MAILSEND_API_KEY: KEY,
        MAILSEND_TRANSPORT: "smtp",
        MAILSEND_SMTP_HOST: "h",
        MAILSEND_SMTP_PORT: "2525",
        MAILSEND_SMTP_TLS: "implicit",
      },
    ];
    const stdin = { stdin: Readable.from([]) };
    for (const env of envs) {
      expect(await resolveConnection({ env }, { needKey: true })).toEqual(
        await resolveTransportConfig({}, env, { ...stdin, needKey: true }),
      );
    }
  });

  it("options beat env, which beats the defaults", async () => {
    const env = {
      MAILSEND_API_KEY: "msk_from_env",
      MAILSEND_BASE_URL: "https://env.example.com",
      MAILSEND_TIMEOUT: "9",
    };
    const c = await resolveConnection({ env, baseUrl: "https://opt.example.com", apiKey: KEY }, { needKey: true });
    expect(c).toMatchObject({ transport: "rest", baseUrl: "https://opt.example.com", apiKey: KEY, timeoutMs: 9000 });
    expect(await resolveConnection({ baseUrl: "https://x.example.com", apiKey: KEY }, { needKey: true })).toMatchObject(
      { timeoutMs: 30_000, insecure: false },
    );
  });

  it("pick SMTP when only smtp is given, with the TLS mode from the port", async () => {
    expect(await resolveConnection({ smtp: { host: "h" }, apiKey: KEY }, { needKey: true })).toMatchObject({
      transport: "smtp",
      port: 587,
      tls: "starttls",
      user: "mailsend",
    });
    expect(await resolveConnection({ smtp: { host: "h", port: 465 }, apiKey: KEY }, { needKey: true })).toMatchObject({
      tls: "implicit",
    });
  });

  it.each([
    [{ smtp: { host: "h", port: 465, tls: "starttls" } }, "tls_mismatch"],
    [{ smtp: { host: "h", port: 70000 } }, "config_invalid"],
    [{ transport: "carrier-pigeon", baseUrl: "https://x" }, "config_invalid"],
    [{ baseUrl: "https://x", timeoutMs: 0 }, "config_invalid"],
    [{ baseUrl: "https://x", apiKeyFile: "/k" }, "config_invalid"],
    [{ transport: "rest" }, "config_missing"],
    [{ transport: "smtp" }, "config_missing"],
  ])("refuse %j as configuration (78)", async (o, code) => {
    const e = await failure(resolveConnection({ apiKey: KEY, ...(o as object) }, { needKey: true }));
    expect(e.code).toBe(code);
    expect(e.exitCode).toBe(78);
  });
});

describe("the budget's default place", () => {
  it("is the CLI's: $XDG_STATE_HOME/mailsend/ratelimit, so library and CLI processes of a key share it", async () => {
    const xdg = join(tmp.dir, "xdg-state");
    const before = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = xdg;
    try {
      const { stateDir: _unused, ...noStateDir } = rest;
      await send(msg({ subject: "default state dir" }), { ...noStateDir, rateLimit: 5 });
      const { readdirSync } = await import("node:fs");
      expect(readdirSync(join(xdg, "mailsend", "ratelimit")).some((f) => f.endsWith(".json"))).toBe(true);
    } finally {
      if (before === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = before;
    }
  });
});

describe("sendBatch()", () => {
  const items = (n: number, over: (i: number) => Partial<BatchItem> = () => ({})): BatchItem[] =>
    Array.from({ length: n }, (_, i) => ({ ...msg({ to: `user${i}@example.com`, subject: `Item ${i}` }), ...over(i) }));

  it("sends an array, reports each item and a summary", async () => {
    const seen: BatchItemResult[] = [];
    const r = await sendBatch(items(5), { ...rest, ...state(), concurrency: 3, onResult: (x) => seen.push(x) });
    expect(r.summary).toMatchObject({ total: 5, sent: 5, failed: 0, invalid: 0, exitCode: 0, aborted: false });
    expect(r.results).toHaveLength(5);
    expect(seen).toEqual(r.results);
    expect(r.results.map((x) => x.index).sort()).toEqual([0, 1, 2, 3, 4]);
    for (const x of r.results) expect((await stored(x.messageId!)).length).toBe(1);
  });

  it("takes an async iterable (spooled), with Buffer attachments, over SMTP", async () => {
    async function* gen() {
      for (let i = 0; i < 4; i++)
        yield {
          ...msg({ to: `gen${i}@example.com` }),
          attachments: [{ filename: `f${i}.bin`, content: Buffer.from([i]) }],
        };
    }
    const r = await sendBatch(gen(), { ...sb.options("smtp"), ...state() });
    expect(r.summary).toMatchObject({ total: 4, sent: 4 });
    const m = (await stored(r.results[0]!.messageId!))[0]!;
    expect(m.attachments).toHaveLength(1);
  });

  it("lists invalid items first and sends the rest; exit code of the worst", async () => {
    const r = await sendBatch([msg(), msg({ to: "nope" }), null as never, msg({ html: undefined })], {
      ...rest,
      ...state(),
    });
    expect(r.summary).toMatchObject({ total: 4, sent: 1, invalid: 3, exitCode: 65 });
    const bad = r.results.filter((x) => x.status === "invalid");
    expect(bad.map((x) => x.index).sort()).toEqual([1, 2, 3]);
    expect(bad[0]!.error).toMatchObject({ exitCode: 65, exitClass: "dataerr" });
  });

  it("names an item in its errors as the caller knows it, items[index], not by a row and line of the runner's internal JSON lines", async () => {
    const k = { idempotency_key: "same-key" };
    const r = await sendBatch([msg(), msg({ to: "nope" }), null as never, msg(k), msg(k)], { ...rest, ...state() });
    const message = (i: number) => r.results.find((x) => x.index === i)!.error?.message;
    expect(message(1)).toBe('items[1]: to: missing @ in "nope"');
    expect(message(2)).toMatch(/^items\[2\]: expected a message: an object/);
    expect(message(4)).toMatch(/^items\[4\]: idempotency_key "same-key" is also items\[3\]'s;/);
    expect(r.results.map((x) => x.error?.message ?? "").join("\n")).not.toMatch(/\b(row|line) \d/);
  });

  it("fills items from a template with {{variables}}", async () => {
    const r = await sendBatch(
      [
        { to: "ann@example.com", vars: { name: "Ann <3" } },
        { to: "bob@example.com", vars: { name: "Bob" } },
      ],
      {
        ...rest,
        ...state(),
        template: {
          from: "ci@example.com",
          subject: "Hi {{name}}",
          html: "<p>Hello {{name}}</p>",
          headers: { "X-Campaign": "api" },
        },
      },
    );
    expect(r.summary.sent).toBe(2);
    const ann = r.results.find((x) => x.index === 0)!;
    const m = (await stored(ann.messageId!))[0]!;
    expect(m.subject).toBe("Hi Ann <3");
    const eml = await parseEml((await sb.raw(m.id))!);
    expect(eml.html).toContain("Hello Ann &lt;3");
  });

  it("onWarning hears of an item field that a template also uses as a variable (name is the sender's display name), once", async () => {
    const warnings: string[] = [];
    const r = await sendBatch(
      [
        { to: "ann@example.com", name: "Ann" },
        { to: "bob@example.com", name: "Bob" },
      ],
      {
        ...rest,
        ...state(),
        check: true,
        template: { from: "Billing <ci@example.com>", subject: "Hi {{name}}", text: "x" },
        onWarning: (w) => warnings.push(w),
      },
    );
    expect(r.summary.invalid).toBe(0);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/name/);
    expect(warnings[0]).toContain("{{name}} in template.subject");
  });

  it("a missing template variable names the template option, not a CLI flag", async () => {
    const r = await sendBatch([{ to: "ann@example.com" }], {
      ...rest,
      ...state(),
      check: true,
      template: { from: "ci@example.com", subject: "x", html: "<p>{{first_name}}</p>" },
    });
    expect(r.summary.invalid).toBe(1);
    expect(r.results[0]!.error!.message).toMatch(/template\.html: no value for \{\{first_name\}\}/);
  });

  it("keeps a journal: a second run skips what was sent", async () => {
    const journal = join(tmp.dir, "api.journal");
    const list = items(3);
    const first = await sendBatch(list, { ...rest, ...state(), journal });
    expect(first.summary).toMatchObject({ sent: 3, journal });
    expect(readFileSync(journal, "utf8").split("\n").filter(Boolean).length).toBe(1 + 6);
    const second = await sendBatch(list, { ...rest, ...state(), journal });
    expect(second.summary).toMatchObject({ total: 3, sent: 0, skipped: 3, exitCode: 0 });
    expect(second.results.map((x) => x.messageId).sort()).toEqual(first.results.map((x) => x.messageId).sort());
  });

  it("other items with the same journal are a new batch: every one is sent, none taken for the old ones", async () => {
    const journal = join(tmp.dir, "api-changed.journal");
    const a = [
      { to: "a1@example.com", subject: "journal a1", text: "x" },
      { to: "a2@example.com", subject: "journal a2", text: "x" },
    ];
    const b = [
      { to: "b1@example.com", subject: "journal b1", text: "x" },
      { to: "b2@example.com", subject: "journal b2", text: "x" },
      { to: "b3@example.com", subject: "journal b3", text: "x" },
    ];
    const opts = { ...rest, ...state(), journal, template: { from: "ci@example.com" } };
    expect((await sendBatch(a, opts)).summary).toMatchObject({ sent: 2, skipped: 0 });
    expect((await sendBatch(b, opts)).summary).toMatchObject({ total: 3, sent: 3, skipped: 0 });
    // The same items again: this time they are the journal's, and skipped.
    expect((await sendBatch(b, opts)).summary).toMatchObject({ total: 3, sent: 0, skipped: 3 });
  });

  it("check: validates without a key and sends nothing", async () => {
    const before = (await sb.messages()).length;
    const r = await sendBatch([msg(), msg({ to: "bad" })], { check: true });
    expect(r.summary).toMatchObject({ total: 2, sent: 0, invalid: 1, exitCode: 65 });
    expect((await sb.messages()).length).toBe(before);
  });

  it("failures are results, not rejections: a wrong key gives every item 77", async () => {
    const r = await sendBatch(items(2), { ...rest, ...state(), apiKey: "msk_wrong_batch" });
    expect(r.summary).toMatchObject({ failed: 2, exitCode: 77 });
    expect(r.results[0]!.error).toMatchObject({ code: "auth_failed", exitClass: "noperm" });
    // What to do about it, as send()'s rejection says, in the options' words.
    expect(r.results[0]!.error!.hint).toBe("Check apiKey (or apiKeyFile): the key is wrong or missing.");
  });

  it("rejects only when the batch cannot run (no key: 78)", async () => {
    const e = await failure(sendBatch(items(1), { baseUrl: sb.baseUrl }));
    expect(e.exitCode).toBe(78);
    expect((await failure(sendBatch(42 as never, rest))).exitCode).toBe(64);
    expect((await failure(sendBatch("not items" as never, rest))).exitCode).toBe(64);
    expect((await failure(sendBatch([], { ...rest, concurrency: 0 }))).exitCode).toBe(64);
  });

  it("an aborted signal stops it: nothing more starts, exit 75", async () => {
    const ac = new AbortController();
    const r = await sendBatch(items(20), {
      ...rest,
      ...state(),
      concurrency: 1,
      signal: ac.signal,
      onResult: (x) => x.status === "sent" && ac.abort(),
    });
    expect(r.summary.aborted).toBe(true);
    expect(r.summary.exitCode).toBe(75);
    expect(r.summary.sent).toBeLessThan(20);
  });

  it("collectResults: false keeps no results; an onResult that throws rejects with its own error", async () => {
    const r = await sendBatch(items(2), { ...rest, ...state(), collectResults: false });
    expect(r.results).toEqual([]);
    expect(r.summary.sent).toBe(2);
    const boom = new Error("caller's bug");
    await expect(
      sendBatch(items(1), {
        ...rest,
        ...state(),
        onResult: () => {
          throw boom;
        },
      }),
    ).rejects.toBe(boom);
  });
});

describe("createSandbox()", () => {
  it("starts on free ports in a temporary dir and removes it on close", async () => {
    const s = await createSandbox();
    const { existsSync } = await import("node:fs");
    expect(s.smtp.port).toBeGreaterThan(0);
    expect(s.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s.apiKey).toMatch(/^msk_/);
    expect(readFileSync(s.caFile, "utf8")).toMatch(/BEGIN CERTIFICATE/);
    expect(s.env.MAILSEND_BASE_URL).toBe(s.baseUrl);
    expect(existsSync(s.dir)).toBe(true);
    await s.close();
    await s.close();
    expect(existsSync(s.dir)).toBe(false);
  });

  it("keeps a given dir, and its key, across restarts", async () => {
    const dir = join(tmp.dir, "kept");
    const a = await createSandbox({ dir, rateLimit: 5, rateWindowMs: 2000 });
    const key = a.apiKey;
    expect(a.options()).toMatchObject({ rateLimit: 5, rateWindowMs: 2000 });
    await send(msg(), { ...a.options(), ...state() });
    await a.close();
    const b = await createSandbox({ dir });
    expect(b.apiKey).toBe(key);
    expect((await b.messages()).length).toBe(1);
    await b.close();
  });

  it("refuses a second sandbox on a data dir this process's first still runs on (78), and starts one there once it is closed", async () => {
    const dir = join(tmp.dir, "twice");
    const a = await createSandbox({ dir });
    try {
      const e = await failure(createSandbox({ dir }));
      expect(e).toMatchObject({ code: "config_invalid", exitCode: 78 });
      expect(e.message).toContain(dir);
      expect(e.hint).toBe("Close it first, or give this one its own options.dir.");
      // The first is untouched: it still takes mail and lists it.
      await send(msg({ subject: "to the first" }), { ...a.options(), ...state() });
      expect((await a.messages()).map((m) => m.subject)).toContain("to the first");
    } finally {
      await a.close();
    }
    const b = await createSandbox({ dir });
    expect((await b.messages()).length).toBe(1);
    await b.close();
  });

  it("a data dir that cannot be made names options.dir (78)", async () => {
    const file = join(tmp.dir, "a-file");
    (await import("node:fs")).writeFileSync(file, "");
    const e = await failure(createSandbox({ dir: join(file, "sb") }));
    expect(e).toMatchObject({
      code: "config_invalid",
      exitCode: 78,
      hint: "Give options.dir a directory you can write to.",
    });
  });

  it("a busy port is a configuration error (78)", async () => {
    const e = await failure(createSandbox({ httpPort: Number(new URL(sb.baseUrl).port) }));
    expect(e.exitCode).toBe(78);
    // In the options' words, not `mailsend sandbox`'s flags.
    expect(e.hint).toBe("Choose another with options.httpPort, or 0 for any free port.");
  });
});

describe("no process-wide side effects", () => {
  it("prints nothing, exits nothing, adds no listeners, even when sending fails", async () => {
    const out = vi.spyOn(process.stdout, "write");
    const err = vi.spyOn(process.stderr, "write");
    const exit = vi.spyOn(process, "exit").mockImplementation(() => {
      throw new Error("process.exit called");
    });
    const warn = vi.spyOn(process, "emitWarning");
    const events = ["SIGINT", "SIGTERM", "exit", "uncaughtException", "unhandledRejection", "beforeExit"] as const;
    const before = events.map((e) => process.listenerCount(e));
    const exitCode = process.exitCode;
    try {
      const s = await createSandbox();
      await send(msg(), { ...s.options(), ...state() });
      await send(msg({ cc: "c@example.com" }), { ...s.options("smtp"), ...state() });
      await failure(send(msg(), { ...s.options(), ...state(), apiKey: "msk_wrong" }));
      await failure(send(msg({ to: "bad" }), s.options()));
      await failure(send(msg(), { baseUrl: "http://127.0.0.1:1", apiKey: "msk_x", retries: 0, ...state() }));
      await sendBatch([msg(), msg({ to: "bad" })], { ...s.options(), ...state() });
      await s.close();
      expect(out).not.toHaveBeenCalled();
      expect(err).not.toHaveBeenCalled();
      expect(exit).not.toHaveBeenCalled();
      expect(warn).not.toHaveBeenCalled();
      expect(events.map((e) => process.listenerCount(e))).toEqual(before);
      expect(process.exitCode).toBe(exitCode);
    } finally {
      out.mockRestore();
      err.mockRestore();
      exit.mockRestore();
      warn.mockRestore();
    }
  });
});
