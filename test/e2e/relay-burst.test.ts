/**
 * A burst into the relay: 300 messages from 10 concurrent SMTP clients
 * (Python's smtplib, one connection each) while the service allows 60 per
 * window. The clients never see a refusal (the relay queues), the sandbox
 * never answers 429 (the relay's runner keeps to the budget), and each of the
 * 300 arrives exactly once. A 6 s window stands for the service's 60 s.
 */
import { execa } from "execa";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { startRelayChild } from "../helpers/relay.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, python3 } from "../helpers/tools.js";
import { until } from "../helpers/until.js";

const LIMIT = 60;
const WINDOW_S = 6;
const CLIENTS = 10;
const EACH = 30;

// One client: its own connection, EACH messages, one JSON line per DATA reply.
const CLIENT = `
import json, smtplib, sys
port, prefix, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = smtplib.SMTP("127.0.0.1", port, timeout=60)
s.ehlo("burst.test")
for i in range(n):
    subject = "%s %d" % (prefix, i)
    msg = "From: App <app@example.com>\\r\\nTo: dev@example.com\\r\\nSubject: %s\\r\\nMIME-Version: 1.0\\r\\nContent-Type: text/html; charset=utf-8\\r\\n\\r\\n<p>%s</p>\\r\\n" % (subject, subject)
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

let t: TestSandbox;
useSandbox((sb) => (t = sb), { rateLimit: LIMIT, rateWindowMs: WINDOW_S * 1000 });

describe.skipIf(lacks(python3))("relay burst", () => {
  test(`${CLIENTS * EACH} messages from ${CLIENTS} concurrent SMTP clients, limit ${LIMIT} per window: no refusal, no 429, each exactly once`, async () => {
    const s = scratch("mailsend-relay-burst-");
    const script = s.file("client.py", CLIENT);
    const before = t.sb.stats.toJSON();
    const relay = await startRelayChild(
      {
        ...t.env,
        MAILSEND_STATE_DIR: join(s.dir, "state"),
        MAILSEND_TRANSPORT: "rest",
        MAILSEND_RATE_LIMIT: String(LIMIT),
        MAILSEND_RATE_WINDOW: String(WINDOW_S),
      },
      ["--concurrency", "8"],
    );
    try {
      const runs = await Promise.all(
        Array.from({ length: CLIENTS }, (_, c) =>
          execa("python3", [script, String(relay.ready.port), `burst c${c}`, String(EACH)], {
            reject: false,
            timeout: 120_000,
          }),
        ),
      );
      const replies = runs.flatMap((r) => {
        expect(r.exitCode, String(r.stderr)).toBe(0);
        return String(r.stdout)
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { subject: string; code: number; reply: string });
      });
      expect(replies).toHaveLength(CLIENTS * EACH);
      // Zero refusals reach the clients: every DATA got 250 with its outbox id.
      expect(replies.filter((r) => r.code !== 250)).toEqual([]);
      expect(new Set(replies.map((r) => /queued as (\S+)/.exec(r.reply)?.[1])).size).toBe(CLIENTS * EACH);

      const burst = async () =>
        (await t.sb.store.list({ limit: 100_000 })).filter((m) => m.subject.startsWith("burst "));
      await until(async () => (await burst()).length >= CLIENTS * EACH, 150_000);
      const q = join(relay.ready.outbox, "queue");
      await until(() => !existsSync(q) || readdirSync(q).filter((n) => n.endsWith(".msg")).length === 0, 15_000);

      const got = (await burst()).map((m) => m.subject);
      const want = Array.from({ length: CLIENTS }, (_, c) =>
        Array.from({ length: EACH }, (_, i) => `burst c${c} ${i}`),
      ).flat();
      // Each of the 300 exactly once.
      expect(got.slice().sort()).toEqual(want.slice().sort());
      const after = t.sb.stats.toJSON();
      expect(after.rest.rateLimited - before.rest.rateLimited).toBe(0);
      expect(after.rest.accepted - before.rest.accepted).toBe(CLIENTS * EACH);
      // No message was even posted twice (the sandbox would drop a repeat of its idempotency key, so count them).
      expect(after.rest.duplicates - before.rest.duplicates, JSON.stringify(after.rest)).toBe(0);
      expect(relay.events.filter((e) => e.event === "failed" || e.event === "deferred")).toEqual([]);
      expect((await relay.stop()).exitCode).toBe(0);
    } finally {
      await relay.stop();
      s.remove();
    }
  }, 240_000);
});
