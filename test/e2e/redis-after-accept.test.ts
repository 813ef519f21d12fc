/**
 * Once the provider accepted a message, mailsend says it was sent
 * and exits 0, whatever book-keeping fails afterwards. Here the budget's
 * Redis (a real redis-server) is stopped while the sandbox holds its 200
 * back (latency after the message is stored): recording the slot then fails,
 * which must be a warning (stderr, and "warnings" in --json), never an exit
 * code that makes a script send the message again.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { runCli } from "../helpers/cli.js";
import { startRedis } from "../helpers/redis.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
let tmp: Scratch;
useSandbox((sb) => (t = sb), { faults: { latencyMs: 4_000 } });
beforeAll(async () => {
  tmp = scratch("mailsend-redis-accept-");
});
afterAll(async () => {
  tmp?.remove();
});

describe.skipIf(lacks(redisServer))("Redis stopped after the provider accepted", () => {
  for (const json of [false, true]) {
    test(`exit 0, the message id, and a warning naming the Redis${json ? " (--json: warnings)" : ""}`, async () => {
      const redis = await startRedis({ password: "accept-secret-1" });
      const subject = `accepted ${json ? "json" : "human"}`;
      try {
        const running = runCli(
          [
            "send",
            "-f",
            "ci@example.com",
            "-t",
            "dev@example.com",
            "-s",
            subject,
            "--text",
            "hi",
            ...(json ? ["--json"] : []),
          ],
          {
            env: {
              ...t.env,
              MAILSEND_STATE_DIR: tmp.dir,
              MAILSEND_RATE_LIMIT: "60",
              MAILSEND_RATE_LIMIT_URL: `redis://:accept-secret-1@127.0.0.1:${redis.port}`,
            },
            timeoutMs: 60_000,
          },
        );
        // Stored by the sandbox (accepted), its 200 held back for 4 s: now Redis goes away.
        await until(async () => (await t.sb.store.list({ limit: 100 })).some((m) => m.subject === subject), 30_000);
        await redis.stop();
        const r = await running;
        expect(r.exitCode, r.stderr).toBe(0);
        const stored = (await t.sb.store.list({ limit: 100 })).filter((m) => m.subject === subject);
        expect(stored).toHaveLength(1);
        expect(r.stdout + r.stderr).not.toContain("accept-secret-1");
        if (json) {
          const out = JSON.parse(r.stdout.trim());
          expect(out.message_id).toBe(stored[0]!.messageId);
          expect(out.warnings?.join("\n")).toMatch(new RegExp(`127\\.0\\.0\\.1:${redis.port}`));
        } else {
          expect(r.stdout).toContain(stored[0]!.messageId);
          expect(r.stderr).toMatch(/^warning: .*sent.*/m);
          expect(r.stderr).toMatch(new RegExp(`127\\.0\\.0\\.1:${redis.port}`));
        }
      } finally {
        await redis.stop();
      }
    });
  }
});
