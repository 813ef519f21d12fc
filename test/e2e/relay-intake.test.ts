/**
 * `mailsend relay` refuses at intake (451 4.3.5, nothing queued) mail its
 * delivery settings can never deliver unchanged: a text-only body when only
 * REST is configured. A 250 would leave it for the runner to move to
 * failed/, where no sender looks. It is this machine's
 * settings that are wrong, not the message: 4xx, so the app keeps it until
 * they are fixed (RFC 3463 4.3.5, system incorrectly configured). The built binary, real
 * SMTP clients (Python's smtplib, swaks), the sandbox upstream.
 */
import { execa } from "execa";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test, vi } from "vitest";
import { startRelayChild } from "../helpers/relay.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

vi.setConfig({ testTimeout: 120_000 });

/** One connection; for each kind given (text or html) one message; one JSON line per DATA reply. */
const PY_CLIENT = `
import json, smtplib, sys
port, prefix = int(sys.argv[1]), sys.argv[2]
s = smtplib.SMTP("127.0.0.1", port, timeout=60)
s.ehlo("client.test")
for i, kind in enumerate(sys.argv[3:]):
    subject = "%s %s %d" % (prefix, kind, i)
    if kind == "html":
        body = "Content-Type: text/html; charset=utf-8\\r\\n\\r\\n<p>%s</p>\\r\\n" % subject
    else:
        body = "Content-Type: text/plain; charset=utf-8\\r\\n\\r\\nplain %s\\r\\n" % subject
    msg = ("From: App <app@example.com>\\r\\nTo: dev@example.com\\r\\nSubject: %s\\r\\nMIME-Version: 1.0\\r\\n" % subject) + body
    code, reply = s.mail("app@example.com")
    if code == 250:
        code, reply = s.rcpt("dev@example.com")
    if code == 250:
        code, reply = s.data(msg.encode())
    else:
        s.rset()
    print(json.dumps({"subject": subject, "code": code, "reply": reply.decode("latin1")}), flush=True)
s.quit()
`;

