/**
 * The budget shared through a real redis-server, end to end with the built
 * CLI: "machines" are processes with state dirs of their own, sharing one
 * key's budget only through Redis (plain, TLS with an ACL user and a password
 * file, Sentinel). The sandbox enforces the same limit, so a budget that was
 * not shared exactly would show as 429s. Then the faults: a wrong password,
 * Redis unreachable or stopped while a send waits, a URL that does not parse.
 */
import { connect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { ensureTls, type TlsMaterial } from "../../src/sandbox/tls.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { startRedis, startSentinel, type RedisHandle, type SentinelHandle } from "../helpers/redis.js";
import { addKey, overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";
import { until } from "../helpers/until.js";
import { REDIS_ACL } from "../../src/limits/redis-errors.js";

const LIMIT = 10;
const WINDOW_S = 4;
// The ACL the budget's hint tells users to grant: these tests prove it is enough.
const ACL = REDIS_ACL.split(" ");
const SECRETS = ["acl-secret-1", "master-secret-2", "wrong-secret-3", "url-secret-4"];

let t: TestSandbox;
let tmp: Scratch;
let tls: TlsMaterial;
useSandbox((sb) => (t = overRest(sb)), { rateLimit: LIMIT, rateWindowMs: WINDOW_S * 1000 });
beforeAll(async () => {
  tmp = scratch("mailsend-redis-e2e-");
  tls = await tmp.tls();
});
afterAll(async () => {
  tmp?.remove();
});

/**
 * A key of each test's own: the sandbox and the budget count per key, so each test starts with the
 * whole budget without waiting out the window the one before used.
 */
let key: string;
beforeEach(async () => {
  key = (await addKey(t.dir)).key;
});

function env(stateDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const { MAILSEND_API_KEY_FILE: _file, ...sandbox } = t.env;
  return {
    ...sandbox,
    MAILSEND_API_KEY: key,
    MAILSEND_STATE_DIR: stateDir,
    MAILSEND_RATE_LIMIT: String(LIMIT),
    MAILSEND_RATE_WINDOW: String(WINDOW_S),
    MAILSEND_RETRIES: "3",
    ...extra,
  };
}

async function send(subject: string, e: Record<string, string>, extra: string[] = []): Promise<CliResult> {
  const r = await runCli(
    ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", subject, "--text", "hi", "--json", ...extra],
    { env: e, timeoutMs: 60_000 },
  );
  for (const s of SECRETS) expect(r.stdout + r.stderr, `a password in the output of "${subject}"`).not.toContain(s);
  return r;
}

/** Redis's count of connected clients (INFO clients), asked over a connection of its own (not counted). */
function connectedClients(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const c = connect(port, "127.0.0.1", () => c.write("INFO clients\r\n"));
    let got = "";
    c.setEncoding("utf8");
    c.on("data", (d) => {
      got += d;
      const m = /connected_clients:(\d+)/.exec(got);
      if (m) {
        c.destroy();
        resolve(Number(m[1]) - 1);
      }
    });
    c.on("error", reject);
  });
}

async function subjects(prefix: string): Promise<string[]> {
  return (await t.sb.store.list({ limit: 100_000 })).map((m) => m.subject).filter((s) => s.startsWith(prefix));
}

/**
 * Two machines, 4 sends each in a row, sharing 4 per 12 s through Redis. Alone,
 * a machine would never wait (4 sends, limit 4): any wait is the other
 * machine's slots, seen through Redis. And exactly: the sandbox received no
 * 5 of the 8 within one window (taken slot to arrival takes well under 2 s).
 * Nothing here depends on how fast the machine runs the sends.
 */
async function twoMachines(name: string, extra: Record<string, string>): Promise<void> {
  const a = scratch("mailsend-machine-a-");
  const b = scratch("mailsend-machine-b-");
  try {
    const before = t.sb.stats.toJSON().rest;
    const machine = async (dir: string, m: string) => {
      const out: CliResult[] = [];
      for (let i = 0; i < 4; i++)
        out.push(
          await send(`${name} ${m} ${i}`, env(dir, { ...extra, MAILSEND_RATE_LIMIT: "4", MAILSEND_RATE_WINDOW: "12" })),
        );
      return out;
    };
    const runs = await Promise.all([machine(a.dir, "a"), machine(b.dir, "b")]);
    for (const r of runs.flat()) expect(r.exitCode, r.stderr).toBe(0);
    const after = t.sb.stats.toJSON().rest;
    expect(after.rateLimited - before.rateLimited).toBe(0);
    const got = (await t.sb.store.list({ limit: 100_000 })).filter((m) => m.subject.startsWith(`${name} `));
    expect(got.length).toBe(8);
    expect(runs.flat().some((r) => JSON.parse(r.stdout).waited_ms > 0)).toBe(true);
    const times = got.map((m) => Date.parse(m.receivedAt)).sort((x, y) => x - y);
    for (let i = 0; i + 4 < times.length; i++)
      expect(times[i + 4]! - times[i]!, `arrivals ${i} and ${i + 4}`).toBeGreaterThanOrEqual(10_000);
  } finally {
    a.remove();
    b.remove();
  }
}

