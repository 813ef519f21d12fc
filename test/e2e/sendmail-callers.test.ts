/**
 * What real callers of sendmail and of the relay hand over, as a tester found it going wrong: an LF
 * message whose size passes only when its line ends are not counted as they go out (CRLF), an
 * address list with an empty element (RFC 5322 obs-addr-list), Resent- headers with -t, this
 * machine's setup problems answered as the message's fault, one bad recipient refusing the whole
 * message. The built binary (through a `sendmail` symlink, and `mailsend relay`) against the
 * sandbox on 127.0.0.1.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, BIN, mailsendCommand } from "../helpers/cli.js";
import { startRelayChild } from "../helpers/relay.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { headerSection } from "../helpers/smtp-sink.js";
import { lacks, python3 } from "../helpers/tools.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
let s: Scratch;
let sendmail: string;
let stateSeq = 0;

useSandbox((sb) => (t = sb), { rateLimit: 1_000_000 });
beforeAll(async () => {
  s = scratch("mailsend-sendmail-callers-");
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  symlinkSync(BIN, sendmail);
});
afterAll(async () => {
  s?.remove();
});

function freshState(): string {
  const d = join(s.dir, `state-${++stateSeq}`);
  mkdirSync(d);
  return d;
}

function env(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const e: Record<string, string | undefined> = {
    ...baseEnv(),
    ...t.env,
    MAILSEND_STATE_DIR: freshState(),
    MAILSEND_QUEUE_AUTORUN: "0",
    ...extra,
  };
  return Object.fromEntries(Object.entries(e).filter((kv): kv is [string, string] => kv[1] !== undefined));
}

interface Run {
  exitCode: number;
  stdout: string;
  stderr: string;
}

async function run(file: string, args: string[], input: string | Buffer, e: Record<string, string>): Promise<Run> {
  const r = await execa(file, args, {
    reject: false,
    extendEnv: false,
    env: e,
    cwd: s.dir,
    input,
    timeout: 60_000,
    stripFinalNewline: false,
    encoding: "utf8",
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout ?? ""), stderr: String(r.stderr ?? "") };
}

const sm = (args: string[], input: string | Buffer, e: Record<string, string> = env()) => run(sendmail, args, input, e);

function queued(e: Record<string, string>): string[] {
  const q = join(e.MAILSEND_STATE_DIR!, "outbox", "queue");
  return existsSync(q) ? readdirSync(q).filter((n) => n.endsWith(".msg")) : [];
}

async function stored(subject: string) {
  const all = await t.sb.store.list({ limit: 100_000 });
  return all.filter((m) => m.subject === subject);
}

/** A message of LF lines: `lines` body lines of 9 bytes ("xxxxxxxx\n"). */
function lfMessage(subject: string, lines: number): string {
  return `From: a@example.com\nTo: b@example.com\nSubject: ${subject}\n\n${"xxxxxxxx\n".repeat(lines)}`;
}

describe("the size limit counts the message as it goes out (CRLF)", { timeout: 120_000 }, () => {
  // 400 lines of 9 bytes: 3.6 KB as piped, 4.0 KB with CRLF. The limit 3900 bytes lies between.
  const limit = { MAILSEND_MAX_SIZE: "3900" };

  it("sendmail -t --queue always: an LF message under the limit as piped but over it on the wire is refused 65, nothing queued", async () => {
    const msg = lfMessage("size lf", 400);
    expect(Buffer.byteLength(msg)).toBeLessThan(3900);
    const e = env(limit);
    const r = await sm(["-t", "-oi", "--queue", "always"], msg, e);
    expect(r.exitCode, r.stderr).toBe(65);
    expect(r.stderr).toMatch(/larger than the limit/);
    expect(queued(e)).toEqual([]);
    // Its CRLF size under the limit: taken.
    const ok = env({ MAILSEND_MAX_SIZE: "4200" });
    expect((await sm(["-t", "-oi", "--queue", "always"], msg, ok)).exitCode).toBe(0);
    expect(queued(ok)).toHaveLength(1);
  });

  it("send --eml --queue always measures the same way", async () => {
    const file = s.file("lf.eml", lfMessage("size send", 400));
    const e = env(limit);
    const r = await run(...mailsendCommand(["send", "--eml", file, "--queue", "always"]), "", e);
    expect(r.exitCode, r.stderr).toBe(65);
    expect(r.stderr).toMatch(/larger than the limit/);
    expect(queued(e)).toEqual([]);
  });

  it("the relay: DATA with bare LF line ends over --max-size once they are CRLF gets 552, nothing queued", async () => {
    const e = env();
    const relay = await startRelayChild(e, ["--no-deliver", "--max-size", "3900"]);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      await d.cmd("EHLO client.test");
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(`${lfMessage("size relay", 400)}\r\n.\r\n`);
      expect(await d.reply()).toMatch(/^552 5\.3\.4 /);
      await d.quit();
      expect(queued(e)).toEqual([]);
    } finally {
      await relay.stop();
    }
  });
});