async function python(
  s: Scratch,
  port: number,
  prefix: string,
  kinds: string[],
): Promise<Array<{ subject: string; code: number; reply: string }>> {
  const script = s.file("client.py", PY_CLIENT);
  const r = await execa("python3", [script, String(port), prefix, ...kinds], { reject: false, timeout: 120_000 });
  if (r.exitCode !== 0) throw new Error(`python client failed (${r.exitCode}): ${r.stderr}`);
  return String(r.stdout)
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

function files(outbox: string, sub: "queue" | "failed"): string[] {
  const d = join(outbox, sub);
  return existsSync(d) ? readdirSync(d).filter((n) => !n.startsWith(".")) : [];
}

let t: TestSandbox;
useSandbox((sb) => (t = sb));

/** The sandbox over REST only: no SMTP host, MAILSEND_TRANSPORT unset (auto). */
function restOnlyEnv(s: Scratch): Record<string, string> {
  const env: Record<string, string> = { ...t.env, MAILSEND_STATE_DIR: join(s.dir, "state") };
  for (const k of [
    "MAILSEND_SMTP_HOST",
    "MAILSEND_SMTP_PORT",
    "MAILSEND_SMTP_TLS",
    "MAILSEND_SMTP_USER",
    "MAILSEND_TRANSPORT",
  ])
    delete env[k];
  return env;
}

async function subjects(prefix: string) {
  return (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith(prefix));
}

const REFUSAL =
  /^4\.3\.5 this message cannot go over REST without loss \(a text-only body\), and no SMTP server is configured; configure an SMTP server \(MAILSEND_SMTP_HOST\) for such mail$/;

describe.skipIf(lacks(python3))("relay intake: what the delivery settings can never deliver", () => {
  test("REST only: a text-only message gets 451 4.3.5 and nothing is queued; an HTML one in the same session is 250 and delivered over REST", async () => {
    const s = scratch("mailsend-relay-intake-");
    const relay = await startRelayChild(restOnlyEnv(s), ["-v"]);
    try {
      const replies = await python(s, relay.ready.port, "intake rest", ["text", "html", "text"]);
      expect(replies.map((r) => r.code)).toEqual([451, 250, 451]);
      expect(replies[0]!.reply).toMatch(REFUSAL);
      expect(replies[2]!.reply).toMatch(REFUSAL);
      expect(replies[1]!.reply).toMatch(/^2\.0\.0 queued as [0-9a-z]{19}$/);
      await until(async () => (await subjects("intake rest")).length >= 1, 60_000);
      await until(() => files(relay.ready.outbox, "queue").length === 0, 10_000);
      await until(() => relay.events.some((e) => e.event === "sent"), 10_000);
      const got = await subjects("intake rest");
      expect(got.map((m) => [m.subject, m.channel])).toEqual([["intake rest html 1", "rest"]]);
      // Nothing of the refused ones was kept: not in the queue, not in failed/.
      expect(files(relay.ready.outbox, "failed")).toEqual([]);
      expect(relay.events.filter((e) => e.event === "failed")).toEqual([]);
      expect(relay.events.filter((e) => e.event === "queued")).toHaveLength(1);
      const refused = relay.events.filter((e) => e.event === "refused");
      expect(refused.map((e) => e.code)).toEqual([451, 451]);
      expect((await relay.stop()).exitCode).toBe(0);
    } finally {
      await relay.stop().catch(() => {});
      s.remove();
    }
  });

  test.skipIf(lacks(swaks))(
    "REST only, --no-deliver: swaks's plain-text test message is refused too (the relay's own settings decide)",
    async () => {
      const s = scratch("mailsend-relay-intake-nd-");
      const relay = await startRelayChild(restOnlyEnv(s), ["--no-deliver"]);
      try {
        const r = await execa(
          "swaks",
          [
            "--server",
            `127.0.0.1:${relay.ready.port}`,
            "--timeout",
            "20",
            "--from",
            "ci@example.com",
            "--to",
            "dev@example.com",
            "--header",
            "Subject: intake swaks",
          ],
          {
            reject: false,
            timeout: 60_000,
            all: true,
          },
        );
        const out = String(r.all ?? "");
        expect(r.exitCode, out).not.toBe(0);
        expect(out).toMatch(
          /<\*\* 451 4\.3\.5 this message cannot go over REST without loss \(a text-only body\), and no SMTP server is configured; configure an SMTP server \(MAILSEND_SMTP_HOST\) for such mail/,
        );
        expect(files(relay.ready.outbox, "queue")).toEqual([]);
        expect(files(relay.ready.outbox, "failed")).toEqual([]);
      } finally {
        await relay.stop();
        s.remove();
      }
    },
  );

  test("REST and SMTP configured (auto): the text-only message is 250 and goes over SMTP, the HTML one over REST", async () => {
    const s = scratch("mailsend-relay-intake-both-");
    const relay = await startRelayChild({ ...t.env, MAILSEND_STATE_DIR: join(s.dir, "state") }, ["-v"]);
    try {
      const replies = await python(s, relay.ready.port, "intake both", ["text", "html"]);
      expect(replies.map((r) => r.code)).toEqual([250, 250]);
      await until(async () => (await subjects("intake both")).length >= 2, 60_000);
      await until(() => files(relay.ready.outbox, "queue").length === 0, 10_000);
      const got = (await subjects("intake both")).map((m) => [m.subject, m.channel]).sort();
      expect(got).toEqual([
        ["intake both html 1", "rest"],
        ["intake both text 0", "smtp"],
      ]);
      // The client gave no Date or Message-ID: the relay stamped them, as an MTA does (over SMTP the message goes as taken).
      const overSmtp = (await subjects("intake both")).find((m) => m.channel === "smtp")!;
      const stored = (await t.sb.store.raw(overSmtp.id))!.toString("latin1");
      const head = stored.slice(0, stored.search(/\r?\n\r?\n/));
      expect(head).toMatch(/^Date: \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}$/m);
      expect(head).toMatch(/^Message-ID: <[^\s@<>]+@example\.com>$/m);
      expect(head.match(/^Message-ID:/gim)).toHaveLength(1);
      expect(files(relay.ready.outbox, "failed")).toEqual([]);
      expect((await relay.stop()).exitCode).toBe(0);
    } finally {
      await relay.stop().catch(() => {});
      s.remove();
    }
  });

  test("MAILSEND_TRANSPORT=rest with SMTP configured too: the runner would fail it (rest is asked for), so it is refused at intake", async () => {
    const s = scratch("mailsend-relay-intake-rest-");
    const relay = await startRelayChild(
      { ...t.env, MAILSEND_STATE_DIR: join(s.dir, "state"), MAILSEND_TRANSPORT: "rest" },
      ["--no-deliver"],
    );
    try {
      const replies = await python(s, relay.ready.port, "intake forced", ["text", "html"]);
      expect(replies.map((r) => r.code)).toEqual([451, 250]);
      expect(replies[0]!.reply).toMatch(
        /^4\.3\.5 this message cannot go over REST without loss \(a text-only body\), and the transport is rest \(MAILSEND_TRANSPORT\); configure an SMTP server \(MAILSEND_SMTP_HOST\) and MAILSEND_TRANSPORT=auto for such mail$/,
      );
      expect(files(relay.ready.outbox, "queue").filter((n) => n.endsWith(".msg"))).toHaveLength(1);
    } finally {
      await relay.stop();
      s.remove();
    }
  });
});