describe.skipIf(lacks(redisServer))("the budget shared through Redis", () => {
  let plain: RedisHandle;
  let secure: RedisHandle;
  let master: RedisHandle;
  let sentinel: SentinelHandle;
  let passwordFile: string;
  beforeAll(async () => {
    plain = await startRedis();
    secure = await startRedis({
      tls,
      users: [["budget", "on", ">acl-secret-1", ...ACL]],
      password: "another-default-secret",
    });
    master = await startRedis({ password: "master-secret-2" });
    sentinel = await startSentinel(master.port, "budget", { masterPassword: "master-secret-2" });
    passwordFile = tmp.file("redis-password", "acl-secret-1\n");
  });
  afterAll(async () => {
    await sentinel?.stop();
    await Promise.all([plain?.stop(), secure?.stop(), master?.stop()]);
  });

  test("rediss:// with an ACL user, its password in a file, a database and the CA from NODE_EXTRA_CA_CERTS: two machines, zero 429s", async () => {
    await twoMachines("tls", {
      MAILSEND_RATE_LIMIT_URL: `rediss://budget@127.0.0.1:${secure.port}/2`,
      MAILSEND_RATE_LIMIT_PASSWORD_FILE: passwordFile,
      NODE_EXTRA_CA_CERTS: tls.caPath,
    });
  });

  test("Sentinel: two machines find the master through it, zero 429s", async () => {
    await twoMachines("sentinel", {
      MAILSEND_RATE_LIMIT_URL: `redis-sentinel://:master-secret-2@127.0.0.1:${sentinel.port}/budget`,
    });
  });

  test("four processes sharing 3 per window: the one that waits longer than 5 s is sent", async () => {
    const s = scratch("mailsend-redis-wait-");
    try {
      const e = env(s.dir, { MAILSEND_RATE_LIMIT_URL: plain.url, MAILSEND_RATE_LIMIT: "3", MAILSEND_RATE_WINDOW: "9" });
      const runs = await Promise.all([0, 1, 2, 3].map((p) => send(`wait ${p}`, e)));
      for (const r of runs) expect(r.exitCode, r.stderr).toBe(0);
      const waited = runs.map((r) => JSON.parse(r.stdout).waited_ms as number);
      expect(Math.max(...waited)).toBeGreaterThan(5_000);
      expect((await subjects("wait ")).length).toBe(4);
    } finally {
      s.remove();
    }
  });

  test("--verbose and --json over TLS with a password never show it, DEBUG=* neither", async () => {
    const s = scratch("mailsend-redis-verbose-");
    try {
      // DEBUG=ioredis:* would make ioredis's own `debug` print every command, AUTH's password too.
      const e = env(s.dir, {
        MAILSEND_RATE_LIMIT_URL: `rediss://budget:acl-secret-1@127.0.0.1:${secure.port}`,
        DEBUG: "*",
      });
      const r = await send("verbose", e, ["--verbose", "--ca-file", tls.caPath]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        new RegExp(
          `\\* budget: shared through Redis rediss://127\\.0\\.0\\.1:${secure.port} \\(TLSv1\\.[23], certificate verified\\) in \\d+ ms`,
        ),
      );
    } finally {
      s.remove();
    }
  });

  test("a wrong password: 77, authentication failed, nothing sent", async () => {
    const s = scratch("mailsend-redis-auth-");
    try {
      const before = t.sb.store.count;
      const r = await send(
        "auth",
        env(s.dir, {
          MAILSEND_RATE_LIMIT_URL: `rediss://budget:wrong-secret-3@127.0.0.1:${secure.port}`,
          NODE_EXTRA_CA_CERTS: tls.caPath,
        }),
        ["--verbose"],
      );
      expect(r.exitCode).toBe(77);
      const err = JSON.parse(r.stderr.trim().split("\n").at(-1)!).error;
      expect(err).toMatchObject({ code: "auth_failed", exit: 77 });
      expect(err.message).toMatch(
        new RegExp(
          `Redis at 127\\.0\\.0\\.1:${secure.port} refused the user "budget" or its password \\(authentication failed\\)`,
        ),
      );
      expect(t.sb.store.count).toBe(before);
    } finally {
      s.remove();
    }
  });

  test("doctor with the budget's Redis refusing its password: that check fails (77), and the service is not probed outside the budget", async () => {
    const s = scratch("mailsend-redis-doctor-");
    try {
      const before = { ...t.sb.stats.toJSON().rest };
      const r = await runCli(["doctor", "--json"], {
        env: env(s.dir, {
          MAILSEND_RATE_LIMIT_URL: `rediss://budget:wrong-secret-3@127.0.0.1:${secure.port}`,
          NODE_EXTRA_CA_CERTS: tls.caPath,
        }),
        timeoutMs: 60_000,
      });
      const checks = Object.fromEntries(
        (
          JSON.parse(r.stdout) as {
            checks: { name: string; ok: boolean; skipped?: boolean; detail: string; exit?: number }[];
          }
        ).checks.map((c) => [c.name, c]),
      );
      expect(r.exitCode, r.stdout).toBe(77);
      expect(checks.ratelimit).toMatchObject({ ok: false, exit: 77 });
      expect(checks["rest.connect"]?.ok).toBe(true);
      expect(checks["rest.key"]).toMatchObject({ skipped: true });
      expect(checks["rest.key"]!.detail).toMatch(/not checked: the rate-limit budget could not be asked for a slot/);
      // Not one request reached POST /send: neither refused as the empty probe is, nor anything else.
      expect(t.sb.stats.toJSON().rest).toEqual(before);
      expect(r.stdout + r.stderr).not.toContain("wrong-secret-3");
    } finally {
      s.remove();
    }
  });

  test("rediss:// without the CA: 78, the certificate is not trusted", async () => {
    const s = scratch("mailsend-redis-ca-");
    try {
      const r = await send(
        "ca",
        env(s.dir, { MAILSEND_RATE_LIMIT_URL: `rediss://budget:acl-secret-1@127.0.0.1:${secure.port}` }),
      );
      expect(r.exitCode).toBe(78);
      expect(JSON.parse(r.stderr.trim()).error.code).toBe("tls_untrusted");
    } finally {
      s.remove();
    }
  });

  test("rediss:// to a certificate for another host name (the address, not the name, in the URL): 78, and the hint names what the certificate is for, not a CA", async () => {
    const s = scratch("mailsend-redis-altname-");
    // The managed service's certificate: a trusted CA, issued to its host name only.
    const named = await ensureTls(join(s.dir, "tls"), ["redis.example.test"]);
    const other = await startRedis({ tls: named });
    try {
      const r = await send(
        "altname",
        env(s.dir, {
          MAILSEND_RATE_LIMIT_URL: `rediss://:url-secret-4@127.0.0.1:${other.port}`,
          NODE_EXTRA_CA_CERTS: named.caPath,
        }),
      );
      expect(r.exitCode).toBe(78);
      const e = JSON.parse(r.stderr.trim()).error;
      expect(e.code).toBe("tls_untrusted");
      expect(e.message).toContain(`127.0.0.1:${other.port}`);
      expect(e.hint).toContain(
        "The certificate is for DNS:redis.example.test, not for 127.0.0.1: use a name it lists in MAILSEND_RATE_LIMIT_URL, not its IP address.",
      );
      expect(e.hint).not.toContain("--ca-file");
    } finally {
      await other.stop();
      s.remove();
    }
  });

  test("Redis unreachable: 69 with host and port and the variable that chose it, nothing sent", async () => {
    const s = scratch("mailsend-redis-down-");
    try {
      const before = t.sb.store.count;
      const r = await runCli(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "down", "--text", "hi"], {
        env: env(s.dir, { MAILSEND_RATE_LIMIT_URL: "redis://:url-secret-4@127.0.0.1:1" }),
      });
      expect(r.exitCode).toBe(69);
      expect(r.stderr).toMatch(/cannot reach the shared-budget Redis at 127\.0\.0\.1:1: connection refused/);
      expect(r.stderr).toMatch(/MAILSEND_RATE_LIMIT_URL \(redis:\/\/127\.0\.0\.1:1\) chose this Redis/);
      expect(r.stderr).not.toContain("url-secret-4");
      expect(t.sb.store.count).toBe(before);
    } finally {
      s.remove();
    }
  });

  test("Redis that stops answering as a send connects (DEBUG SLEEP, a password to send): 75 at the 5 s the docs state, nothing sent", async () => {
    const frozen = await startRedis({ password: "sleepy-secret-5", args: ["--enable-debug-command", "yes"] });
    const s = scratch("mailsend-redis-asleep-");
    try {
      // Asleep for longer than the bound and the probes that once followed it: the exit says which came first.
      await new Promise<void>((resolve, reject) => {
        const c = connect(frozen.port, "127.0.0.1", () => c.write("AUTH sleepy-secret-5\r\n"));
        // Its +OK first (replies wait for the sleep to end), then the sleep, and a moment for it to begin.
        c.once("data", () => {
          c.write("DEBUG SLEEP 10\r\n");
          setTimeout(resolve, 300);
        });
        c.on("error", reject);
        setTimeout(() => c.destroy(), 12_000).unref();
      });
      const before = t.sb.store.count;
      const started = Date.now();
      const r = await runCli(
        ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "asleep", "--text", "hi", "--json"],
        {
          env: env(s.dir, {
            MAILSEND_RATE_LIMIT_URL: `redis://:sleepy-secret-5@127.0.0.1:${frozen.port}`,
            MAILSEND_RETRIES: "0",
          }),
          timeoutMs: 30_000,
        },
      );
      const took = Date.now() - started;
      expect(r.exitCode, r.stderr).toBe(75);
      expect(JSON.parse(r.stderr.trim().split("\n").at(-1)!).error.message).toMatch(
        new RegExp(`the shared-budget Redis at 127\\.0\\.0\\.1:${frozen.port} did not answer in time`),
      );
      expect(took).toBeGreaterThanOrEqual(4_900);
      expect(took).toBeLessThan(9_000);
      expect(r.stderr).not.toContain("sleepy-secret-5");
      expect(t.sb.store.count).toBe(before);
    } finally {
      await frozen.stop();
      s.remove();
    }
  }, 40_000);

  test("Redis stopped while a send waits for its slot: 75, nothing sent, no hang", async () => {
    const r1 = await startRedis();
    const s = scratch("mailsend-redis-lost-");
    try {
      const e = env(s.dir, { MAILSEND_RATE_LIMIT_URL: r1.url, MAILSEND_RATE_LIMIT: "1", MAILSEND_RATE_WINDOW: "12" });
      expect((await send("lost 1", e)).exitCode).toBe(0);
      const waiting = send("lost 2", e);
      // Once the second process is connected (on a loaded machine its start-up alone can take
      // seconds), and a second more: it has found the window full and waits out the 12 s window.
      await until(async () => (await connectedClients(r1.port)) >= 1, {
        what: "the second process to connect to Redis",
        timeoutMs: 20_000,
        everyMs: 100,
      });
      await new Promise((r) => setTimeout(r, 1_000));
      await r1.stop();
      const r = await waiting;
      expect(r.exitCode, r.stderr).toBe(75);
      const err = JSON.parse(r.stderr.trim().split("\n").at(-1)!).error;
      expect(err.message).toMatch(new RegExp(`lost the shared-budget Redis at 127\\.0\\.0\\.1:${r1.port}`));
      expect(err.hint).toMatch(/Nothing was sent/);
      expect(await subjects("lost ")).toEqual(["lost 1"]);
    } finally {
      await r1.stop();
      s.remove();
    }
  });
});

