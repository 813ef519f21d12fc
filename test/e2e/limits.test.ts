/**
 * The shared per-key budget and the retry policy, end to end: several
 * `mailsend send` processes against a sandbox with a small limit and a short
 * window, counting what the sandbox stored and refused.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { keyHash } from "../../src/limits/budget.js";
import { runCli } from "../helpers/cli.js";
import { startRedis, type RedisHandle } from "../helpers/redis.js";
import { addKey, overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";
import { curl, lacks, redisServer } from "../helpers/tools.js";

const LIMIT = 10;
const WINDOW_S = 4;

let t: TestSandbox;
useSandbox((sb) => (t = overRest(sb)), { rateLimit: LIMIT, rateWindowMs: WINDOW_S * 1000 });

/**
 * A key of each test's own: the sandbox and mailsend's budget count per key, so each test starts
 * with the whole budget without waiting out the window the one before used.
 */
let key: string;
beforeEach(async () => {
  key = (await addKey(t.dir)).key;
});

function budgetEnv(stateDir: string, extra: Record<string, string> = {}) {
  const { MAILSEND_API_KEY_FILE: _file, ...env } = t.env;
  return {
    ...env,
    MAILSEND_API_KEY: key,
    MAILSEND_STATE_DIR: stateDir,
    MAILSEND_RATE_LIMIT: String(LIMIT),
    MAILSEND_RATE_WINDOW: String(WINDOW_S),
    MAILSEND_RETRIES: "3",
    ...extra,
  };
}

const send = (subject: string, env: Record<string, string>, extra: string[] = []) =>
  runCli(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", subject, "--text", "hi", "--json", ...extra], {
    env,
    timeoutMs: 60_000,
  });

async function subjects(): Promise<string[]> {
  return (await t.sb.store.list({ limit: 100_000 })).map((m) => m.subject);
}

describe("shared budget", () => {
  test("4 processes x 5 messages with a limit of 10 per window: all 20 delivered, zero 429s, paced by the limit", async () => {
    const s = scratch("mailsend-budget-");
    const before = t.sb.stats.toJSON().rest;
    const started = Date.now();
    const runs = await Promise.all(
      [0, 1, 2, 3].map(async (p) => {
        const out = [];
        for (let m = 0; m < 5; m++) out.push(await send(`budget p${p} m${m}`, budgetEnv(s.dir)));
        return out;
      }),
    );
    const elapsed = Date.now() - started;
    for (const r of runs.flat()) expect(r.exitCode, r.stderr).toBe(0);
    const after = t.sb.stats.toJSON().rest;
    expect(after.rateLimited - before.rateLimited).toBe(0);
    expect(after.accepted - before.accepted).toBe(20);
    const got = (await subjects()).filter((x) => x.startsWith("budget "));
    expect(new Set(got).size).toBe(20);
    expect(got.length).toBe(20);
    // 20 sends at 10 per window need more than one window.
    expect(elapsed).toBeGreaterThanOrEqual(WINDOW_S * 1000);
    // And no more than the limit asks: a send that waited for the budget went out as
    // soon as a slot freed, i.e. about one window after the send LIMIT places before
    // it (by the sandbox's clock). Measured on the sends that waited, not on the
    // whole run, whose length a loaded machine's process start-ups decide.
    const accepted = new Map(
      (await t.sb.store.list({ limit: 100_000 }))
        .filter((m) => m.subject.startsWith("budget "))
        .map((m) => [m.subject, Date.parse(m.receivedAt)]),
    );
    const order = [...accepted.values()].sort((a, b) => a - b);
    for (const [p, lane] of runs.entries()) {
      for (const [m, r] of lane.entries()) {
        if ((JSON.parse(r.stdout) as { waited_ms: number }).waited_ms === 0) continue;
        const at = accepted.get(`budget p${p} m${m}`)!;
        const rank = order.indexOf(at);
        if (rank < LIMIT) continue; // it went out among the first LIMIT anyway
        expect(at - order[rank - LIMIT]!, `budget p${p} m${m} went out late`).toBeLessThan(WINDOW_S * 1000 + 2_500);
      }
    }
    s.remove();
  });

  test("a lock left by a killed process does not block the next send", async () => {
    const s = scratch("mailsend-lock-");
    const dir = join(s.dir, "ratelimit");
    mkdirSync(dir, { recursive: true });
    // A holder that was killed: its pid no longer runs.
    const child = execa(process.execPath, ["-e", "setTimeout(() => {}, 60000)"]);
    const pid = child.pid!;
    child.kill("SIGKILL");
    await child.catch(() => {});
    writeFileSync(join(dir, `${keyHash(key)}.json.lock`), `${pid} ${Date.now()}`);
    const r = await send("after a killed holder", budgetEnv(s.dir));
    expect(r.exitCode, r.stderr).toBe(0);
    expect((await subjects()).filter((x) => x === "after a killed holder")).toHaveLength(1);
    // The lock was released by the send that broke it. (That a dead holder's lock is
    // broken at once, not after the stale age, is shown in limits-store-retry's unit test.)
    expect(existsSync(join(dir, `${keyHash(key)}.json.lock`))).toBe(false);
    s.remove();
  });

  test("--no-wait fails at once with 75 when the budget is used up; nothing is sent", async () => {
    const s = scratch("mailsend-nowait-");
    // 2 per minute on mailsend's side: its budget stays used up however slowly the
    // processes start (the sandbox's own limit, 10 per 4 s, is never reached).
    const env = budgetEnv(s.dir, { MAILSEND_RATE_LIMIT: "2", MAILSEND_RATE_WINDOW: "60" });
    expect((await send("nowait 1", env)).exitCode).toBe(0);
    expect((await send("nowait 2", env)).exitCode).toBe(0);
    const r = await send("nowait 3", env, ["--no-wait"]);
    expect(r.exitCode).toBe(75);
    expect(JSON.parse(r.stderr.trim().split("\n").pop()!).error.code).toBe("rate_limited");
    const m = await send("nowait 4", env, ["--max-wait", "1"]);
    expect(m.exitCode).toBe(75);
    expect(m.stderr).toMatch(/next slot frees in \d+ s, beyond --max-wait \(1 s\)/);
    expect((await subjects()).filter((x) => x.startsWith("nowait ")).sort()).toEqual(["nowait 1", "nowait 2"]);
    s.remove();
  });
});

