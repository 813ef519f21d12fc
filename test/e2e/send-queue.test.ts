/**
 * `mailsend send --queue`: deliver now else queue, and queued mail going out
 * by itself through the background runner, with nothing else running.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runCli, runInProcess, stdoutJson } from "../helpers/cli.js";
import { inProcessSandbox, overRest, type TestSandbox } from "../helpers/sandbox.js";
import { until } from "../helpers/until.js";

let sb: TestSandbox;
const outboxes: string[] = [];
beforeAll(async () => {
  sb = overRest(await inProcessSandbox());
});
/** A background runner a test left behind is stopped (it would exit by itself once the outbox is empty). */
function stopRunners() {
  for (const dir of outboxes) {
    const pidFile = join(dir, "runner.pid");
    if (!existsSync(pidFile)) continue;
    try {
      process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
    } catch {}
  }
}
afterEach(stopRunners);
afterAll(async () => {
  stopRunners();
  await sb.stop();
  sb.scratch.remove();
});

let n = 0;
function fresh(extra: Record<string, string> = {}) {
  const dir = join(sb.scratch.dir, `outbox-${n++}`);
  outboxes.push(dir);
  return { dir, env: { ...sb.env, MAILSEND_OUTBOX_DIR: dir, ...extra } };
}
const args = (subject: string) => [
  "send",
  "-f",
  "cron@example.com",
  "-t",
  "ops@example.com",
  "-s",
  subject,
  "--text",
  "disk 91% full",
];

async function waitStored(subject: string, count: number, ms = 30_000) {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    const got = (await sb.sb.store.list()).filter((m) => m.subject === subject);
    if (got.length >= count) return got;
    await new Promise((r) => setTimeout(r, 250));
  }
  return (await sb.sb.store.list()).filter((m) => m.subject === subject);
}

