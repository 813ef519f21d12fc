/**
 * International addresses, the built CLI against real
 * smtp-server instances, one that offers SMTPUTF8 and one that does not,
 * and the sandbox over REST: IDN domains go as punycode everywhere, a
 * non-ASCII local part goes only with SMTPUTF8 (else 65 before a single
 * envelope command), display names and subjects are RFC 2047 over SMTP.
 * The sandbox records the envelope as it came over the wire.
 */
import type { AddressInfo } from "node:net";
import { format } from "node:util";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, stderrJson, stdoutJson } from "../helpers/cli.js";
import { inProcessSandbox, parseEml, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { headerSection } from "../helpers/smtp-sink.js";

const KEY = "msk_test_e2e_intl_Xk2Vb7";

interface Received {
  mailFrom: string;
  mailArgs: Record<string, unknown>;
  rcptTo: string[];
  raw: Buffer;
}

interface Server {
  port: number;
  /** MAIL FROM commands seen, accepted or not. */
  mailFroms: string[];
  /** The client's commands as they came over the wire (smtp-server shows IDN domains decoded elsewhere). */
  commands: string[];
  messages: Received[];
  reset(): void;
  close(): Promise<void>;
}

let t: TestSandbox;
let utf8: Server;
let ascii: Server;
let caFile: string;

async function server(offerSmtpUtf8: boolean, tls: { key: string; cert: string }): Promise<Server> {
  const mailFroms: string[] = [];
  const messages: Received[] = [];
  const commands: string[] = [];
  const log = (_meta: unknown, ...args: unknown[]) => {
    const line = format(...(args as [string]));
    if (line.startsWith("C:")) commands.push(line.slice(2).trim());
  };
  const s = new SMTPServer({
    key: tls.key,
    cert: tls.cert,
    hideSMTPUTF8: !offerSmtpUtf8,
    authMethods: ["LOGIN", "PLAIN"],
    disableReverseLookup: true,
    logger: { info: log, debug: log, error: log, warn: log, trace: log, fatal: log, child: () => undefined } as never,
    onAuth(auth, _session, cb) {
      if (auth.username === "mailsend" && auth.password === KEY) cb(null, { user: "mailsend" });
      else cb(new Error("5.7.8 bad credentials"));
    },
    onMailFrom(address, _session, cb) {
      mailFroms.push(address.address);
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const from = session.envelope.mailFrom;
        messages.push({
          mailFrom: from ? from.address : "",
          mailArgs: (from ? (from.args as Record<string, unknown>) : undefined) || {},
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        });
        cb(null, "2.0.0 queued");
      });
    },
  });
  s.on("error", () => {});
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()));
  return {
    port: (s.server.address() as AddressInfo).port,
    mailFroms,
    commands,
    messages,
    reset() {
      commands.length = 0;
      mailFroms.length = 0;
      messages.length = 0;
    },
    close: () => new Promise<void>((resolve) => s.close(() => resolve())),
  };
}

beforeAll(async () => {
  t = await inProcessSandbox();
  const tls = await t.scratch.tls();
  caFile = tls.caPath;
  [utf8, ascii] = await Promise.all([server(true, tls), server(false, tls)]);
});

afterAll(async () => {
  await Promise.all([utf8?.close(), ascii?.close()]);
  await t?.stop();
  t?.scratch.remove();
});

beforeEach(() => {
  utf8.reset();
  ascii.reset();
});

function via(s: Server, args: string[]) {
  return runInProcess(
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(s.port),
      "--ca-file",
      caFile,
      "--json",
      ...args,
    ],
    {
      env: { MAILSEND_API_KEY: KEY },
    },
  );
}

const NAMED = ["-f", "Jörg Müller <ci@example.com>", "-s", "Grüße aus Köln 📈", "--text", "hallo"];

