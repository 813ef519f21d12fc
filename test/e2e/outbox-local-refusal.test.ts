/**
 * A refusal by this machine's own setup, not by the service: the budget's Redis (a real
 * redis-server) refusing mailsend's password, or its ACL user lacking the budget's commands. The
 * message is not at fault, so what an outbox took stays in it, deferred, until the setting is
 * fixed; it is never moved to failed/ after one attempt. A sendmail caller (cron) gets its
 * message queued and exit 0, as when the Redis cannot be reached, not 77 with nothing kept.
 * And the service refusing the key of mail already queued (accepted by the relay, say): it waits
 * for the key to be fixed (as Postfix defers on a refused login), not failed/ at once.
 */
import { execa } from "execa";
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, BIN, runCli, runInProcess, stdoutJson } from "../helpers/cli.js";
import { startRedis, type RedisHandle } from "../helpers/redis.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";

let t: TestSandbox;
let s: Scratch;
let redis: RedisHandle;
let sendmail: string;
let seq = 0;

const PASSWORD = "right-redis-secret-7";
useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-local-refusal-");
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  symlinkSync(BIN, sendmail);
  if (redisServer.present)
    redis = await startRedis({
      password: PASSWORD,
      users: [
        ["lowly", "on", ">lowly-secret-8", "~mailsend:*", "+select", "+ping", "+time", "+hello", "+auth", "+client"],
      ],
    });
});
afterAll(async () => {
  await redis?.stop();
  s?.remove();
});

function env(redisUrl: string): Record<string, string> {
  const state = join(s.dir, `state-${seq++}`);
  return {
    ...baseEnv(),
    ...t.env,
    MAILSEND_STATE_DIR: state,
    MAILSEND_TRANSPORT: "rest",
    MAILSEND_QUEUE_AUTORUN: "0",
    MAILSEND_RATE_LIMIT: "60",
    MAILSEND_RATE_LIMIT_URL: redisUrl,
  } as Record<string, string>;
}
const failed = (e: Record<string, string>) => {
  try {
    return readdirSync(join(e.MAILSEND_STATE_DIR!, "outbox", "failed")).filter((f) => f.endsWith(".msg"));
  } catch {
    return [];
  }
};
const stored = async (subject: string) =>
  (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject === subject).length;

describe.skipIf(lacks(redisServer))("the budget's Redis refuses this machine's credentials", () => {
  for (const [what, url] of [
    ["a wrong password", () => `redis://:wrong-password-9@127.0.0.1:${redis.port}`],
    ["an ACL user without EVAL", () => `redis://lowly:lowly-secret-8@127.0.0.1:${redis.port}`],
  ] as const) {
    it(`${what}: queue run defers the message (never failed/); once the URL is right it goes, once`, async () => {
      const e = env(url());
      const subject = `local refusal ${seq}`;
      const q = await runCli(
        [
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
          "--json",
        ],
        { env: e },
      );
      expect(q.exitCode, q.stderr).toBe(0);
      const run = await runCli(["queue", "run", "--json"], { env: e, timeoutMs: 60_000 });
      expect(run.stdout, run.stderr).toContain('"event":"deferred"');
      expect(run.stdout).not.toContain('"event":"failed"');
      expect(run.stdout + run.stderr).not.toMatch(/wrong-password-9|lowly-secret-8/);
      expect(failed(e)).toEqual([]);
      const rows = stdoutJson(await runInProcess(["queue", "--json"], { env: e }));
      expect(rows).toHaveLength(1);
      expect(rows[0].last_error?.exit).toBe(77);

      const fixed = { ...e, MAILSEND_RATE_LIMIT_URL: `redis://:${PASSWORD}@127.0.0.1:${redis.port}` };
      expect((await runInProcess(["queue", "retry", "--all"], { env: fixed })).exitCode).toBe(0);
      const again = await runCli(["queue", "run", "--json"], { env: fixed, timeoutMs: 60_000 });
      expect(again.stdout, again.stderr).toContain('"event":"sent"');
      expect(await stored(subject)).toBe(1);
      expect(stdoutJson(await runInProcess(["queue", "--json"], { env: fixed }))).toEqual([]);
    }, 90_000);
  }

  it("sendmail -t with a wrong Redis password: queued, exit 0 (as with an unreachable Redis), not 77 with nothing kept", async () => {
    const e = env(`redis://:wrong-password-9@127.0.0.1:${redis.port}`);
    const subject = `local refusal sendmail ${seq}`;
    const r = await execa(sendmail, ["-t", "-oi"], {
      input: `From: cron@example.com\nTo: ops@example.com\nSubject: ${subject}\nContent-Type: text/html\n\n<p>body</p>\n`,
      env: e,
      extendEnv: false,
      reject: false,
      timeout: 60_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain("wrong-password-9");
    const rows = stdoutJson(await runInProcess(["queue", "--json"], { env: e }));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ subject });
    expect(await stored(subject)).toBe(0);
  }, 90_000);
});