describe("a MAILSEND_RATE_LIMIT_URL that does not parse", () => {
  test('a password with a "/", "?" or "#" not %-encoded: 78 saying so, and no part of it in the message', async () => {
    for (const url of [
      "redis://:url/secret-4@cache.internal:6380/2",
      "redis://budget:url?secret-4@cache.internal",
      "rediss-sentinel://:url#secret-4@10.0.0.5:26379/mymaster",
    ]) {
      const r = await send("cut url", env(tmp.dir, { MAILSEND_RATE_LIMIT_URL: url }));
      expect(r.exitCode).toBe(78);
      expect(JSON.parse(r.stderr.trim()).error.message).toMatch(
        /has its user or password cut: a "\/", "\?" or "#" in them must be %-encoded/,
      );
      expect(r.stderr).not.toContain("secret-4");
    }
  });
  test("send and doctor say so (78) without printing the password", async () => {
    const e = env(tmp.dir, { MAILSEND_RATE_LIMIT_URL: "redis://:url-secret-4@cache.internal:notaport/0" });
    const r = await send("bad url", e);
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/MAILSEND_RATE_LIMIT_URL \(redis:\/\/cache\.internal:notaport\/0\)/);
    const d = await runCli(["doctor"], { env: { ...e, MAILSEND_CONFIG: join(tmp.dir, "none.json") } });
    expect(d.stdout + d.stderr).toMatch(/MAILSEND_RATE_LIMIT_URL \(redis:\/\/cache\.internal:notaport\/0\)/);
    expect(d.stdout + d.stderr).not.toContain("url-secret-4");
  });
});
