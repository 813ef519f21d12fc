/**
 * `sendmail -bs`: one SMTP session on stdin and stdout, the default of Symfony Mailer's and
 * SwiftMailer's sendmail transport and of Laravel's `sendmail -bs -i`. Real SMTP clients talk to
 * the built binary over its pipes: swaks (--pipe) and Python's smtplib (over a socket pair that is
 * the child's stdin and stdout). The sandbox on 127.0.0.1 upstream.
 */
import { execa } from "execa";
import { spawnSync } from "node:child_process";
import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, BIN, mailsendArgv, mailsendCommand, mailsendShell } from "../helpers/cli.js";
import { parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

const HAVE_SWAKS = spawnSync("swaks", ["--version"]).status === 0;
const HAVE_PYTHON = spawnSync("python3", ["-c", "import smtplib"]).status === 0;

let t: TestSandbox;
let s: Scratch;
let sendmail: string;

useSandbox((sb) => (t = sb), { rateLimit: 1_000_000 });
beforeAll(async () => {
  s = scratch("mailsend-sendmail-bs-");
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  symlinkSync(BIN, sendmail);
});
afterAll(async () => {
  s?.remove();
});

function env(): Record<string, string> {
  return {
    ...baseEnv(),
    ...t.env,
    MAILSEND_STATE_DIR: join(s.dir, "state"),
    MAILSEND_ALIASES: s.file("aliases", "root: ops@example.com\n"),
    MAILSEND_QUEUE_AUTORUN: "0",
  };
}

const stored = async (prefix: string) =>
  (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith(prefix));

describe("sendmail -bs", () => {
  it.skipIf(!HAVE_SWAKS)(
    "swaks --pipe: the message is sent and answered 250 with its id; QUIT ends the session with exit 0",
    async () => {
      const r = await execa(
        "swaks",
        [
          "--pipe",
          mailsendShell(["-bs"], sendmail),
          "--from",
          "app@example.com",
          "--to",
          "dev@example.com",
          "--header",
          "Subject: bs swaks",
        ],
        {
          env: env(),
          extendEnv: false,
          reject: false,
          timeout: 60_000,
          all: true,
        },
      );
      const out = String(r.all ?? "");
      expect(r.exitCode, out).toBe(0);
      expect(out).toMatch(/<- {2}220 \S+ ESMTP mailsend sendmail -bs/);
      expect(out).toMatch(/<- {2}250 2\.0\.0 Ok: sent as \S+/);
      expect(out).toMatch(/<- {2}221 /);
      const got = await stored("bs swaks");
      expect(got).toHaveLength(1);
      expect(got[0]!.envelope.to).toEqual(["dev@example.com"]);
    },
  );

  it("the 101st RCPT of a message is refused 452 4.5.3, as the relay does; the 100 go", async () => {
    const rcpts = Array.from({ length: 101 }, (_, i) => `RCPT TO:<bs${i}@example.com>`);
    const session = [
      "EHLO script.example",
      "MAIL FROM:<app@example.com>",
      ...rcpts,
      "DATA",
      "From: app@example.com",
      "To: list@example.com",
      "Subject: bs hundred",
      "",
      "x",
      ".",
      "QUIT",
      "",
    ].join("\r\n");
    const r = await execa(...mailsendCommand(["-bs"], sendmail), {
      env: { ...env(), MAILSEND_QUEUE: "always", MAILSEND_QUEUE_AUTORUN: "0" },
      extendEnv: false,
      reject: false,
      timeout: 60_000,
      input: session,
    });
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const replies = String(r.stdout).split("\r\n").filter(Boolean);
    expect(replies.filter((l) => l.startsWith("452 4.5.3 Too many recipients (at most 100 per message)"))).toHaveLength(
      1,
    );
    expect(replies.some((l) => /^250 2\.0\.0 Ok: queued as /.test(l))).toBe(true);
  });

  it("a whole session piped in at once (before the greeting, EOF after QUIT) is answered line by line, and the message sent", async () => {
    const session = [
      "EHLO script.example",
      "MAIL FROM:<app@example.com>",
      "RCPT TO:<dev@example.com>",
      "DATA",
      "From: app@example.com",
      "To: dev@example.com",
      "Subject: bs piped",
      "Content-Type: text/html",
      "",
      "<p>piped</p>",
      ".",
      "QUIT",
      "",
    ].join("\r\n");
    const r = await execa(...mailsendCommand(["-bs"], sendmail), {
      env: env(),
      extendEnv: false,
      reject: false,
      timeout: 60_000,
      input: session,
    });
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const replies = String(r.stdout)
      .split("\r\n")
      .filter(Boolean)
      .map((l) => l.slice(0, 4));
    expect(replies[0]).toBe("220 ");
    expect(replies.slice(-5)).toEqual(["250 ", "250 ", "354 ", "250 ", "221 "]);
    expect(await stored("bs piped")).toHaveLength(1);
  });

  it.skipIf(!HAVE_PYTHON)(
    "after QUIT it exits even while the caller keeps stdin open (Go's exec, PHP's proc_close wait for it)",
    async () => {
      const script = s.file(
        "quit.py",
        `
import subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
p.stdout.readline()
p.stdin.write(b"QUIT\\r\\n"); p.stdin.flush()
print(p.stdout.readline().decode().strip())
try:
    print("exit", p.wait(20))
except subprocess.TimeoutExpired:
    p.kill(); print("still running")
`,
      );
      const r = await execa("python3", [script, ...mailsendArgv(["-bs"], sendmail)], {
        env: env(),
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
      expect(String(r.stdout).trim().split("\n")).toEqual(["221 Bye", "exit 0"]);
    },
  );

  it.skipIf(!HAVE_PYTHON)(
    "Python's smtplib over the pipes: two messages in one session (a local name mapped, Bcc only in RCPT), a bad one refused 554 without ending the session",
    async () => {
      const script = s.file(
        "bs.py",
        `
import json, smtplib, socket, subprocess, sys
a, b = socket.socketpair()
p = subprocess.Popen(sys.argv[1:], stdin=b, stdout=b)
b.close()
class Piped(smtplib.SMTP):
    def connect(self, host="", port=0, source_address=None):
        self.sock = a
        self.file = None
        return self.getreply()
c = Piped()
print(json.dumps(["connect", *c.connect()[:1]]), flush=True)
c.ehlo("app.example")
out = []
for sender, rcpts, msg in [
    ("app@example.com", ["root@localhost"], "From: App <app@example.com>\\r\\nTo: root@localhost\\r\\nSubject: bs py 1\\r\\n\\r\\nhello root\\r\\n"),
    ("app@example.com", ["not an address@"], "From: app@example.com\\r\\nSubject: bs py bad\\r\\n\\r\\nx\\r\\n"),
    ("app@example.com", ["dev@example.com", "hidden@example.com"], "From: app@example.com\\r\\nTo: dev@example.com\\r\\nSubject: bs py 2\\r\\n\\r\\n.leading dot\\r\\n"),
]:
    try:
        c.sendmail(sender, rcpts, msg)
        out.append(250)
    except smtplib.SMTPRecipientsRefused as e:
        out.append(list(e.recipients.values())[0][0])
    except smtplib.SMTPResponseException as e:
        out.append(e.smtp_code)
print(json.dumps(out), flush=True)
c.quit()
a.close()
print(json.dumps(["exit", p.wait(30)]), flush=True)
`,
      );
      const r = await execa("python3", [script, ...mailsendArgv(["-bs", "-i"], sendmail)], {
        env: env(),
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
      expect(r.exitCode, String(r.stderr)).toBe(0);
      const lines = String(r.stdout)
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines[0]).toEqual(["connect", 220]);
      const codes = lines[1] as number[];
      expect(codes[0]).toBe(250);
      expect(codes[1]).toBeGreaterThanOrEqual(500);
      expect(codes[2]).toBe(250);
      expect(lines[2]).toEqual(["exit", 0]);
      await until(async () => (await stored("bs py")).length >= 2, 20_000);
      const got = await stored("bs py");
      expect(got.map((m) => m.subject).sort()).toEqual(["bs py 1", "bs py 2"]);
      const one = got.find((m) => m.subject === "bs py 1")!;
      expect(one.envelope.to).toEqual(["ops@example.com"]);
      const two = got.find((m) => m.subject === "bs py 2")!;
      expect(two.envelope.to.sort()).toEqual(["dev@example.com", "hidden@example.com"]);
      const eml = await parseEml((await t.sb.store.raw(two.id))!);
      expect(eml.text).toContain(".leading dot");
    },
  );
});