/** Raw messages as programs write them, one per DATA: [envelope sender, recipient, message]. */
const PY_RAW = `
import json, smtplib, sys
port = int(sys.argv[1])
msgs = json.loads(sys.argv[2])
s = smtplib.SMTP("127.0.0.1", port, timeout=60)
for sender, rcpt, msg in msgs:
    try:
        s.sendmail(sender, [rcpt], msg.encode("utf-8"))
        print(json.dumps({"code": 250}), flush=True)
    except smtplib.SMTPException as e:
        print(json.dumps({"code": getattr(e, "smtp_code", 0), "reply": str(e)}), flush=True)
s.quit()
`;
import { lacks, python3, swaks } from "../helpers/tools.js";
import { until } from "../helpers/until.js";

describe.skipIf(lacks(python3))("relay intake: what an MTA adds for local clients", () => {
  test("no From (Python's smtplib example) gets the envelope sender's; To: undisclosed-recipients:; and a header-only message are taken; all delivered", async () => {
    const s = scratch("mailsend-relay-intake-stamps-");
    const relay = await startRelayChild({ ...t.env, MAILSEND_STATE_DIR: join(s.dir, "state") });
    try {
      const msgs = [
        ["my@example.com", "your@example.com", "Subject: stamps py example\n\nThis message is sent from Python."],
        [
          "my@example.com",
          "your@example.com",
          "From: my@example.com\nTo: undisclosed-recipients:;\nSubject: stamps undisclosed\n\nBcc only",
        ],
        [
          "my@example.com",
          "your@example.com",
          "From: my@example.com\nTo: your@example.com\nSubject: stamps header only",
        ],
      ];
      const r = await execa("python3", [s.file("raw.py", PY_RAW), String(relay.ready.port), JSON.stringify(msgs)], {
        reject: false,
        timeout: 120_000,
      });
      expect(r.exitCode, String(r.stderr)).toBe(0);
      expect(
        String(r.stdout)
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l).code),
      ).toEqual([250, 250, 250]);
      await until(async () => (await subjects("stamps ")).length >= 3, 60_000);
      const got = await subjects("stamps ");
      const example = got.find((m) => m.subject === "stamps py example")!;
      expect(example.from).toMatch(/my@example\.com/);
      expect(got.map((m) => m.subject).sort()).toEqual([
        "stamps header only",
        "stamps py example",
        "stamps undisclosed",
      ]);
      expect(files(relay.ready.outbox, "failed")).toEqual([]);
    } finally {
      await relay.stop();
      s.remove();
    }
  });
});