describe("empty elements in address lists (RFC 5322 4.4: MUST be accepted)", { timeout: 120_000 }, () => {
  it("sendmail -t: `To: Alice <alice@…>,` and `a@…, , b@…` are delivered to those named", async () => {
    const one = await sm(
      ["-t", "-oi"],
      "From: a@example.com\nTo: Alice <alice@example.com>,\nSubject: empty trailing\n\nx\n",
    );
    expect(one, one.stderr).toMatchObject({ exitCode: 0, stderr: "" });
    expect((await stored("empty trailing")).map((m) => m.envelope.to)).toEqual([["alice@example.com"]]);
    const two = await sm(
      ["-t", "-oi"],
      "From: a@example.com\nTo: a@x-example.com, , b@x-example.com\nCc: ,\n  c@x-example.com\nSubject: empty middle\n\nx\n",
    );
    expect(two, two.stderr).toMatchObject({ exitCode: 0, stderr: "" });
    expect((await stored("empty middle")).map((m) => [...m.envelope.to].sort())).toEqual([
      ["a@x-example.com", "b@x-example.com", "c@x-example.com"],
    ]);
  });

  it("the relay takes the same header (250) and delivers it", async () => {
    const e = env();
    const relay = await startRelayChild(e);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      await d.cmd("EHLO client.test");
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<alice@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write("From: a@example.com\r\nTo: Alice <alice@example.com>,\r\nSubject: empty relay\r\n\r\nx\r\n.\r\n");
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      await until(async () => (await stored("empty relay")).length === 1, 60_000);
    } finally {
      await relay.stop();
    }
  });

  it("mailsend send --to 'a@…,': a trailing comma is taken; an empty element before another, or no address at all, is 65", async () => {
    const send = (to: string, subject: string) =>
      run(
        ...mailsendCommand(["send", "--to", to, "--from", "a@example.com", "--subject", subject, "--text", "x"]),
        "",
        env(),
      );
    expect((await send("trail@example.com,", "flag trailing")).exitCode).toBe(0);
    expect((await stored("flag trailing")).map((m) => m.envelope.to)).toEqual([["trail@example.com"]]);
    const middle = await send("a@example.com, , b@example.com", "flag middle");
    expect(middle.exitCode).toBe(65);
    expect(middle.stderr).toMatch(/empty element between commas/);
    const none = await send(",", "flag none");
    expect(none.exitCode).toBe(65);
    expect(none.stderr).toMatch(/no address/);
  });
});

/** A whole SMTP session piped into `sendmail -bs`, as a script writes it: the reply lines. */
async function bs(session: string[], e: Record<string, string>): Promise<string[]> {
  const r = await sm(["-bs"], session.map((l) => `${l}\r\n`).join(""), e);
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.split("\r\n").filter(Boolean);
}

describe("this machine's setup problems are 451 4.3.5, not the message's 5xx", { timeout: 120_000 }, () => {
  const message = (subject: string, from = "From: a@example.com\r\n") => [`${from}Subject: ${subject}\r\n\r\nb\r\n.`];

  it("sendmail -bs: a key file that is not there, and no sender for MAIL FROM:<> without From, are 451 4.3.5; a bad message stays 554", async () => {
    const noKey = await bs(
      ["HELO x", "MAIL FROM:<a@example.com>", "RCPT TO:<x@example.com>", "DATA", ...message("setup key"), "QUIT"],
      env({ MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: "/nonexistent" }),
    );
    expect(noKey).toContainEqual("451 4.3.5 MAILSEND_API_KEY_FILE not found: /nonexistent");
    const noSender = await bs(
      ["HELO x", "MAIL FROM:<>", "RCPT TO:<x@example.com>", "DATA", ...message("setup sender", ""), "QUIT"],
      env({ MAILSEND_FROM: undefined }),
    );
    expect(noSender.find((l) => /^[45]\d\d /.test(l) && !l.startsWith("221"))).toMatch(
      /^451 4\.3\.5 the message has no From header and there is no sender/,
    );
    const bad = await bs(
      [
        "HELO x",
        "MAIL FROM:<a@example.com>",
        "RCPT TO:<x@example.com>",
        "DATA",
        "From: a@@example.com\r\nSubject: setup bad\r\n\r\nb\r\n.",
        "QUIT",
      ],
      env(),
    );
    expect(bad.find((l) => /^5\d\d /.test(l))).toMatch(/^554 5\.6\.0 /);
    expect(await stored("setup key")).toEqual([]);
  });
});

