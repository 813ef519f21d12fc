/**
 * `mailsend relay` end to end: the built binary on 127.0.0.1 (a free port,
 * learnt from its --json ready line), real SMTP clients (swaks, Python's
 * smtplib), delivering upstream to the sandbox over REST and to a real
 * smtp-server with STARTTLS + AUTH over SMTP.
 */
import { execa } from "execa";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test, vi } from "vitest";
import { runInProcess } from "../helpers/cli.js";
import { startRelayChild } from "../helpers/relay.js";
import { inProcessSandbox, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { headerSection, startSmtpSink } from "../helpers/smtp-sink.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { lacks, python3, swaks as swaksProgram } from "../helpers/tools.js";
import { until } from "../helpers/until.js";

// Real clients and a relay process per test: on a loaded two-core machine one test can take a while.
vi.setConfig({ testTimeout: 120_000 });

/** swaks against the relay; returns its transcript and exit code. */
async function swaks(port: number, args: string[]): Promise<{ code: number; out: string }> {
  const r = await execa("swaks", ["--server", `127.0.0.1:${port}`, "--timeout", "20", ...args], {
    reject: false,
    timeout: 60_000,
    all: true,
  });
  return { code: r.exitCode ?? -1, out: String(r.all ?? "") };
}

/**
 * Python's smtplib sends messages over one connection: MAIL, RCPT, DATA by
 * hand so the reply to DATA is seen. Prints one JSON line per message.
 */
const PY_CLIENT = `
import json, smtplib, sys
port, prefix, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kind = sys.argv[4] if len(sys.argv) > 4 else "html"
user = sys.argv[5] if len(sys.argv) > 5 else ""
password = sys.argv[6] if len(sys.argv) > 6 else ""
s = smtplib.SMTP("127.0.0.1", port, timeout=60)
s.ehlo("client.test")
if user:
    s.starttls()
    s.ehlo("client.test")
    s.login(user, password)
for i in range(n):
    subject = "%s %d" % (prefix, i)
    if kind == "html":
        body = "Content-Type: text/html; charset=utf-8\\r\\n\\r\\n<p>%s</p>\\r\\n" % subject
    else:
        body = "Content-Type: text/plain; charset=utf-8\\r\\n\\r\\nplain %s\\r\\n" % subject
    msg = ("From: App <app@example.com>\\r\\nTo: dev@example.com\\r\\nSubject: %s\\r\\nMIME-Version: 1.0\\r\\n" % subject) + body
    code, _ = s.mail("app@example.com")
    if code != 250:
        print(json.dumps({"subject": subject, "code": code, "stage": "mail"})); s.rset(); continue
    code, _ = s.rcpt("dev@example.com")
    if code != 250:
        print(json.dumps({"subject": subject, "code": code, "stage": "rcpt"})); s.rset(); continue
    code, reply = s.data(msg.encode())
    print(json.dumps({"subject": subject, "code": code, "reply": reply.decode()}), flush=True)
s.quit()
`;

async function python(s: Scratch, args: string[]): Promise<Array<{ subject: string; code: number; reply?: string }>> {
  const script = s.file("client.py", PY_CLIENT);
  const r = await execa("python3", [script, ...args], { reject: false, timeout: 180_000 });
  if (r.exitCode !== 0) throw new Error(`python client failed (${r.exitCode}): ${r.stderr}`);
  return String(r.stdout)
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

function queued(outbox: string): string[] {
  const q = join(outbox, "queue");
  return existsSync(q) ? readdirSync(q).filter((n) => n.endsWith(".msg")) : [];
}

let t: TestSandbox;
useSandbox((sb) => (t = sb));

/** A relay delivering to the in-process sandbox over REST (its own outbox and state dir). */
function restEnv(s: Scratch, extra: Record<string, string> = {}): Record<string, string> {
  return { ...t.env, MAILSEND_STATE_DIR: join(s.dir, "state"), MAILSEND_TRANSPORT: "rest", ...extra };
}

describe.skipIf(lacks(swaksProgram, python3))("relay to the sandbox over REST", () => {
  test("swaks and smtplib: 250 queued as <id> after the message is on disk; the sandbox gets each once", async () => {
    const s = scratch("mailsend-relay-");
    const relay = await startRelayChild(restEnv(s), ["-v"]);
    try {
      expect(relay.ready.host).toBe("127.0.0.1");
      expect(relay.ready.auth).toBe(false);
      expect(relay.ready.outbox).toBe(join(s.dir, "state", "outbox"));
      const sw = await swaks(relay.ready.port, [
        "--from",
        "jenkins@example.com",
        "--to",
        "dev@example.com",
        "--header",
        "Subject: relay swaks",
        "--add-header",
        "Content-Type: text/html; charset=utf-8",
        "--body",
        "<p>build passed</p>",
      ]);
      expect(sw.code, sw.out).toBe(0);
      const id = /250 2\.0\.0 queued as ([0-9a-z]+)/.exec(sw.out)?.[1];
      expect(id, sw.out).toMatch(/^[0-9a-z]{19}$/);
      const py = await python(s, [String(relay.ready.port), "relay smtplib", "3"]);
      expect(py.map((p) => p.code)).toEqual([250, 250, 250]);
      for (const p of py) expect(p.reply).toMatch(/^2\.0\.0 queued as [0-9a-z]{19}$/);

      await until(
        async () => (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith("relay ")).length >= 4,
        60_000,
      );
      await until(() => queued(relay.ready.outbox).length === 0, 10_000);
      const got = (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith("relay "));
      expect(got.map((m) => m.subject).sort()).toEqual([
        "relay smtplib 0",
        "relay smtplib 1",
        "relay smtplib 2",
        "relay swaks",
      ]);
      expect(got.every((m) => m.channel === "rest")).toBe(true);
      const sw1 = got.find((m) => m.subject === "relay swaks")!;
      expect(sw1.from).toContain("jenkins@example.com");
      // -v: one event per message taken, with id, from, recipients and size.
      const q = relay.events.filter((e) => e.event === "queued");
      expect(q.map((e) => e.id)).toContain(id);
      expect(q.find((e) => e.id === id)).toMatchObject({ from: "jenkins@example.com", to: ["dev@example.com"] });
      await until(() => relay.events.filter((e) => e.event === "sent").length >= 4, 10_000);
      expect(relay.events.filter((e) => e.event === "sent")).toHaveLength(4);
      const { exitCode } = await relay.stop();
      expect(exitCode).toBe(0);
    } finally {
      await relay.stop().catch(() => {});
      s.remove();
    }
  });

  test("SIZE is advertised; a larger message gets 552 (declared or not) and nothing is queued", async () => {
    const s = scratch("mailsend-relay-size-");
    const relay = await startRelayChild(restEnv(s), ["--max-size", "4k", "--no-deliver"]);
    try {
      expect(relay.ready.max_size).toBe(4096);
      const d = await SmtpDialog.connect(relay.ready.port);
      const ehlo = await d.cmd("EHLO client.test");
      expect(ehlo).toMatch(/^250[- ]SIZE 4096$/m);
      expect(ehlo).not.toMatch(/STARTTLS|AUTH/);
      // Declared with SIZE=: refused at MAIL FROM, before the data is sent.
      expect(await d.cmd("MAIL FROM:<a@example.com> SIZE=100000")).toMatch(/^552 /);
      // Not declared: the whole DATA is read and refused.
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        `From: a@example.com\r\nTo: b@example.com\r\nSubject: big\r\nContent-Type: text/html\r\n\r\n<p>${"x".repeat(8000)}</p>\r\n.\r\n`,
      );
      expect(await d.reply()).toMatch(/^552 5\.3\.4 .*4096 bytes/);
      // The session goes on: a small one is taken.
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: small\r\nContent-Type: text/html\r\n\r\n<p>ok</p>\r\n.\r\n",
      );
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      const files = queued(relay.ready.outbox);
      expect(files).toHaveLength(1);
      expect(readFileSync(join(relay.ready.outbox, "queue", files[0]!), "utf8")).toContain("Subject: small");
    } finally {
      await relay.stop();
      s.remove();
    }
  });

  test("what the service takes, by default: SIZE 10 MiB less 4 KiB, and the 101st recipient refused 452 4.5.3 at RCPT; never 250 for mail it cannot deliver", async () => {
    const s = scratch("mailsend-relay-rcpt-");
    // Recipients beyond the To header go over SMTP: auto, with the sandbox's SMTP configured.
    const relay = await startRelayChild(restEnv(s, { MAILSEND_TRANSPORT: "auto" }), ["--no-deliver"]);
    try {
      // By default it takes what the service takes: 10 MiB, less room for the headers delivery adds.
      expect(relay.ready.max_size).toBe(10 * 1024 * 1024 - 4096);
      const d = await SmtpDialog.connect(relay.ready.port);
      expect(await d.cmd("EHLO client.test")).toMatch(/^250[- ]SIZE 10481664$/m);
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      for (let i = 1; i <= 100; i++) expect(await d.cmd(`RCPT TO:<u${i}@example.com>`)).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<u101@example.com>")).toMatch(
        /^452 4\.5\.3 Too many recipients \(at most 100 per message\)/,
      );
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        "From: a@example.com\r\nTo: list@example.com\r\nSubject: hundred\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n.\r\n",
      );
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      const files = queued(relay.ready.outbox);
      expect(files).toHaveLength(1);
      const meta = JSON.parse(readFileSync(join(relay.ready.outbox, "queue", files[0]!), "utf8").split("\n")[0]!) as {
        envelope: { to: string[] };
      };
      expect(meta.envelope.to).toHaveLength(100);
    } finally {
      await relay.stop();
      s.remove();
    }
  });

  test("-v's sent event names every envelope recipient, a blind copy too (not only the To header's)", async () => {
    const s = scratch("mailsend-relay-bcc-");
    const relay = await startRelayChild(restEnv(s, { MAILSEND_TRANSPORT: "auto" }), ["-v"]);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      expect(d.greeting).toMatch(/^220 \S+ ESMTP mailsend relay$/);
      await d.cmd("EHLO client.test");
      expect(await d.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<visible@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<hidden@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        "From: app@example.com\r\nTo: visible@example.com\r\nSubject: relay blind copy\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n.\r\n",
      );
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      await until(() => relay.events.some((e) => e.event === "sent"), 30_000);
      expect(relay.events.find((e) => e.event === "sent")).toMatchObject({
        transport: "smtp",
        recipients: ["visible@example.com", "hidden@example.com"],
      });
    } finally {
      await relay.stop();
      s.remove();
    }
  });

  test("a message mailsend cannot deliver as it is: 554 with the reason, nothing queued", async () => {
    const s = scratch("mailsend-relay-bad-");
    const relay = await startRelayChild(restEnv(s), ["--no-deliver"]);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      await d.cmd("EHLO client.test");
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      // No header at all: binary garbage.
      d.write("\x00\x01\x02 this is not a message\r\n.\r\n");
      const r = await d.reply();
      expect(r).toMatch(/^554 5\.6\.0 \S/);
      await d.quit();
      expect(queued(relay.ready.outbox)).toHaveLength(0);
    } finally {
      await relay.stop();
      s.remove();
    }
  });

  test("local names: RCPT TO:<root@localhost> goes where the aliases file says; without a file it waits (451), a name the file lacks is refused 550 at RCPT", async () => {
    const s = scratch("mailsend-relay-local-");
    const aliases = s.file("aliases", "root: ops@example.com, dev@example.com\ndefault: admin@example.com\n");
    const relay = await startRelayChild(restEnv(s, { MAILSEND_ALIASES: aliases, MAILSEND_FROM: "app@example.com" }), [
      "-v",
    ]);
    const s2 = scratch("mailsend-relay-nolocal-");
    const bare = await startRelayChild(restEnv(s2), ["--no-deliver"]);
    try {
      const d = await SmtpDialog.connect(relay.ready.port);
      await d.cmd("EHLO client.test");
      // A daemon that mails root, from root: both local names, in the envelope and the header.
      expect(await d.cmd("MAIL FROM:<root@localhost>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<root@localhost>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<nobody-else@localhost>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      d.write(
        "From: root@localhost\r\nTo: root@localhost, nobody-else@localhost\r\nSubject: relay local names\r\nContent-Type: text/html\r\n\r\n<p>disk almost full</p>\r\n.\r\n",
      );
      expect(await d.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await d.quit();
      await until(
        async () => (await t.sb.store.list({ limit: 1000 })).some((m) => m.subject === "relay local names"),
        60_000,
      );
      const got = (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject === "relay local names");
      expect(got).toHaveLength(1);
      expect(got[0]!.from).toContain("app@example.com");
      expect(JSON.stringify(got[0]!.to)).toContain("ops@example.com");
      expect(JSON.stringify(got[0]!.to)).toContain("dev@example.com");
      expect(JSON.stringify(got[0]!.to)).toContain("admin@example.com");
      expect(JSON.stringify(got[0]!.to)).not.toContain("localhost");
      expect(relay.events.find((e) => e.event === "queued")).toMatchObject({
        from: "app@example.com",
        to: ["ops@example.com", "dev@example.com", "admin@example.com"],
      });

      // Reply-To and Sender with local names (the message is taken, not 554): a name that is one
      // address takes it; one that is several (root) is left out, so replies go to From.
      const r2 = await SmtpDialog.connect(relay.ready.port);
      await r2.cmd("EHLO client.test");
      expect(await r2.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
      expect(await r2.cmd("RCPT TO:<dev@example.com>")).toMatch(/^250/);
      expect(await r2.cmd("DATA")).toMatch(/^354/);
      r2.write(
        "From: app@example.com\r\nSender: root@localhost\r\nReply-To: Admin <someone@localhost>\r\nTo: dev@example.com\r\nSubject: relay reply-to\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n.\r\n",
      );
      expect(await r2.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await r2.quit();
      await until(
        async () => (await t.sb.store.list({ limit: 1000 })).some((m) => m.subject === "relay reply-to"),
        60_000,
      );
      const replied = (await t.sb.store.list({ limit: 1000 })).find((m) => m.subject === "relay reply-to")!;
      const head = (await t.sb.store.raw(replied.id))!.toString("utf8").split("\r\n\r\n")[0]!;
      expect(head).toMatch(/^Reply-To: Admin <admin@example\.com>$/im);
      expect(head).not.toMatch(/^Sender:/im);
      expect(head).not.toContain("localhost");

      // The file broken while the relay runs: mail to local names waits (451, a fault here, not a
      // bounce); mail without them is taken as before, the file not even read.
      writeFileSync(aliases, "root ops@example.com\n");
      const k = await SmtpDialog.connect(relay.ready.port);
      await k.cmd("EHLO client.test");
      expect(await k.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
      expect(await k.cmd("RCPT TO:<root@localhost>")).toMatch(/^451 4\.3\.0 .*local names cannot be mapped now/);
      expect(await k.cmd("RCPT TO:<dev@example.com>")).toMatch(/^250/);
      expect(await k.cmd("DATA")).toMatch(/^354/);
      k.write(
        "From: app@example.com\r\nTo: dev@example.com\r\nSubject: relay broken aliases\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n.\r\n",
      );
      expect(await k.reply()).toMatch(/^250 2\.0\.0 queued as /);
      await k.quit();

      // A name the file (fixed, without default:) does not map: refused at RCPT, 550 5.1.1, as Postfix
      // answers a user it does not know.
      writeFileSync(aliases, "root: ops@example.com\n");
      const u = await SmtpDialog.connect(relay.ready.port);
      await u.cmd("EHLO client.test");
      expect(await u.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
      expect(await u.cmd("RCPT TO:<nobody-else@localhost>")).toMatch(
        /^550 5\.1\.1 <nobody-else@localhost>: .*maps neither "nobody-else"/,
      );
      await u.quit();

      // No aliases file: the recipient waits (451 4.3.5, this machine's setup, naming the setting), as
      // a sender root@localhost does at DATA: an MTA in front keeps it until a file is set, where a
      // 550 made Postfix bounce cron's mail to root (and the bounce to root with it).
      const b = await SmtpDialog.connect(bare.ready.port);
      await b.cmd("EHLO client.test");
      expect(await b.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
      const r = await b.cmd("RCPT TO:<root@localhost>");
      expect(r).toMatch(/^451 4\.3\.5 .*"root@localhost" is a local name.*no aliases file/);
      // ...and said where the relay logs (without -v: this machine's to fix), not only to the client.
      await until(() => bare.events.some((e) => e.event === "refused" && e.stage === "rcpt"), 5000);
      expect(bare.events.find((e) => e.event === "refused")).toMatchObject({
        stage: "rcpt",
        code: 451,
        from: "app@example.com",
        to: ["root@localhost"],
        reply: expect.stringMatching(/no aliases file/),
      });
      // An address elsewhere is as before.
      expect(await b.cmd("RCPT TO:<dev@example.com>")).toMatch(/^250/);
      await b.quit();
    } finally {
      await relay.stop();
      await bare.stop();
      s.remove();
      s2.remove();
    }
  });

  test("--max-clients: one more connection is answered 421", async () => {
    const s = scratch("mailsend-relay-clients-");
    const relay = await startRelayChild(restEnv(s), ["--max-clients", "2", "--no-deliver"]);
    const open: SmtpDialog[] = [];
    try {
      open.push(await SmtpDialog.connect(relay.ready.port), await SmtpDialog.connect(relay.ready.port));
      const third = await SmtpDialog.connect(relay.ready.port);
      third.destroy();
      expect(third.greeting).toMatch(/^421 /);
    } finally {
      for (const d of open) await d.quit();
      await relay.stop();
      s.remove();
    }
  });
});

describe.skipIf(lacks(python3))("relay upstream over SMTP (STARTTLS + AUTH)", () => {
  test("a text-only message from smtplib is delivered unchanged to a real smtp-server with TLS and AUTH", async () => {
    const s = scratch("mailsend-relay-smtp-");
    const tls = await s.tls();
    const key = "relay-upstream-key-0123456789";
    const sink = await startSmtpSink({ mode: "starttls", tls, key });
    const relay = await startRelayChild({
      MAILSEND_STATE_DIR: join(s.dir, "state"),
      MAILSEND_TRANSPORT: "smtp",
      MAILSEND_SMTP_HOST: "127.0.0.1",
      MAILSEND_SMTP_PORT: String(sink.port),
      MAILSEND_SMTP_TLS: "starttls",
      MAILSEND_API_KEY: key,
      NODE_EXTRA_CA_CERTS: tls.caPath,
    });
    try {
      const py = await python(s, [String(relay.ready.port), "relay over smtp", "2", "text"]);
      expect(py.map((p) => p.code)).toEqual([250, 250]);
      await until(() => sink.messages.length >= 2, 60_000);
      await until(() => queued(relay.ready.outbox).length === 0, 10_000);
      expect(sink.messages).toHaveLength(2);
      for (const m of sink.messages) {
        expect(m.secure).toBe(true);
        expect(m.user).toBe("mailsend");
        expect(m.mailFrom).toBe("app@example.com");
        expect(m.rcptTo).toEqual(["dev@example.com"]);
        expect(headerSection(m.raw)).toMatch(/^Subject: relay over smtp \d$/m);
        expect(m.raw.toString()).toMatch(/plain relay over smtp \d/);
      }
      // The key never shows in what the relay printed.
      const { exitCode, stderr } = await relay.stop();
      expect(exitCode).toBe(0);
      expect(stderr).not.toContain(key);
      expect(JSON.stringify(relay.events)).not.toContain(key);
    } finally {
      await relay.stop();
      await sink.close();
      s.remove();
    }
  });
});

describe("who may connect", () => {
  test("a non-loopback --listen without --auth-file and TLS refuses to start (78), saying why", async () => {
    const s = scratch("mailsend-relay-open-");
    try {
      const env = { MAILSEND_STATE_DIR: join(s.dir, "state") };
      const none = await runInProcess(["relay", "--listen", "0.0.0.0:0"], { env });
      expect(none.exitCode).toBe(78);
      expect(none.stderr).toMatch(/refusing to listen on 0\.0\.0\.0:0 without --auth-file .* and TLS/);
      expect(none.stderr).toMatch(/not a loopback address/);
      const users = s.file(
        "users",
        `ops:${(await runInProcess(["relay", "hash-password"], { input: "pw-123456\n" })).stdout.trim()}\n`,
      );
      const noTls = await runInProcess(["relay", "--listen", "0.0.0.0:0", "--auth-file", users], { env });
      expect(noTls.exitCode).toBe(78);
      expect(noTls.stderr).toMatch(/without TLS \(--tls-cert and --tls-key, or --tls-self-signed\)/);
      const noAuth = await runInProcess(["relay", "--listen", "[::]:0", "--tls-self-signed"], { env });
      expect(noAuth.exitCode).toBe(78);
      expect(noAuth.stderr).toMatch(/without --auth-file/);
      expect(existsSync(join(s.dir, "state", "outbox"))).toBe(false);
    } finally {
      s.remove();
    }
  });

  test("an outbox that cannot be made: 73 before listening, naming the path", async () => {
    const s = scratch("mailsend-relay-nodir-");
    try {
      const notDir = s.file("state", "a file, not a directory");
      const r = await runInProcess(["relay", "--listen", "127.0.0.1:0"], { env: { MAILSEND_STATE_DIR: notDir } });
      expect(r.exitCode).toBe(73);
      expect(r.stderr).toContain(`the relay cannot start: cannot write the outbox file ${notDir}/outbox`);
      expect(r.stderr).not.toMatch(/NOT queued/);
    } finally {
      s.remove();
    }
  });

  test.skipIf(lacks(swaksProgram))(
    "with --auth-file: AUTH is required and checked; off loopback only after STARTTLS",
    async () => {
      const s = scratch("mailsend-relay-auth-");
      const hp = await runInProcess(["relay", "hash-password", "grafana"], { input: "correct horse battery\n" });
      expect(hp.exitCode, hp.stderr).toBe(0);
      expect(hp.stdout).toMatch(/^grafana:scrypt\$16384\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+\n$/);
      expect(hp.stdout).not.toContain("correct horse");
      const users = s.file("relay-users", `# relay users\n${hp.stdout}`);
      // Listening on every interface (the clients still come from 127.0.0.1).
      const relay = await startRelayChild(restEnv(s), [
        "--listen",
        "0.0.0.0:0",
        "--auth-file",
        users,
        "--tls-self-signed",
        "--no-deliver",
      ]);
      try {
        expect(relay.ready.auth).toBe(true);
        expect(relay.ready.tls).toBe("starttls");
        const port = relay.ready.port;
        const common = [
          "--from",
          "g@example.com",
          "--to",
          "dev@example.com",
          "--add-header",
          "Content-Type: text/html",
          "--body",
          "<p>alert</p>",
        ];
        // No AUTH: MAIL is refused.
        const anon = await swaks(port, ["--tls", ...common]);
        expect(anon.code).not.toBe(0);
        expect(anon.out).toMatch(/<(\*\*|~\*) 530 /);
        // AUTH without TLS off loopback: refused (538), the password never sent in clear.
        const clear = await swaks(port, [
          "--auth",
          "PLAIN",
          "--auth-user",
          "grafana",
          "--auth-password",
          "correct horse battery",
          ...common,
        ]);
        expect(clear.code).not.toBe(0);
        expect(clear.out).not.toMatch(/queued as/);
        // A wrong password, then the right one, under STARTTLS.
        const wrong = await swaks(port, [
          "--tls",
          "--auth",
          "LOGIN",
          "--auth-user",
          "grafana",
          "--auth-password",
          "wrong horse",
          ...common,
        ]);
        expect(wrong.out).toMatch(/<(\*\*|~\*) 535 /);
        const unknown = await swaks(port, [
          "--tls",
          "--auth",
          "PLAIN",
          "--auth-user",
          "nobody",
          "--auth-password",
          "correct horse battery",
          ...common,
        ]);
        expect(unknown.out).toMatch(/<(\*\*|~\*) 535 /);
        const ok = await swaks(port, [
          "--tls",
          "--auth",
          "PLAIN",
          "--auth-user",
          "grafana",
          "--auth-password",
          "correct horse battery",
          ...common,
        ]);
        expect(ok.code, ok.out).toBe(0);
        expect(ok.out).toMatch(/250 2\.0\.0 queued as /);
        expect(queued(relay.ready.outbox)).toHaveLength(1);
        const { exitCode, stderr } = await relay.stop();
        expect(exitCode).toBe(0);
        expect(stderr).not.toContain("correct horse");
      } finally {
        await relay.stop();
        s.remove();
      }
    },
  );
});

describe("settings delivery needs", () => {
  test("no API key: the relay starts (mail it takes waits in the outbox) and says at start why it cannot deliver yet", async () => {
    const s = scratch("mailsend-relay-nokey-");
    try {
      const env = {
        MAILSEND_STATE_DIR: join(s.dir, "state"),
        MAILSEND_BASE_URL: "http://127.0.0.1:9",
        MAILSEND_API_KEY_FILE: join(s.dir, "no-such-key"),
      };
      const relay = await startRelayChild(env);
      try {
        await until(() => relay.events.some((e) => e.event === "warning"), 10_000);
        const warning = relay.events.find((e) => e.event === "warning")!;
        expect(warning.message).toMatch(/no-such-key/);
        expect(warning.message).toMatch(/mail is taken and kept in the outbox until this is fixed/);
      } finally {
        expect((await relay.stop()).exitCode).toBe(0);
      }
      // With --no-deliver the relay does not judge the settings of a `queue run` it does not run.
      const quiet = await startRelayChild(env, ["--no-deliver"]);
      await new Promise((r) => setTimeout(r, 500));
      await quiet.stop();
      expect(quiet.events.filter((e) => e.event === "warning")).toEqual([]);
    } finally {
      s.remove();
    }
  });
});

describe.skipIf(lacks(swaksProgram))("stopping", () => {
  test("SIGTERM: no new mail, a delivery in flight finishes, exit 0; what was left is delivered by the next start", async () => {
    const s = scratch("mailsend-relay-stop-");
    // Slow enough that the delivery is still in flight when the SIGTERM comes, late enough that a
    // loaded machine's relay has started it (its first delivery loads the transport's code).
    const slow = await inProcessSandbox({ faults: { latencyMs: 6000 } });
    const html = ["--add-header", "Content-Type: text/html", "--body", "<p>x</p>"];
    try {
      const env = { ...slow.env, MAILSEND_STATE_DIR: join(s.dir, "state"), MAILSEND_TRANSPORT: "rest" };
      // 1. Delivering: SIGTERM while the sandbox holds the request; the relay waits for the answer.
      const r1 = await startRelayChild(env, ["-v"]);
      const a = await swaks(r1.ready.port, [
        "--from",
        "a@example.com",
        "--to",
        "dev@example.com",
        "--header",
        "Subject: in flight",
        ...html,
      ]);
      expect(a.out).toMatch(/queued as/);
      await new Promise((r) => setTimeout(r, 3000));
      const stopped = await r1.stop();
      expect(stopped.exitCode, stopped.stderr).toBe(0);
      expect(r1.events.filter((e) => e.event === "sent")).toHaveLength(1);
      expect(queued(r1.ready.outbox)).toHaveLength(0);
      expect((await slow.sb.store.list({ limit: 100 })).map((m) => m.subject)).toEqual(["in flight"]);

      // 2. Only queueing: what it took stays in the outbox across the stop.
      const r2 = await startRelayChild(env, ["--no-deliver"]);
      for (const n of [1, 2]) {
        const b = await swaks(r2.ready.port, [
          "--from",
          "a@example.com",
          "--to",
          "dev@example.com",
          "--header",
          `Subject: left ${n}`,
          ...html,
        ]);
        expect(b.out).toMatch(/queued as/);
      }
      expect((await r2.stop()).exitCode).toBe(0);
      expect(queued(r2.ready.outbox)).toHaveLength(2);
      // Stopped: nothing listens any more.
      const gone = await swaks(r2.ready.port, ["--from", "a@example.com", "--to", "dev@example.com", ...html]);
      expect(gone.code).not.toBe(0);

      // 3. The next start delivers them, each once.
      const r3 = await startRelayChild(env, ["-v"]);
      await until(() => r3.events.filter((e) => e.event === "sent").length >= 2, 60_000);
      expect((await r3.stop()).exitCode).toBe(0);
      expect(queued(r3.ready.outbox)).toHaveLength(0);
      const subjects = (await slow.sb.store.list({ limit: 100 })).map((m) => m.subject).sort();
      expect(subjects).toEqual(["in flight", "left 1", "left 2"]);
    } finally {
      await slow.stop();
      s.remove();
    }
  });
});
