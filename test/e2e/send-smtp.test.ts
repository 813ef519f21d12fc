/**
 * `mailsend send --transport smtp`, the built binary against smtp-server
 * sinks in the service's two roles (587 STARTTLS, 465 implicit TLS): what
 * the server received, parsed back, and how each server answer maps to an
 * exit code.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeWords } from "postal-mime";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCli, runInProcess, stdoutJson, type RunOptions } from "../helpers/cli.js";
import { headerSection, parseMessage, startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_smtp_Hq3Vn8Rk";
const tmp = scratch();
let caPath: string;
let starttls: SmtpSink;
let implicit: SmtpSink;
let plainOnly: SmtpSink;

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  [starttls, implicit, plainOnly] = await Promise.all([
    startSmtpSink({ mode: "starttls", tls, key: KEY }),
    startSmtpSink({ mode: "implicit", tls, key: KEY }),
    startSmtpSink({ mode: "starttls", tls, key: KEY, authMethods: ["PLAIN"] }),
  ]);
});
afterAll(async () => {
  await Promise.all([starttls?.close(), implicit?.close(), plainOnly?.close()]);
  tmp.remove();
});
beforeEach(() => {
  starttls.reset();
  implicit.reset();
  plainOnly.reset();
});

function smtp(
  sink: SmtpSink,
  args: string[],
  opts: RunOptions & { mode?: "starttls" | "implicit"; ca?: boolean } = {},
) {
  // NODE_EXTRA_CA_CERTS is read when Node starts: with it, the CLI runs as a process.
  return (opts.env?.NODE_EXTRA_CA_CERTS ? runCli : runInProcess)(
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--smtp-tls",
      opts.mode ?? sink.mode,
      ...(opts.ca === false ? [] : ["--ca-file", caPath]),
      ...args,
    ],
    { ...opts, env: { MAILSEND_API_KEY: KEY, ...opts.env } },
  );
}

const MIN = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--text", "hello"];

function nothingDelivered(...sinks: SmtpSink[]) {
  for (const s of sinks) expect(s.messages).toHaveLength(0);
}

describe("a full message over STARTTLS (587 role)", () => {
  it("arrives with TLS, AUTH LOGIN, the envelope and every header as given", async () => {
    const pdf = randomBytes(70_001);
    const pdfPath = tmp.file("bericht.pdf", pdf);
    const small = tmp.file("notes.txt", "plain notes\n");
    const r = await smtp(starttls, [
      "--from",
      "Jürgen Müller <j@example.de>",
      "--to",
      '"Doe, John" <john@example.com>, carol@example.com',
      "--cc",
      "Dave <dave@example.com>",
      "--bcc",
      "secret@example.com",
      "--bcc",
      "Hidden Person <hidden@example.com>",
      "--reply-to",
      "Help Desk <help@example.com>",
      "--subject",
      "Grüße aus Köln — Q3 📈",
      "--text",
      "Numbers are up.\nSee attachment.",
      "--html",
      "<p>Numbers are <b>up</b>.</p>",
      "--attach",
      `${pdfPath}#Bericht für Q3 — Übersicht.pdf`,
      "--attach",
      small,
      "--header",
      "X-Campaign: q3-report",
      "--header",
      "X-Note: naïve",
      "--idempotency-key",
      "smtp-idem-1",
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(starttls.messages).toHaveLength(1);
    const got = starttls.messages[0]!;
    expect(got.secure).toBe(true);
    expect(got.authMethod).toBe("LOGIN");
    expect(got.user).toBe("mailsend");
    expect(starttls.auths).toEqual([{ method: "LOGIN", username: "mailsend", ok: true, secure: true }]);
    expect(got.mailFrom).toBe("j@example.de");
    expect(got.rcptTo).toEqual([
      "john@example.com",
      "carol@example.com",
      "dave@example.com",
      "secret@example.com",
      "hidden@example.com",
    ]);

    const head = headerSection(got.raw);
    expect(head).not.toMatch(/^bcc:/im);
    expect(got.raw.toString("latin1")).not.toContain("secret@example.com");
    expect(got.raw.toString("latin1")).not.toContain("hidden@example.com");
    expect(head).toMatch(/^X-Idempotency-Key: smtp-idem-1$/m);

    const mail = await parseMessage(got.raw);
    expect(mail.subject).toBe("Grüße aus Köln — Q3 📈");
    expect(mail.from).toEqual({ name: "Jürgen Müller", address: "j@example.de" });
    expect(mail.to).toEqual([
      { name: "Doe, John", address: "john@example.com" },
      { name: "", address: "carol@example.com" },
    ]);
    expect(mail.cc).toEqual([{ name: "Dave", address: "dave@example.com" }]);
    expect(mail.bcc ?? []).toEqual([]);
    expect(mail.replyTo).toEqual([{ name: "Help Desk", address: "help@example.com" }]);
    expect(mail.text?.trim()).toBe("Numbers are up.\nSee attachment.");
    expect(mail.html?.trim()).toBe("<p>Numbers are <b>up</b>.</p>");
    const header = (k: string) => mail.headers.find((h) => h.key === k)?.value;
    expect(header("x-campaign")).toBe("q3-report");
    expect(mail.headers.filter((h) => h.key === "x-note")).toHaveLength(1);
    expect(decodeWords(header("x-note")!)).toBe("naïve");
    expect(mail.headers.filter((h) => h.key === "x-idempotency-key")).toHaveLength(1);
    expect(mail.messageId).toMatch(/^<.+@.+>$/);

    expect(mail.attachments.map((a) => a.filename)).toEqual(["Bericht für Q3 — Übersicht.pdf", "notes.txt"]);
    expect(Buffer.from(mail.attachments[0]!.content as ArrayBuffer).equals(pdf)).toBe(true);
    expect(mail.attachments[0]!.mimeType).toBe("application/pdf");
    expect(Buffer.from(mail.attachments[1]!.content as ArrayBuffer).toString()).toBe("plain notes\n");
    expect(mail.attachments[1]!.mimeType).toBe("text/plain");

    expect(r.stdout).toMatch(
      /^sent <.+> \(smtp, to john@example\.com, carol@example\.com, dave@example\.com, secret@example\.com, hidden@example\.com\)\n$/,
    );
  });

  it("a text-only message is text/plain; an HTML-only message gets a text part made from it (multipart/alternative)", async () => {
    const a = await smtp(starttls, [...MIN]);
    expect(a.exitCode).toBe(0);
    const m1 = await parseMessage(starttls.messages[0]!.raw);
    expect(m1.text?.trim()).toBe("hello");
    expect(m1.html).toBeUndefined();
    expect(headerSection(starttls.messages[0]!.raw)).toMatch(/^Content-Type: text\/plain/im);
    const b = await smtp(starttls, ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--html", "<i>x</i>"]);
    expect(b.exitCode).toBe(0);
    expect(headerSection(starttls.messages[1]!.raw)).toMatch(/^Content-Type: multipart\/alternative/im);
    const m2 = await parseMessage(starttls.messages[1]!.raw);
    expect(m2.html?.trim()).toBe("<i>x</i>");
    expect(m2.text?.trim()).toBe("x");
  });

  it("a display name that looks like an address adds no recipient", async () => {
    const r = await smtp(starttls, [
      "-f",
      "a@example.com",
      "-t",
      '"x@evil.example, y@evil.example" <b@example.com>',
      "-s",
      "Hi",
      "--text",
      "x",
    ]);
    expect(r.exitCode).toBe(0);
    expect(starttls.messages[0]!.rcptTo).toEqual(["b@example.com"]);
    expect((await parseMessage(starttls.messages[0]!.raw)).to).toEqual([
      { name: "x@evil.example, y@evil.example", address: "b@example.com" },
    ]);
  });

  it("piped stdin is the HTML body over SMTP too", async () => {
    const r = await smtp(starttls, ["-f", "a@example.com", "-t", "b@example.com", "-s", "piped"], {
      input: "<h1>report</h1>",
    });
    expect(r.exitCode).toBe(0);
    expect((await parseMessage(starttls.messages[0]!.raw)).html?.trim()).toBe("<h1>report</h1>");
  });

  it("--json includes smtp_response and the Message-ID header", async () => {
    const r = await smtp(starttls, [...MIN, "-t", "c@example.com", "--json", "--idempotency-key", "k-smtp-json"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toBe("");
    const o = stdoutJson(r);
    const received = await parseMessage(starttls.messages[0]!.raw);
    expect(o).toStrictEqual({
      ok: true,
      transport: "smtp",
      message_id: received.messageId,
      recipients: ["b@example.com", "c@example.com"],
      idempotency_key: "k-smtp-json",
      attempts: 1,
      waited_ms: 0,
      smtp_response: expect.stringMatching(/^250 2\.0\.0 Ok: queued as SINK1/),
    });
  });

  it("--smtp-user changes the username", async () => {
    const r = await smtp(starttls, [...MIN, "--smtp-user", "someone-else"]);
    expect(r.exitCode).toBe(77);
    expect(starttls.auths[0]).toMatchObject({ username: "someone-else", ok: false });
    const e = await smtp(starttls, [...MIN], { env: { MAILSEND_SMTP_USER: "mailsend" } });
    expect(e.exitCode).toBe(0);
  });

  it("--dry-run prints the MIME message and the envelope, sends nothing", async () => {
    const r = await smtp(starttls, [...MIN, "--bcc", "hidden@example.com", "--dry-run"]);
    expect(r.exitCode).toBe(0);
    expect(starttls.connections).toBe(0);
    expect(r.stdout).toContain("password [redacted]");
    expect(r.stdout).toContain("MAIL FROM:<a@example.com>");
    expect(r.stdout).toContain("RCPT TO:<hidden@example.com>");
    expect(r.stdout).toMatch(/^Subject: Hi\r?$/m);
    expect(r.stdout).not.toMatch(/^Bcc:/im);
    const j = await smtp(starttls, [...MIN, "--dry-run", "--json"]);
    expect(j.exitCode).toBe(0);
    expect(stdoutJson(j)).toMatchObject({
      dry_run: true,
      transport: "smtp",
      envelope: { from: "a@example.com", to: ["b@example.com"] },
    });
    expect(starttls.connections).toBe(0);
  });
});

describe("implicit TLS (465 role) and AUTH PLAIN", () => {
  it("implicit TLS delivers with TLS on from the start", async () => {
    const r = await smtp(implicit, [...MIN, "-s", "Implicit ✓"]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(implicit.messages).toHaveLength(1);
    expect(implicit.messages[0]).toMatchObject({
      secure: true,
      authMethod: "LOGIN",
      user: "mailsend",
      mailFrom: "a@example.com",
      rcptTo: ["b@example.com"],
    });
    expect((await parseMessage(implicit.messages[0]!.raw)).subject).toBe("Implicit ✓");
  });

  it("AUTH PLAIN is used when LOGIN is not offered", async () => {
    const r = await smtp(plainOnly, [...MIN]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(plainOnly.messages).toHaveLength(1);
    expect(plainOnly.messages[0]).toMatchObject({ authMethod: "PLAIN", user: "mailsend", secure: true });
  });
});

describe("--eml over SMTP", () => {
  const lines = [
    "From: Sender <sender@example.com>",
    "To: One <one@example.com>",
    "Cc: two@example.com",
    "Bcc: blind@example.com,",
    " Blind Two <blind2@example.com>",
    "Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=",
    "Message-ID: <eml-test-1@example.com>",
    "Date: Sun, 22 Nov 2026 10:00:00 +0000",
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: 8bit",
    "",
    "Hallo Welt, schöne Grüße.",
    "Bcc: this is body text",
    "",
  ];

  it("is sent as is, without Bcc, to the envelope of its headers", async () => {
    const raw = Buffer.from(lines.join("\r\n"));
    const eml = tmp.file("msg.eml", raw);
    const r = await smtp(starttls, ["--eml", eml, "--idempotency-key", "eml-smtp-1", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const got = starttls.messages[0]!;
    expect(got.mailFrom).toBe("sender@example.com");
    expect(got.rcptTo).toEqual(["one@example.com", "two@example.com", "blind@example.com", "blind2@example.com"]);
    const expected = Buffer.from(
      [
        "X-Idempotency-Key: eml-smtp-1",
        ...lines.filter((l) => !l.startsWith("Bcc: blind") && !l.startsWith(" Blind Two")),
      ].join("\r\n"),
    );
    // smtp-server hands over the DATA with the final CRLF it needs.
    expect(got.raw.toString("utf8").replace(/\r\n$/, "")).toBe(expected.toString("utf8").replace(/\r\n$/, ""));
    expect(stdoutJson(r)).toMatchObject({ message_id: "<eml-test-1@example.com>", idempotency_key: "eml-smtp-1" });
  });

  it("an LF-only .eml is still delivered, with Bcc stripped", async () => {
    const eml = tmp.file("lf.eml", lines.join("\n"));
    const r = await smtp(starttls, ["--eml", eml]);
    expect(r.exitCode).toBe(0);
    const got = starttls.messages[0]!;
    expect(got.raw.toString()).not.toContain("blind");
    expect(got.rcptTo).toContain("blind2@example.com");
    expect((await parseMessage(got.raw)).subject).toBe("Grüße");
  });

  it("an .eml without a Message-ID: the human line shows the server's reply instead of a blank id", async () => {
    const eml = tmp.file("no-id.eml", lines.filter((l) => !l.startsWith("Message-ID:")).join("\r\n"));
    const r = await smtp(starttls, ["--eml", eml]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^sent \(no Message-ID; the server said: 250 .*\) \(smtp, to /);
  });

  it("--eml - reads the message from stdin", async () => {
    const r = await smtp(starttls, ["--eml", "-"], { input: lines.join("\r\n") });
    expect(r.exitCode).toBe(0);
    expect(starttls.messages[0]!.rcptTo).toHaveLength(4);
  });
});

describe("TLS problems are configuration errors (78) with a hint", () => {
  it("implicit TLS against the STARTTLS port", async () => {
    const r = await smtp(starttls, MIN, { mode: "implicit" });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/hint:.*starttls/i);
    expect(r.stderr).not.toMatch(/wrong version number|ssl3_|SSL routines/i);
    nothingDelivered(starttls);
  });

  it("STARTTLS against the implicit-TLS port (with a short --timeout)", async () => {
    const r = await smtp(implicit, [...MIN, "--timeout", "1"], { mode: "starttls" });
    expect(r.exitCode).toBe(78);
    // Found by the TLS probe (after half the --timeout), or else by the 1 s greeting
    // limit — not by the 10 s default.
    expect(r.stderr).toMatch(/expects TLS from the first byte|no SMTP greeting within 1 s/);
    expect(r.stderr).toMatch(/hint:.*implicit/i);
    expect(r.stderr).not.toMatch(/ssl3_|SSL routines/i);
    nothingDelivered(implicit);
  });

  it("STARTTLS against the implicit-TLS port: found by a TLS probe, not by the 10 s greeting timeout", async () => {
    const r = await smtp(implicit, MIN, { mode: "starttls" });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/expects TLS from the first byte/);
    expect(r.stderr).toMatch(/hint:.*--smtp-tls implicit/);
    nothingDelivered(implicit);
  });

  it("an HTTP port given as the SMTP port: a configuration error (78) saying so, found by the probe", async () => {
    const web = createServer((_req, res) => res.end("ok"));
    await new Promise<void>((r) => web.listen(0, "127.0.0.1", r));
    try {
      const port = (web.address() as AddressInfo).port;
      const r = await runInProcess(
        [
          "send",
          "--transport",
          "smtp",
          "--smtp-host",
          "127.0.0.1",
          "--smtp-port",
          String(port),
          "--smtp-tls",
          "starttls",
          ...MIN,
        ],
        {
          env: { MAILSEND_API_KEY: KEY },
        },
      );
      expect(r.exitCode, r.stderr).toBe(78);
      expect(r.stderr).toMatch(/is an HTTP server, not SMTP submission/);
      expect(r.stderr).toMatch(/hint:.*--smtp-port/);
    } finally {
      web.closeAllConnections();
      await new Promise((r) => web.close(r));
    }
  });

  it("an untrusted certificate without --ca-file (STARTTLS and implicit)", async () => {
    for (const sink of [starttls, implicit]) {
      const r = await smtp(sink, MIN, { ca: false });
      expect(r.exitCode).toBe(78);
      expect(r.stderr).toMatch(/not trusted/);
      expect(r.stderr).toMatch(/hint:.*--ca-file/);
      expect(sink.auths).toHaveLength(0);
      nothingDelivered(sink);
    }
  });

  it("--insecure skips verification with a loud warning; --quiet still prints nothing else", async () => {
    const r = await smtp(implicit, [...MIN, "--insecure", "--quiet"], { ca: false });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^warning: --insecure/);
    expect(implicit.messages).toHaveLength(1);
  });

  it("NODE_EXTRA_CA_CERTS is trusted as well", async () => {
    const r = await smtp(starttls, MIN, { ca: false, env: { NODE_EXTRA_CA_CERTS: caPath } });
    expect(r.exitCode).toBe(0);
  });
});

describe("server answers -> exit codes", () => {
  it("535 (wrong key) -> 77", async () => {
    const r = await smtp(starttls, MIN, { env: { MAILSEND_API_KEY: "msk_test_wrong_key_000" } });
    expect(r.exitCode).toBe(77);
    expect(r.stderr).toMatch(/authentication failed/i);
    expect(r.stderr).toMatch(/hint:/);
    nothingDelivered(starttls);
  });

  it("535 with 'revoked' -> 77 with a revoked-key hint", async () => {
    starttls.script({ auth: { code: 535, message: "5.7.8 API key revoked" } });
    const r = await smtp(starttls, MIN, { env: { MAILSEND_API_KEY: "msk_test_whatever_1" } });
    expect(r.exitCode).toBe(77);
    expect(r.stderr).toMatch(/revoked/);
  });

  it.each([
    ["550 on RCPT", 65, { rcpt: { code: 550, message: "5.1.1 No such user" } }],
    ["553 on MAIL FROM", 65, { mailFrom: { code: 553, message: "5.7.1 Sender not allowed" } }],
    ["554 at the end of DATA", 65, { data: { code: 554, message: "5.7.1 Message rejected as spam" } }],
    ["552 at the end of DATA", 65, { data: { code: 552, message: "5.3.4 Message too big" } }],
    ["452 on RCPT", 75, { rcpt: { code: 452, message: "4.5.3 Too many recipients" } }],
    ["421 on RCPT", 75, { rcpt: { code: 421, message: "4.7.0 Try again later" } }],
    ["451 at the end of DATA", 75, { data: { code: 451, message: "4.3.0 Local error, try later" } }],
    [
      "450 rate limit on MAIL FROM",
      75,
      { mailFrom: { code: 450, message: "4.7.1 Rate limit exceeded, retry in 30 seconds" } },
    ],
  ] as const)("%s -> %i", async (_why, exit, script) => {
    starttls.script(script as never);
    const r = await smtp(starttls, [...MIN, "--json"]);
    expect(r.exitCode).toBe(exit);
    const err = JSON.parse(r.stderr.trim()).error;
    expect(err.exit).toBe(exit);
    expect(err.status).toBeGreaterThanOrEqual(400);
    expect(starttls.messages.filter((m) => m.accepted)).toHaveLength(0);
  });

  it("one refused recipient out of two is its own status (67) that names it", async () => {
    starttls.script({
      rcpt: (a) => (a === "bad@example.com" ? { code: 550, message: "5.1.1 No such user" } : undefined),
    });
    const r = await smtp(starttls, [...MIN, "-t", "bad@example.com"]);
    expect(r.exitCode).toBe(67);
    expect(r.stderr).toMatch(
      /refused 1 of 2 recipients: bad@example\.com \(550 5\.1\.1 No such user\); the message went to b@example\.com/,
    );
    expect(r.stderr).toMatch(/hint:.*send to those only/);
    expect(starttls.messages[0]?.rcptTo).toEqual(["b@example.com"]);
  });

  it("421 in the greeting (server busy) -> 75", async () => {
    starttls.script({ connect: { code: 421, message: "4.3.2 Too busy, try later" } });
    const r = await smtp(starttls, MIN);
    expect(r.exitCode).toBe(75);
    expect(r.stderr).toMatch(/hint:/);
    nothingDelivered(starttls);
  });

  it("a server that stalls before the message is handed over -> 75 (nothing sent)", async () => {
    // Loose bound on purpose (shared machine): the server would stall for 20 s. --timeout 3, not 1:
    // the greeting is under the same timeout, and a loaded machine's test server can take over 1 s
    // to greet (then the port looks silent: 78).
    starttls.script({ delayMs: { rcpt: 20_000 } });
    const t0 = Date.now();
    const r = await smtp(starttls, [...MIN, "--timeout", "3"]);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(r.exitCode).toBe(75);
    expect(r.stderr).toMatch(/nothing was sent/i);
    nothingDelivered(starttls);
  });

  it("a server that stalls after the message was handed over -> 76 (may have been sent)", async () => {
    // Loose bound on purpose (shared machine): the server would stall for 20 s. --timeout 3, not 1:
    // the greeting is under the same timeout, and a loaded machine's test server can take over 1 s
    // to greet (then the port looks silent: 78).
    starttls.script({ delayMs: { data: 20_000 } });
    const t0 = Date.now();
    const r = await smtp(starttls, [...MIN, "--timeout", "3"]);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(r.exitCode).toBe(76);
    expect(r.stderr).toMatch(/may have been sent/);
    expect(starttls.messages).toHaveLength(1);
  });

  it("connection refused (a closed port) -> 69", async () => {
    const closed = await startSmtpSink({ mode: "starttls", tls: await tmp.tls(), key: KEY });
    await closed.close();
    const r = await runInProcess(
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(closed.port),
        "--smtp-tls",
        "starttls",
        ...MIN,
      ],
      {
        env: { MAILSEND_API_KEY: KEY },
      },
    );
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/connection refused/);
    expect(r.stderr).toMatch(/hint:/);
  });
});