describe("one bad recipient is refused at its RCPT; the others get the message", { timeout: 120_000 }, () => {
  it("sendmail -bs: RCPT TO:<u@intranet> is 553 5.1.3, the message goes to the other", async () => {
    const replies = await bs(
      [
        "HELO x",
        "MAIL FROM:<p@example.com>",
        "RCPT TO:<u@intranet>",
        "RCPT TO:<ok-bs@example.com>",
        "DATA",
        "From: p@example.com\r\nTo: ok-bs@example.com\r\nSubject: rcpt bs\r\n\r\nx\r\n.",
        "QUIT",
      ],
      env(),
    );
    expect(replies).toContainEqual(expect.stringMatching(/^553 5\.1\.3 <u@intranet>: .*not fully qualified/));
    expect(replies).toContainEqual(expect.stringMatching(/^250 2\.0\.0 Ok: sent as /));
    expect((await stored("rcpt bs")).map((m) => m.envelope.to)).toEqual([["ok-bs@example.com"]]);
  });

  it.skipIf(lacks(python3))(
    "the relay: Python's smtplib.sendmail to ['u@intranet', 'ok@…'] gets 553 for the one, delivers to the other",
    async () => {
      const relay = await startRelayChild(env());
      try {
        const script = `
import json, smtplib, sys
s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=60)
refused = s.sendmail("p@example.com", ["u@intranet", "ok-relay@example.com"], "From: p@example.com\\r\\nTo: ok-relay@example.com\\r\\nSubject: rcpt relay\\r\\n\\r\\nx\\r\\n")
s.quit()
print(json.dumps({k: [v[0], v[1].decode()] for k, v in refused.items()}))
`;
        const r = await execa("python3", ["-c", script, String(relay.ready.port)], { reject: false, timeout: 60_000 });
        expect(r.exitCode, String(r.stderr)).toBe(0);
        const refused = JSON.parse(String(r.stdout)) as Record<string, [number, string]>;
        expect(Object.keys(refused)).toEqual(["u@intranet"]);
        expect(refused["u@intranet"]![0]).toBe(553);
        expect(refused["u@intranet"]![1]).toMatch(/^5\.1\.3 <u@intranet>: .*not fully qualified/);
        await until(async () => (await stored("rcpt relay")).length === 1, 60_000);
        expect((await stored("rcpt relay")).map((m) => m.envelope.to)).toEqual([["ok-relay@example.com"]]);
      } finally {
        await relay.stop();
      }
    },
  );
});

describe("Resent- headers with -t", { timeout: 120_000 }, () => {
  it("the recipients are Resent-To/Cc/Bcc, not To; Resent-Bcc is not in what is delivered", async () => {
    const r = await sm(
      ["-t", "-oi"],
      "From: a@example.com\nTo: orig@example.com\nResent-From: f@example.com\nResent-To: new@example.com\nResent-Bcc: secret@example.com\nSubject: resent t\n\nx\n",
    );
    expect(r, r.stderr).toMatchObject({ exitCode: 0, stderr: "" });
    const got = await stored("resent t");
    expect(got.map((m) => [...m.envelope.to].sort())).toEqual([["new@example.com", "secret@example.com"]]);
    const head = headerSection((await t.sb.store.raw(got[0]!.id))!);
    expect(head).toMatch(/^Resent-To: new@example\.com$/m);
    expect(head).not.toMatch(/secret|^Resent-Bcc/im);
  });
});