describe("send --queue", () => {
  it("auto: sends at once when it can, and leaves nothing in the outbox", async () => {
    const { env } = fresh({ MAILSEND_QUEUE_AUTORUN: "0" });
    const r = await runCli([...args("q-now"), "--queue", "auto", "--json"], { env, timeoutMs: 60_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(stdoutJson(r)).toMatchObject({ ok: true, transport: "rest" });
    expect(await waitStored("q-now", 1, 1000)).toHaveLength(1);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
  });

  it("auto: when the budget is used up it queues (exit 0), and the background runner delivers it by itself, once", async () => {
    // Its own sandbox: 2 messages per 10 s for the key, the same limit mailsend keeps.
    const tight = overRest(await inProcessSandbox({ rateLimit: 2, rateWindowMs: 10_000 }));
    try {
      const dir = join(tight.scratch.dir, "outbox");
      outboxes.push(dir);
      const env = {
        ...tight.env,
        MAILSEND_OUTBOX_DIR: dir,
        MAILSEND_RATE_LIMIT: "2",
        MAILSEND_RATE_WINDOW: "10",
        MAILSEND_STATE_DIR: join(tight.scratch.dir, "state"),
      };
      const results = await Promise.all(
        Array.from({ length: 5 }, () => runCli([...args("q-burst"), "--queue", "auto"], { env, timeoutMs: 60_000 })),
      );
      for (const r of results) expect(r.exitCode, r.stderr).toBe(0);
      const queued = results.filter((r) => r.stdout.startsWith("queued "));
      expect(queued.length).toBeGreaterThan(0);
      expect(queued[0]!.stdout).toMatch(/^queued [0-9a-z]{19} \(.*rate limit/);
      // Nobody runs the queue: it drains by itself, within the budget, each message once.
      const stored = async () => (await tight.sb.store.list()).filter((m) => m.subject === "q-burst");
      await until(async () => (await stored()).length >= 5, {
        what: "the 5 queued messages to be delivered",
        timeoutMs: 60_000,
        everyMs: 250,
      });
      const got = await stored();
      expect(got).toHaveLength(5);
      expect(new Set(got.map((m) => m.idempotencyKey)).size).toBe(5);
      await until(() => !existsSync(join(dir, "runner.pid")), {
        what: "the background runner to exit",
        timeoutMs: 10_000,
        everyMs: 250,
      });
      expect(existsSync(join(dir, "runner.pid")), "the background runner exits when the outbox is empty").toBe(false);
      expect(readFileSync(join(dir, "runner.log"), "utf8")).toMatch(/sent/);
      expect(tight.sb.stats.rest.rateLimited).toBe(0);
    } finally {
      stopRunners();
      await tight.stop();
      tight.scratch.remove();
    }
  }, 120_000);

  it("always: only queues; the message keeps send's transport and key", async () => {
    const { env } = fresh({ MAILSEND_QUEUE_AUTORUN: "0" });
    const r = await runCli([...args("q-always"), "--queue", "always", "--json", "--idempotency-key", "fixed-key-1"], {
      env,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const out = stdoutJson(r);
    expect(out).toMatchObject({ ok: true, queued: true, idempotency_key: "fixed-key-1" });
    const rows = stdoutJson(await runInProcess(["queue", "--json"], { env }));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: out.id, subject: "q-always", recipients: ["ops@example.com"], source: "send" });
    const run = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
    expect(run.stdout).toContain('"event":"sent"');
    const got = await waitStored("q-always", 1, 1000);
    expect(got[0]).toMatchObject({ channel: "rest", idempotencyKey: "fixed-key-1" });
  }, 60_000);

  it("connection flags with --queue: refused (64), nothing queued; with MAILSEND_QUEUE set, the flags win and it is sent now", async () => {
    // The environment names a port where nothing listens: the flag's address is the sandbox.
    const { env } = fresh({ MAILSEND_QUEUE_AUTORUN: "0", MAILSEND_BASE_URL: "http://127.0.0.1:9" });
    const r = await runCli([...args("q-flags"), "--queue", "always", "--base-url", sb.env.MAILSEND_BASE_URL!], { env });
    expect(r.exitCode, r.stderr).toBe(64);
    expect(r.stderr).toMatch(/--base-url cannot be used with --queue always/);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);

    const viaEnv = await runCli([...args("q-flags-env"), "--base-url", sb.env.MAILSEND_BASE_URL!, "--json"], {
      env: { ...env, MAILSEND_QUEUE: "auto" },
      timeoutMs: 60_000,
    });
    expect(viaEnv.exitCode, viaEnv.stderr).toBe(0);
    expect(stdoutJson(viaEnv)).toMatchObject({ ok: true, transport: "rest" });
    expect(viaEnv.stderr).toMatch(/MAILSEND_QUEUE=auto is not used for this message: --base-url/);
    expect(await waitStored("q-flags-env", 1, 5000)).toHaveLength(1);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
  }, 60_000);

  it("queued with MAILSEND_QUEUE_AUTORUN=0: the line says who delivers it, not that it goes out by itself", async () => {
    const { env } = fresh({ MAILSEND_QUEUE_AUTORUN: "0" });
    const r = await runCli([...args("q-noauto"), "--queue", "always"], { env });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^queued \S+ \(.*`mailsend queue run` \(or the relay\) delivers it\)$/m);
    // --quiet: nothing on success, queued included.
    const quiet = await runCli([...args("q-quiet"), "--queue", "always", "-q"], { env });
    expect(quiet.exitCode, quiet.stderr).toBe(0);
    expect(quiet.stdout + quiet.stderr).toBe("");
    // queue run -v says which transport and why.
    const run = await runCli(["queue", "run", "-v"], { env, timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/ sent \S+ \S+ \((rest|smtp): [^,]+, to ops@example\.com\)$/m);
    const auto = await runCli([...args("q-auto-line"), "--queue", "always"], { env: fresh().env });
    expect(auto.stdout).toMatch(/it goes out by itself\)$/m);
  });

  it("a refused key is never queued: the error and its exit code at once", async () => {
    const { env } = fresh({ MAILSEND_QUEUE_AUTORUN: "0" });
    const bad: Record<string, string | undefined> = {
      ...env,
      MAILSEND_API_KEY_FILE: undefined,
      MAILSEND_API_KEY: "msk_notakeyofthissandbox000000000000000",
    };
    const r = await runCli([...args("q-bad"), "--queue", "auto"], { env: bad, timeoutMs: 60_000 });
    expect(r.exitCode).toBe(77);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
  }, 60_000);
});
