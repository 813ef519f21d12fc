/**
 * A Redis that stops answering (SIGSTOP: a frozen VM, a swap storm) during a batch: every slot
 * request waits out the store's timeout. Were each item to do so in turn, a large batch would take
 * hours, all failing; so after a few items in a row the batch starts no more, ends 75 and says a
 * re-run sends the rest, which it does once Redis is back.
 * The built binary, a real redis-server, the sandbox on 127.0.0.1.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { runCli } from "../helpers/cli.js";
import { startRedis } from "../helpers/redis.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { lacks, redisServer } from "../helpers/tools.js";

let t: TestSandbox;
useSandbox((sb) => (t = sb), { rateLimit: 1_000_000 });

describe.skipIf(lacks(redisServer))("a batch whose Redis budget stops answering", () => {
  test("stops starting items after a few that could not get a slot, ends 75; a re-run after Redis is back sends the rest once", async () => {
    const redis = await startRedis();
    try {
      const file = join(t.scratch.dir, "frozen.jsonl");
      writeFileSync(
        file,
        `${Array.from({ length: 60 }, (_, i) => JSON.stringify({ from: "ci@example.com", to: "dev@example.com", subject: `frozen ${i}`, text: "x" })).join("\n")}\n`,
      );
      const env = {
        ...t.env,
        MAILSEND_STATE_DIR: join(t.scratch.dir, "state"),
        MAILSEND_RATE_LIMIT: "1000000",
        MAILSEND_RATE_LIMIT_URL: redis.url,
      };
      process.kill(redis.pid, "SIGSTOP");
      let r;
      try {
        r = await runCli(["batch", file, "--concurrency", "2"], { env, timeoutMs: 90_000 });
      } finally {
        process.kill(redis.pid, "SIGCONT");
      }
      expect(r.timedOut).toBe(false);
      expect(r.exitCode, r.stderr).toBe(75);
      expect(r.stderr).toMatch(
        /the rate-limit budget could not be asked for a slot for 3 items in a row \(.*did not answer in time.*\); no further item is started/,
      );
      expect(r.stdout).toMatch(
        /0 sent, \d+ failed, \d+ not started \(the rate-limit budget could not be reached\) \(of 60\)/,
      );
      const failed = Number(/(\d+) failed/.exec(r.stdout)![1]);
      expect(failed).toBeLessThan(10);
      expect((await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith("frozen ")).length).toBe(0);

      const again = await runCli(["batch", file, "--concurrency", "2", "-q"], { env, timeoutMs: 90_000 });
      expect(again.exitCode, again.stderr).toBe(0);
      expect((await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith("frozen ")).length).toBe(60);
    } finally {
      await redis.stop();
    }
  }, 180_000);
});
