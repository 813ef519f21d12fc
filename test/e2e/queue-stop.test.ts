/**
 * A runner stopped while a message waits for a rate-limit slot leaves it queued, never failed:
 * it was not tried. The built CLI (`mailsend queue run`, then SIGTERM as systemd sends it) against
 * an in-process sandbox, with a budget of one send a minute.
 */
import { execa } from "execa";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { baseEnv, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
useSandbox((sb) => (t = sb));

it("SIGTERM during the budget wait: the waiting message stays in queue/ with nothing recorded against it", async () => {
  const state = join(t.scratch.dir, "state-stop");
  const env = {
    ...baseEnv(),
    ...t.env,
    MAILSEND_STATE_DIR: state,
    MAILSEND_QUEUE_AUTORUN: "0",
    MAILSEND_RATE_LIMIT: "1",
    MAILSEND_RATE_WINDOW: "60",
    MAILSEND_TRANSPORT: "rest",
  };
  for (const subject of ["first of two", "second of two"]) {
    const q = await execa(
      ...mailsendCommand([
        "send",
        "-f",
        "cron@example.com",
        "-t",
        "ops@example.com",
        "-s",
        subject,
        "--text",
        "x",
        "--queue",
        "always",
      ]),
      { env, extendEnv: false, reject: false },
    );
    expect(q.exitCode, q.stderr).toBe(0);
  }
  const runner = execa(...mailsendCommand(["queue", "run"]), {
    env,
    extendEnv: false,
    reject: false,
    timeout: 30_000,
  });
  await until(async () => (await t.sb.store.list({ limit: 10 })).length === 1, 15_000);
  await new Promise((r) => setTimeout(r, 500));
  runner.kill("SIGTERM");
  const r = await runner;
  expect(r.stdout + r.stderr).not.toMatch(/ failed \w{10,}: /);
  expect(r.stderr).toMatch(/sent 1, deferred 0, failed 0; 1 left in the outbox/);
  const failed = join(state, "outbox", "failed");
  expect(existsSync(failed) ? readdirSync(failed) : []).toEqual([]);
  expect(readdirSync(join(state, "outbox", "queue")).filter((f) => f.endsWith(".msg"))).toHaveLength(1);
});