describe("waiting, as --json says it", () => {
  test("a send that waits for the budget says so on stderr as a JSON line, and its result has waited_ms", async () => {
    const s = scratch("mailsend-jsonwait-");
    // A 10 s window: longer than a loaded machine takes to start the second process, so it waits.
    const env = budgetEnv(s.dir, { MAILSEND_RATE_LIMIT: "1", MAILSEND_RATE_WINDOW: "10" });
    expect((await send("jsonwait 1", env)).exitCode).toBe(0);
    const r = await send("jsonwait 2", env);
    expect(r.exitCode, r.stderr).toBe(0);
    const waits = r.stderr
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { wait?: { reason: string; seconds: number; attempt: number } });
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]!.wait).toMatchObject({ reason: "budget", attempt: 1 });
    expect(waits[0]!.wait!.seconds).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(r.stdout).waited_ms).toBeGreaterThan(0);
    s.remove();
  });
});

describe.skipIf(lacks(curl))("refused anyway", () => {
  test("with curl eating the budget, mailsend gets 429s, waits, and delivers each message exactly once", async () => {
    const s = scratch("mailsend-curl-");
    const before = t.sb.stats.toJSON().rest;
    const body = JSON.stringify({ from: "curl@example.com", to: "dev@example.com", subject: "curl", html: "<p>x</p>" });
    // Async: the sandbox answers from this very process, so a synchronous spawn would deadlock.
    const curls = await Promise.all(
      Array.from({ length: LIMIT }, () =>
        execa("curl", [
          "-s",
          "-o",
          "/dev/null",
          "-w",
          "%{http_code}",
          "-H",
          `Authorization: Bearer ${key}`,
          "-H",
          "Content-Type: application/json",
          "--data-binary",
          body,
          `${t.env.MAILSEND_BASE_URL}/send`,
        ]),
      ),
    );
    expect(curls.map((c) => c.stdout)).toEqual(Array(LIMIT).fill("200"));
    // mailsend's own budget is empty (another client used the key): the service refuses.
    const runs = await Promise.all(
      [1, 2, 3].map((i) => send(`refused ${i}`, budgetEnv(s.dir, { MAILSEND_RETRIES: "5" }))),
    );
    for (const r of runs) expect(r.exitCode, r.stderr).toBe(0);
    expect(Math.max(...runs.map((r) => JSON.parse(r.stdout).attempts))).toBeGreaterThan(1);
    const after = t.sb.stats.toJSON().rest;
    expect(after.rateLimited - before.rateLimited).toBeGreaterThan(0);
    const got = (await subjects()).filter((x) => x.startsWith("refused "));
    expect(got.sort()).toEqual(["refused 1", "refused 2", "refused 3"]);
    s.remove();
  });

  test("a refused key is not retried: one attempt, exit 77", async () => {
    const r = await runCli(
      [
        "send",
        "-f",
        "ci@example.com",
        "-t",
        "dev@example.com",
        "-s",
        "x",
        "--html",
        "<p>x</p>",
        "-H",
        "X-Ok: 1",
        "--json",
      ],
      {
        env: { ...t.env, MAILSEND_RETRIES: "3", MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: "wrong-key" },
      },
    );
    expect(r.exitCode).toBe(77);
    expect(JSON.parse(r.stderr.trim()).error.attempts).toBe(1);
  });
});

describe.skipIf(lacks(redisServer))("redis budget (two machines)", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  test("two state dirs sharing one redis-server: zero 429s", async () => {
    const a = scratch("mailsend-machine-a-");
    const b = scratch("mailsend-machine-b-");
    const before = t.sb.stats.toJSON().rest;
    const machine = async (dir: string, name: string) => {
      const out = [];
      for (let m = 0; m < 7; m++)
        out.push(await send(`redis ${name} ${m}`, budgetEnv(dir, { MAILSEND_RATE_LIMIT_URL: redis.url })));
      return out;
    };
    const runs = await Promise.all([machine(a.dir, "a"), machine(b.dir, "b")]);
    for (const r of runs.flat()) expect(r.exitCode, r.stderr).toBe(0);
    const after = t.sb.stats.toJSON().rest;
    expect(after.rateLimited - before.rateLimited).toBe(0);
    expect((await subjects()).filter((x) => x.startsWith("redis ")).length).toBe(14);
    a.remove();
    b.remove();
  });
});