describe("the service refuses the key of mail already queued", () => {
  it("queue run defers it (never failed/); with the right key it goes, once", async () => {
    const e = env("");
    delete e.MAILSEND_RATE_LIMIT_URL;
    const subject = `key refused ${seq}`;
    const q = await runCli(
      ["send", "-f", "cron@example.com", "-t", "ops@example.com", "-s", subject, "--text", "x", "--queue", "always"],
      { env: e },
    );
    expect(q.exitCode, q.stderr).toBe(0);
    const { MAILSEND_API_KEY_FILE: _file, ...noFile } = e;
    const wrong = { ...noFile, MAILSEND_API_KEY: "msk_notakeyofthissandbox000000000000000" };
    const run = await runCli(["queue", "run", "--json"], { env: wrong, timeoutMs: 60_000 });
    expect(run.stdout, run.stderr).toContain('"event":"deferred"');
    expect(run.stdout).not.toContain('"event":"failed"');
    expect(failed(e)).toEqual([]);
    const rows = stdoutJson(await runInProcess(["queue", "--json"], { env: e }));
    expect(rows).toHaveLength(1);
    expect(rows[0].last_error?.exit).toBe(77);

    expect((await runInProcess(["queue", "retry", "--all"], { env: e })).exitCode).toBe(0);
    const again = await runCli(["queue", "run", "--json"], { env: e, timeoutMs: 60_000 });
    expect(again.stdout, again.stderr).toContain('"event":"sent"');
    expect(await stored(subject)).toBe(1);
  }, 90_000);
});

describe("a backlog whose key the service refuses", () => {
  it("is not a burst of failed logins: once one message finds the key refused, the rest of that run wait with it, untried; queue retry tries them all again", async () => {
    const e = env("");
    delete e.MAILSEND_RATE_LIMIT_URL;
    const prefix = `backlog ${seq} `;
    for (let i = 0; i < 12; i++) {
      const q = await runCli(
        [
          "send",
          "-f",
          "cron@example.com",
          "-t",
          "ops@example.com",
          "-s",
          `${prefix}${i}`,
          "--text",
          "x",
          "--queue",
          "always",
          "-q",
        ],
        { env: e },
      );
      expect(q.exitCode, q.stderr).toBe(0);
    }
    const { MAILSEND_API_KEY_FILE: _file, ...noFile } = e;
    const wrong = { ...noFile, MAILSEND_API_KEY: "msk_notakeyofthissandbox000000000000000" };
    const before = t.sb.stats.rest.authFailed;
    const run = await runCli(["queue", "run", "--json"], { env: wrong, timeoutMs: 60_000 });
    expect(run.stdout.match(/"event":"deferred"/g) ?? [], run.stderr).toHaveLength(12);
    // At most the runner's 4 lanes ask before the first refusal is known; the other 8 never ask.
    expect(t.sb.stats.rest.authFailed - before).toBeLessThanOrEqual(4);
    const rows = stdoutJson(await runInProcess(["queue", "--json"], { env: e }));
    expect(rows).toHaveLength(12);
    for (const r of rows) expect(r.last_error?.exit).toBe(77);

    expect((await runInProcess(["queue", "retry", "--all"], { env: e })).exitCode).toBe(0);
    const again = await runCli(["queue", "run", "--json"], { env: e, timeoutMs: 60_000 });
    expect(again.stdout.match(/"event":"sent"/g) ?? [], again.stderr).toHaveLength(12);
    expect((await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject.startsWith(prefix))).toHaveLength(12);
  }, 120_000);
});

describe("a channel configured wrongly (the SMTP username set to the key)", () => {
  it("queued mail only that channel can carry waits (deferred, 78), not failed/ as if SMTP were not configured", async () => {
    const e = env("");
    delete e.MAILSEND_RATE_LIMIT_URL;
    e.MAILSEND_TRANSPORT = "auto";
    const subject = `broken channel ${seq}`;
    // Text only, from a sendmail caller: over REST it would lose its text/plain, so it needs SMTP.
    const r = await execa(sendmail, ["-t", "-oi", "--queue", "always"], {
      input: `From: cron@example.com\nTo: ops@example.com\nSubject: ${subject}\n\nplain text\n`,
      env: e,
      extendEnv: false,
      reject: false,
      timeout: 60_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const key = readFileSync(e.MAILSEND_API_KEY_FILE!, "utf8").trim();
    const run = await runCli(["queue", "run", "--json"], { env: { ...e, MAILSEND_SMTP_USER: key }, timeoutMs: 60_000 });
    expect(run.stdout, run.stderr).toContain('"event":"deferred"');
    expect(run.stdout).not.toContain('"event":"failed"');
    expect(run.stdout + run.stderr).not.toContain(key);
    expect(failed(e)).toEqual([]);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env: e }))[0].last_error?.exit).toBe(78);
    expect((await runInProcess(["queue", "retry", "--all"], { env: e })).exitCode).toBe(0);
    const again = await runCli(["queue", "run", "--json"], { env: e, timeoutMs: 60_000 });
    expect(again.stdout, again.stderr).toContain('"event":"sent"');
    expect(await stored(subject)).toBe(1);
  }, 90_000);
});
