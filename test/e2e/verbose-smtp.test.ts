/**
 * `-v` over SMTP, against the sandbox: the trace is the SMTP exchange itself (with AUTH's secret
 * redacted), none of nodemailer's remarks about it.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let sb: TestSandbox;
useSandbox((v) => (sb = v));

// What nodemailer logs about itself; none of it is a line either side sent.
const CHATTER = [/Creating transport/, /Sending mail using/, /Using \d+ plugins/, /Sending message/, /Connection established/, /handshake finished/, /authenticated/, /bytes encoded mime message/, /Closing connection/, /upgraded with STARTTLS/];

function expectExchangeOnly(stderr: string) {
  for (const line of [/^EHLO /m, /^STARTTLS$/m, /^AUTH LOGIN$/m, /^235 /m, /^MAIL FROM:<cron@example\.com>/m, /^RCPT TO:<dev@example\.com>/m, /^DATA$/m, /^354 /m, /^250 2\.0\.0 /m]) expect(stderr).toMatch(line);
  for (const chatter of CHATTER) expect(stderr).not.toMatch(chatter);
  // The key is the SMTP password: neither it nor its base64 form is shown.
  expect(stderr).not.toContain(sb.key);
  expect(stderr).not.toContain(Buffer.from(sb.key).toString("base64"));
}

describe("-v over SMTP", () => {
  it("send shows the exchange, not the library's chatter", async () => {
    const r = await runCli(["send", "--transport", "smtp", "-v", "-f", "cron@example.com", "-t", "dev@example.com", "-s", "trace-send", "--text", "disk 91% full"], { env: sb.env });
    expect(r.exitCode, r.stderr).toBe(0);
    expectExchangeOnly(r.stderr);
  });
});