describe("a broken aliases file stops only mail that names this machine (as the relay, and Postfix's alias database)", {
  timeout: 120_000,
}, () => {
  // A line without its colon: the file cannot be parsed.
  const broken = () => s.file("aliases-broken", "root ops@example.com\n");

  it("sendmail -t: mail between full addresses goes (PHP's mail() to a customer); a local name is 78 naming the line", async () => {
    const e = env({ MAILSEND_ALIASES: broken() });
    const out = await sm(
      ["-t", "-i"],
      "From: shop@example.com\nTo: customer@example.com\nSubject: broken aliases out\n\nyour order\n",
      e,
    );
    expect(out, out.stderr).toMatchObject({ exitCode: 0, stderr: "" });
    expect((await stored("broken aliases out")).map((m) => m.envelope.to)).toEqual([["customer@example.com"]]);

    // cron's mail to root, -f root, a From of root, no From at all: the file is needed, and says what is wrong with it.
    for (const [args, input] of [
      [
        ["-FCronDaemon", "-i", "-B8BITMIME", "-oem", "root"],
        "From: root (Cron Daemon)\nTo: root\nSubject: broken aliases cron\n\nout\n",
      ],
      [["-f", "root", "-i", "ops@example.com"], "Subject: broken aliases f\n\nout\n"],
      [["-t", "-i"], "From: root\nTo: ops@example.com\nSubject: broken aliases from\n\nout\n"],
      // No From and no MAILSEND_FROM: the invoking user, through that file.
      [["-t", "-i"], "To: ops@example.com\nSubject: broken aliases no from\n\nout\n"],
    ] as const) {
      const r = await sm([...args], input, e);
      expect(r.exitCode, r.stderr).toBe(78);
      expect(r.stderr).toMatch(/aliases-broken:1: expected "name: target"/);
    }
    expect(queued(e)).toEqual([]);
  });

  it("sendmail -bs: RCPT TO:<root@localhost> waits (451), the other recipient and a message without local names are taken", async () => {
    const e = env({ MAILSEND_ALIASES: broken() });
    const replies = await bs(
      [
        "HELO x",
        "MAIL FROM:<shop@example.com>",
        "RCPT TO:<root@localhost>",
        "RCPT TO:<customer-bs@example.com>",
        "DATA",
        "From: shop@example.com\r\nTo: customer-bs@example.com\r\nSubject: broken aliases bs\r\n\r\nx\r\n.",
        "QUIT",
      ],
      e,
    );
    expect(replies).toContainEqual(
      expect.stringMatching(/^451 4\.3\.0 .*local names cannot be mapped now: .*aliases-broken:1/),
    );
    expect(replies).toContainEqual(expect.stringMatching(/^250 2\.0\.0 /));
    expect((await stored("broken aliases bs")).map((m) => m.envelope.to)).toEqual([["customer-bs@example.com"]]);
  });
});

describe("a message saved from a mailbox and sent on: Return-Path and Content-Length are not sent (as Postfix drops them)", {
  timeout: 120_000,
}, () => {
  const saved = (subject: string, eol: string) =>
    [
      `Return-Path: <old-sender@example.org>`,
      `Delivered-To: me@example.org`,
      `Content-Length: 3`,
      `From: a@example.com`,
      `To: b@example.com`,
      `Subject: ${subject}`,
      ``,
      `hello world`,
      ``,
    ].join(eol);

  it("sendmail -t < saved.eml: a stale Return-Path and Content-Length stay out (-v says so), the rest as it was", async () => {
    const r = await sm(["-t", "-i", "-v"], saved("saved sendmail", "\n"));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/removed Return-Path/);
    expect(r.stderr).toMatch(/removed Content-Length/);
    const got = await stored("saved sendmail");
    expect(got).toHaveLength(1);
    const raw = (await t.sb.store.raw(got[0]!.id))!;
    const head = headerSection(raw);
    expect(head).not.toMatch(/^Return-Path:|^Content-Length:/im);
    expect(head).toMatch(/^Delivered-To: me@example\.org$/m);
    expect(raw.toString("utf8")).toContain("\r\n\r\nhello world\r\n");
  });

  it("the relay: the same, and a Resent-Bcc in the DATA does not reach the other recipients", async () => {
    const e = env();
    const relay = await startRelayChild(e);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      await d.cmd("EHLO client.test");
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<hidden@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        `Resent-From: a@example.com\r\nResent-To: b@example.com\r\nResent-Bcc: hidden@example.com\r\n${saved("saved relay", "\r\n")}.\r\n`,
      );
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      await until(async () => (await stored("saved relay")).length === 1, 60_000);
      const got = await stored("saved relay");
      expect([...got[0]!.envelope.to].sort()).toEqual(["b@example.com", "hidden@example.com"]);
      const head = headerSection((await t.sb.store.raw(got[0]!.id))!);
      expect(head).not.toMatch(/^Return-Path:|^Content-Length:|^Resent-Bcc:|hidden@/im);
      expect(head).toMatch(/^Resent-To: b@example\.com$/m);
    } finally {
      await relay.stop();
    }
  });
});
