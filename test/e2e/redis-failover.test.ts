/**
 * A managed Redis fails over: the name in MAILSEND_RATE_LIMIT_URL now leads to
 * the new primary, and the old one, demoted to a replica, keeps the connections
 * it had. Here the name is a TCP forwarder of the test (new connections go to
 * the current primary, open ones stay where they were), the servers are real
 * redis-servers, and the process that holds its connection is `mailsend relay`
 * (its runner delivers for as long as it runs). Its next take is answered
 * READONLY: the relay must connect again and deliver, not defer the mail on the
 * old connection again and again.
 */
import { execFileSync } from "node:child_process";
import net from "node:net";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { startRedis } from "../helpers/redis.js";
import { startRelayChild } from "../helpers/relay.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
useSandbox((sb) => (t = sb));

/** The service's DNS name: each new connection goes to `target`, read when it opens. */
async function forwarder(): Promise<{ port: number; target: number; stop(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const state = { port: 0, target: 0, stop: async () => {} };
  const server = net.createServer((c) => {
    const up = net.connect(state.target, "127.0.0.1");
    for (const s of [c, up]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        c.destroy();
        up.destroy();
      });
    }
    c.pipe(up).pipe(c);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  state.port = (server.address() as net.AddressInfo).port;
  state.stop = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return state;
}

async function submit(port: number, subject: string): Promise<void> {
  const d = await SmtpDialog.connect(port);
  await d.cmd("EHLO app.test");
  expect(await d.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
  expect(await d.cmd("RCPT TO:<dev@example.com>")).toMatch(/^250/);
  expect(await d.cmd("DATA")).toMatch(/^354/);
  d.write(
    `From: app@example.com\r\nTo: dev@example.com\r\nSubject: ${subject}\r\nContent-Type: text/html\r\n\r\n<p>${subject}</p>\r\n.\r\n`,
  );
  expect(await d.reply()).toMatch(/^250 /);
  await d.quit();
}

async function stored(subject: string): Promise<number> {
  return (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject === subject).length;
}

describe.skipIf(lacks(redisServer))("the budget's Redis fails over under a running relay", () => {
  test("the take answered READONLY by the demoted primary connects again, reaches the new one, and the mail goes at once", async () => {
    const s = scratch("mailsend-redis-failover-");
    const primary = await startRedis();
    const next = await startRedis();
    const name = await forwarder();
    name.target = primary.port;
    const relay = await startRelayChild(
      {
        ...t.env,
        MAILSEND_STATE_DIR: join(s.dir, "state"),
        MAILSEND_TRANSPORT: "rest",
        MAILSEND_RATE_LIMIT: "60",
        MAILSEND_RATE_LIMIT_URL: `redis://127.0.0.1:${name.port}`,
      },
      ["-v"],
    );
    try {
      await submit(relay.ready.port, "failover before");
      await until(async () => (await stored("failover before")) === 1, 15_000);

      // The failover: new connections reach `next`; the old primary becomes its replica.
      name.target = next.port;
      execFileSync("redis-cli", ["-p", String(primary.port), "REPLICAOF", "127.0.0.1", String(next.port)]);

      await submit(relay.ready.port, "failover after");
      // Without a new connection it would be deferred (READONLY) and tried again only a minute later.
      await until(async () => (await stored("failover after")) === 1, 15_000);
      const deferred = relay.events.filter((e) => /READONLY/.test(JSON.stringify(e)));
      expect(deferred).toEqual([]);
      // Its slot is in the new primary's log.
      const keys = execFileSync("redis-cli", ["-p", String(next.port), "--raw", "KEYS", "mailsend:ratelimit:*"], {
        encoding: "utf8",
      });
      expect(keys).toMatch(/mailsend:ratelimit:/);
    } finally {
      await relay.stop();
      await name.stop();
      await Promise.all([primary.stop(), next.stop()]);
      s.remove();
    }
  });
});