describe("IDN domains", () => {
  for (const which of ["offers SMTPUTF8", "does not offer SMTPUTF8"] as const) {
    it(`go as punycode in the envelope and the headers (server ${which}); names and subject RFC 2047`, async () => {
      const s = which === "offers SMTPUTF8" ? utf8 : ascii;
      const r = await via(s, [...NAMED, "-t", "Änne <user@bücher.example>"]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(stdoutJson(r).recipients).toEqual(["user@xn--bcher-kva.example"]);
      const m = s.messages[0]!;
      expect(s.commands).toContain("RCPT TO:<user@xn--bcher-kva.example>");
      expect(s.commands.find((c) => c.startsWith("MAIL FROM"))).toBe("MAIL FROM:<ci@example.com>");
      expect(m.mailArgs.SMTPUTF8).toBeUndefined();
      const head = headerSection(m.raw);
      // Nothing but ASCII in the header section: encoded words for the names and the subject.
      expect(/^[\x00-\x7f]*$/.test(head)).toBe(true);
      expect(head).toMatch(/^Subject: =\?UTF-8\?[QB]\?/im);
      expect(head).toMatch(/^From: =\?UTF-8\?[QB]\?.+\?= <ci@example\.com>/im);
      const email = await parseEml(m.raw);
      expect(email.subject).toBe("Grüße aus Köln 📈");
      expect(email.from).toEqual({ name: "Jörg Müller", address: "ci@example.com" });
      expect(email.to).toEqual([{ name: "Änne", address: "user@xn--bcher-kva.example" }]);
    });
  }

  it("over REST: punycode in the request, names and subject as UTF-8 JSON", async () => {
    const r = await runInProcess(
      [
        "send",
        "--transport",
        "rest",
        "--json",
        ...NAMED.slice(0, 4),
        "--html",
        "<p>hallo</p>",
        "-t",
        "Änne <user@bücher.example>",
      ],
      { env: t.env },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const m = (await t.sb.store.list({ limit: 1 }))[0]!;
    expect(m.channel).toBe("rest");
    // What the JSON said (the CLI puts A-labels in it); nothing to decode beside it.
    expect(m.envelope).toEqual({ from: "ci@example.com", to: ["user@xn--bcher-kva.example"] });
    expect(m.envelopeUnicode).toBeUndefined();
    const email = await parseEml((await t.sb.store.raw(m.id))!);
    expect(email.to).toEqual([{ name: "Änne", address: "user@xn--bcher-kva.example" }]);
    expect(email.subject).toBe("Grüße aus Köln 📈");
  });
});

describe("the sandbox over SMTP keeps the envelope as sent", () => {
  it("the CLI's A-labels, with the Unicode form beside them", async () => {
    const r = await runInProcess(
      ["send", "--transport", "smtp", "--json", ...NAMED, "-t", "Änne <user@bücher.example>"],
      {
        env: t.env,
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const m = (await t.sb.store.list({ limit: 1 }))[0]!;
    expect(m.channel).toBe("smtp");
    expect(m.envelope).toEqual({ from: "ci@example.com", to: ["user@xn--bcher-kva.example"] });
    expect(m.envelopeUnicode).toEqual({ from: "ci@example.com", to: ["user@bücher.example"] });
  });

  it("each address as its client wrote it: A-labels, U-labels, parameters after it", async () => {
    const d = await SmtpDialog.connect(t.sb.ports.smtp);
    try {
      await d.cmd("EHLO test");
      await d.starttls(t.sb.tls.ca);
      await d.cmd("EHLO test");
      expect(await d.login("mailsend", t.key)).toMatch(/^235/);
      expect(await d.cmd("MAIL FROM:<ops@xn--mnchen-3ya.example>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<user@xn--bcher-kva.example>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<other@bücher.example>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<plain@example.com> NOTIFY=NEVER")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      const r = await d.cmd("Subject: wire\r\n\r\nhallo\r\n.");
      expect(r).toMatch(/^250 .*queued as [0-9a-z]{18}/);
      const m = (await t.sb.store.get(/queued as ([0-9a-z]{18})/.exec(r)![1]!))!;
      expect(m.envelope).toEqual({
        from: "ops@xn--mnchen-3ya.example",
        to: ["user@xn--bcher-kva.example", "other@bücher.example", "plain@example.com"],
      });
      expect(m.envelopeUnicode).toEqual({
        from: "ops@münchen.example",
        to: ["user@bücher.example", "other@bücher.example", "plain@example.com"],
      });
    } finally {
      await d.quit();
    }
  });
});

describe("a non-ASCII local part", () => {
  it("goes with SMTPUTF8 to a server that offers it, as written", async () => {
    const r = await via(utf8, [...NAMED, "-t", "jürgen@example.de"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const m = utf8.messages[0]!;
    expect(m.mailArgs.SMTPUTF8).toBe(true);
    expect(m.rcptTo).toEqual(["jürgen@example.de"]);
    expect(utf8.commands.find((c) => c.startsWith("MAIL FROM"))).toBe("MAIL FROM:<ci@example.com> SMTPUTF8");
    expect((await parseEml(m.raw)).to).toEqual([{ name: "", address: "jürgen@example.de" }]);
  });

  it("is refused (65) before anything is sent to a server that does not offer SMTPUTF8: never mangled", async () => {
    const r = await via(ascii, [...NAMED, "-t", "dev@example.com, jürgen@example.de"]);
    expect(r.exitCode).toBe(65);
    const e = stderrJson(r).error;
    expect(e.code).toBe("invalid_address");
    expect(e.message).toContain("jürgen@example.de");
    expect(e.message).toContain("SMTPUTF8");
    expect(e.message).toContain("nothing was sent");
    expect(ascii.mailFroms).toEqual([]);
    expect(ascii.messages).toEqual([]);
  });

  it("a non-ASCII sender is checked the same way", async () => {
    const r = await via(ascii, ["-f", "jörg@example.de", "-t", "dev@example.com", "-s", "x", "--text", "x"]);
    expect(r.exitCode).toBe(65);
    expect(stderrJson(r).error.message).toContain("jörg@example.de");
    expect(ascii.mailFroms).toEqual([]);
  });
});
