/**
 * Exit codes that tell the truth: a failure before the message was
 * handed over is never 76 ("may have been sent"); a partial SMTP recipient
 * refusal is its own status (67), reported per recipient and never resent.
 * The built binary against real smtp-server instances on 127.0.0.1.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, stderrJson, type RunOptions } from "../helpers/cli.js";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_exit_truth_Pw6Hs2";
const tmp = scratch();
let sink: SmtpSink;
let caPath: string;
/** An SMTP server that does not know STARTTLS at all (as a port-25 relay without TLS). */
let plain: SMTPServer;
let plainPort: number;

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  sink = await startSmtpSink({ mode: "starttls", tls, key: KEY });
  plain = new SMTPServer({
    disabledCommands: ["STARTTLS"],
    hideSTARTTLS: true,
    authOptional: true,
    allowInsecureAuth: true,
    disableReverseLookup: true,
    logger: false,
    onData(stream, _s, cb) {
      stream.resume();
      stream.on("end", () => cb());
    },
  });
  await new Promise<void>((r) => plain.listen(0, "127.0.0.1", () => r()));
  plainPort = (plain.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await Promise.all([sink?.close(), new Promise<void>((r) => (plain ? plain.close(() => r()) : r()))]);
  tmp.remove();
});
beforeEach(() => sink.reset());

function smtp(args: string[], opts: RunOptions & { port?: number } = {}) {
  return runInProcess(
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(opts.port ?? sink.port),
      "--ca-file",
      caPath,
      ...args,
    ],
    {
      ...opts,
      env: { MAILSEND_API_KEY: KEY, ...opts.env },
    },
  );
}

const MSG = ["-f", "ci@example.com", "-s", "report", "--text", "x"];

describe("a failure before the hand-over is never 76", () => {
  it("a server without STARTTLS: 78 with a hint, as doctor says it; the key never sent", async () => {
    const r = await smtp([...MSG, "-t", "dev@example.com"], { port: plainPort });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(
      /^error: 127\.0\.0\.1:\d+ does not offer STARTTLS .*will not send the key in clear text$/m,
    );
    expect(r.stderr).toMatch(/^hint: Nothing was sent\. Use the service's submission port/m);
    const doc = await runInProcess(
      ["doctor", "--transport", "smtp", "--smtp-host", "127.0.0.1", "--smtp-port", String(plainPort)],
      { env: { MAILSEND_API_KEY: KEY } },
    );
    expect(doc.exitCode).toBe(78);
    expect(doc.stdout).toMatch(/^FAIL SMTP TLS +127\.0\.0\.1:\d+ does not offer STARTTLS/m);
  });

  it("an unexpected reply before DATA: 69, nothing sent, not 'may have been sent'", async () => {
    sink.script({ mailFrom: { code: 503, message: "5.5.1 Bad sequence of commands" } });
    const r = await smtp([...MSG, "-t", "dev@example.com", "--json"]);
    expect(r.exitCode).toBe(69);
    expect(stderrJson(r).error).toMatchObject({ code: "service_error", exit: 69 });
    expect(stderrJson(r).error.hint).toMatch(/^Nothing was sent/);
    expect(sink.messages).toHaveLength(0);
  });
});

describe("some recipients refused, the others accepted", () => {
  const refuse = (address: string) =>
    address.startsWith("gone") ? { code: 550, message: "5.1.1 No such user here" } : undefined;

  it("exit 67; the refused ones named with the server's reply; the message went once, to the others", async () => {
    sink.script({ rcpt: refuse });
    const r = await smtp([...MSG, "-t", "dev@example.com, gone@example.com, ops@example.com"], {
      env: { MAILSEND_RETRIES: "3" },
    });
    expect(r.exitCode).toBe(67);
    expect(r.stdout).toMatch(/^sent <[^>]+> \(smtp, to dev@example\.com, ops@example\.com only\)$/m);
    expect(r.stderr).toMatch(
      /^error: the server refused 1 of 3 recipients: gone@example\.com \(550 5\.1\.1 No such user here\); the message went to dev@example\.com, ops@example\.com$/m,
    );
    expect(r.stderr).toMatch(/^hint: Do not resend to everyone/m);
    // Never resent, whatever --retries says.
    expect(sink.messages).toHaveLength(1);
    expect(sink.messages[0]!.rcptTo).toEqual(["dev@example.com", "ops@example.com"]);
  });

  it("--json: the error object lists accepted and refused, with the message_id", async () => {
    sink.script({ rcpt: refuse });
    const r = await smtp([...MSG, "-t", "dev@example.com", "-t", "gone@example.com", "--json"]);
    expect(r.exitCode).toBe(67);
    expect(r.stdout).toBe("");
    const e = stderrJson(r).error as Record<string, unknown>;
    expect(e).toMatchObject({
      code: "recipients_refused",
      exit: 67,
      accepted: ["dev@example.com"],
      refused: [{ address: "gone@example.com", reply: "550 5.1.1 No such user here" }],
    });
    expect(e.message_id).toMatch(/^<.+@example\.com>$/);
  });

  it("everyone refused is still a refusal of the message (65)", async () => {
    sink.script({ rcpt: { code: 550, message: "5.1.1 No such user" } });
    const r = await smtp([...MSG, "-t", "gone@example.com"]);
    expect(r.exitCode).toBe(65);
  });

  it("batch: the item is 'partial', exit 67, and a re-run does not send it again", async () => {
    sink.script({ rcpt: refuse });
    const rows = tmp.file(
      "rows.jsonl",
      `${JSON.stringify({ to: "a@example.com, gone@example.com", subject: "one", text: "x" })}\n${JSON.stringify({ to: "b@example.com", subject: "two", text: "x" })}\n`,
    );
    const args = [
      "batch",
      rows,
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--ca-file",
      caPath,
      "-f",
      "ci@example.com",
      "--json",
    ];
    const r = await runInProcess(args, { env: { MAILSEND_API_KEY: KEY } });
    expect(r.exitCode).toBe(67);
    const items = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const first = items.find((i) => i.index === 0);
    expect(first).toMatchObject({
      status: "partial",
      recipients: ["a@example.com"],
      refused: [{ address: "gone@example.com" }],
      error: { code: "recipients_refused", exit: 67 },
    });
    expect(items.find((i) => i.index === 1)).toMatchObject({ status: "sent" });
    expect(r.stderr).toMatch(/"partial":1/);
    expect(sink.messages).toHaveLength(2);
    const again = await runInProcess(args, { env: { MAILSEND_API_KEY: KEY } });
    expect(again.exitCode).toBe(0);
    expect(sink.messages).toHaveLength(2);
  });
});
