/**
 * `-v` over SMTP, against the sandbox: the trace is the SMTP exchange itself (with AUTH's secret
 * redacted), none of nodemailer's remarks about it; and the outbox says why a message went over
 * SMTP in words true of that message.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Outbox } from "../../src/outbox/store.js";
import { runCli } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let sb: TestSandbox;
useSandbox((v) => (sb = v));

// What nodemailer logs about itself; none of it is a line either side sent.
const CHATTER = [
  /Creating transport/,
  /Sending mail using/,
  /Using \d+ plugins/,
  /Sending message/,
  /Connection established/,
  /handshake finished/,
  /authenticated/,
  /bytes encoded mime message/,
  /Closing connection/,
  /upgraded with STARTTLS/,
];

function expectExchangeOnly(stderr: string) {
  for (const line of [
    /^EHLO /m,
    /^STARTTLS$/m,
    /^AUTH LOGIN$/m,
    /^235 /m,
    /^MAIL FROM:<cron@example\.com>/m,
    /^RCPT TO:<dev@example\.com>/m,
    /^DATA$/m,
    /^354 /m,
    /^250 2\.0\.0 /m,
  ])
    expect(stderr).toMatch(line);
  for (const chatter of CHATTER) expect(stderr).not.toMatch(chatter);
  // The key is the SMTP password: neither it nor its base64 form is shown.
  expect(stderr).not.toContain(sb.key);
  expect(stderr).not.toContain(Buffer.from(sb.key).toString("base64"));
}

describe("-v over SMTP", () => {
  it("send shows the exchange, not the library's chatter", async () => {
    const r = await runCli(
      [
        "send",
        "--transport",
        "smtp",
        "-v",
        "-f",
        "cron@example.com",
        "-t",
        "dev@example.com",
        "-s",
        "trace-send",
        "--text",
        "disk 91% full",
      ],
      { env: sb.env },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expectExchangeOnly(r.stderr);
  });

  it("queue run: a text body with a PNG attachment goes over SMTP for its text, said as such; the trace is the exchange", async () => {
    const dir = join(sb.scratch.dir, "outbox-png");
    const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex").toString("base64");
    const raw = [
      "From: Cron <cron@example.com>",
      "To: dev@example.com",
      "Subject: trace-png",
      "Date: Tue, 24 Nov 2026 10:00:00 +0000",
      "Message-ID: <trace-png@example.com>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="B"',
      "",
      "--B",
      "Content-Type: text/plain; charset=utf-8",
      "",
      "the chart is attached",
      "--B",
      "Content-Type: image/png",
      'Content-Disposition: attachment; filename="chart.png"',
      "Content-Transfer-Encoding: base64",
      "",
      png,
      "--B--",
      "",
    ].join("\r\n");
    await new Outbox(dir).add({
      raw: Buffer.from(raw),
      envelope: { from: "cron@example.com", to: ["dev@example.com"] },
      idempotencyKey: "trace-png",
      source: "sendmail",
      subject: "trace-png",
    });
    const r = await runCli(["queue", "run", "-v"], {
      env: { ...sb.env, MAILSEND_OUTBOX_DIR: dir, MAILSEND_QUEUE_AUTORUN: "0" },
      timeoutMs: 60_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      / sent \S+ \S+ \(smtp: a plain-text body without HTML, beside an attachment, to dev@example\.com\)$/m,
    );
    expect(r.stdout).not.toContain("text-only");
    expectExchangeOnly(r.stderr);
  }, 60_000);
});
