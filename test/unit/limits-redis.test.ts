import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ensureTls, type TlsMaterial } from "../../src/sandbox/tls.js";
import { redisConfigFrom } from "../../src/limits/redis-config.js";
import { RedisSlotStore, type RedisStoreOptions } from "../../src/limits/redis-store.js";
import { startRedis, startSentinel, type RedisHandle } from "../helpers/redis.js";
import { lacks, redisServer } from "../helpers/tools.js";
import { REDIS_ACL } from "../../src/limits/redis-errors.js";

const LIMITS = { limit: 5, windowMs: 60_000 };

function store(
  url: string,
  env: Record<string, string> = {},
  opts: RedisStoreOptions & { caFile?: string; key?: string } = {},
): RedisSlotStore {
  const config = redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: url, ...env }, opts.caFile ? { caFile: opts.caFile } : {})!;
  return new RedisSlotStore(config, opts.key ?? `k${Math.random().toString(36).slice(2)}`, opts);
}

async function failure(
  p: Promise<unknown>,
): Promise<{ code: string; exitCode: number; message: string; hint?: string }> {
  try {
    await p;
  } catch (e) {
    return e as { code: string; exitCode: number; message: string; hint?: string };
  }
  throw new Error("did not fail");
}

function clean(e: { message: string; hint?: string }, ...secrets: string[]): void {
  for (const s of secrets) expect(`${e.message}\n${e.hint ?? ""}`).not.toContain(s);
}

// A real redis-server (Debian's package; .ci/run installs it).
describe.skipIf(lacks(redisServer))("redis slot store", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  test("two clients (two machines) share one window, atomically", async () => {
    const limits = { limit: 6, windowMs: 60_000 };
    const a = store(redis.url, {}, { key: "shared1" });
    const b = store(redis.url, {}, { key: "shared1" });
    try {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).tryTake(`id${i}`, limits)),
      );
      expect(results.filter((r) => r.ok).length).toBe(6);
      const refused = results.find((r) => !r.ok);
      expect(refused && !refused.ok && refused.waitMs).toBeGreaterThan(59_000);
      expect(await a.used(limits)).toBe(6);
      await a.release(`id${results.findIndex((r) => r.ok)}`, limits);
      expect(await b.used(limits)).toBe(5);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a take repeated with the same id (a reply lost with the connection) holds one slot, not two", async () => {
    const limits = { limit: 2, windowMs: 60_000 };
    const a = store(redis.url);
    try {
      expect((await a.tryTake("same", limits)).ok).toBe(true);
      expect((await a.tryTake("same", limits)).ok).toBe(true);
      expect(await a.used(limits)).toBe(1);
    } finally {
      await a.close();
    }
  });

  test("a block set by one client holds the other back", async () => {
    const limits = { limit: 100, windowMs: 60_000 };
    const a = store(redis.url, {}, { key: "shared2" });
    const b = store(redis.url, {}, { key: "shared2" });
    try {
      await a.block(3_000, limits);
      const r = await b.tryTake("x", limits);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.waitMs).toBeGreaterThan(2_000);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a finished send counts from its answer: the time since it is taken off Redis's clock, never before the take", async () => {
    const limits = { limit: 1, windowMs: 60_000 };
    const a = store(redis.url);
    try {
      expect((await a.tryTake("1", limits)).ok).toBe(true);
      await new Promise((res) => setTimeout(res, 100));
      // The answer came 50 ms before the record (Redis's now): the slot frees 50 ms sooner than from the record.
      await a.complete("1", limits, () => 50.7);
      const r = await a.tryTake("2", limits);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.waitMs).toBeLessThanOrEqual(60_000 - 50 + 1);
    } finally {
      await a.close();
    }
    // A time since the answer longer than since the take leaves the slot at its take.
    const b = store(redis.url);
    try {
      expect((await b.tryTake("x", limits)).ok).toBe(true);
      await b.complete("x", limits, () => 3_600_000);
      const full = await b.tryTake("y", limits);
      expect(full.ok).toBe(false);
      if (!full.ok) expect(full.waitMs).toBeGreaterThan(59_000);
    } finally {
      await b.close();
    }
  });

  test("the window slides: slots free as entries age out", async () => {
    const limits = { limit: 2, windowMs: 3000 };
    const a = store(redis.url);
    try {
      expect((await a.tryTake("1", limits)).ok).toBe(true);
      expect((await a.tryTake("2", limits)).ok).toBe(true);
      const r = await a.tryTake("3", limits);
      expect(r.ok).toBe(false);
      await new Promise((res) => setTimeout(res, r.ok ? 0 : r.waitMs + 20));
      expect((await a.tryTake("4", limits)).ok).toBe(true);
    } finally {
      await a.close();
    }
  });

  test("the database of the URL's path is the one used", async () => {
    const a = store(`${redis.url}/3`, {}, { key: "dbtest" });
    try {
      expect((await a.tryTake("x", LIMITS)).ok).toBe(true);
      const keys = execFileSync(
        "redis-cli",
        ["-p", String(redis.port), "-n", "3", "--raw", "KEYS", "mailsend:ratelimit:dbtest*"],
        { encoding: "utf8" },
      );
      expect(keys).toContain("mailsend:ratelimit:dbtest");
    } finally {
      await a.close();
    }
  });

  test("doctor's probe: round trip, no TLS, the server's name and version", async () => {
    const a = store(redis.url);
    try {
      const p = await a.probe();
      expect(p.rttMs).toBeGreaterThanOrEqual(0);
      expect(p.tlsProtocol).toBeUndefined();
      expect(p.server).toMatch(/^(redis|valkey) \d+\.\d+/);
    } finally {
      await a.close();
    }
  });

  test("a password the server does not ask for: used for nothing, said to doctor, never printed by ioredis", async () => {
    const a = store(`redis://:unneeded@127.0.0.1:${redis.port}`);
    const warn = console.warn;
    const printed: unknown[] = [];
    console.warn = (...args: unknown[]) => printed.push(args);
    try {
      expect((await a.tryTake("x", LIMITS)).ok).toBe(true);
      expect(a.passwordUnneeded).toBe(true);
      expect(printed).toEqual([]);
    } finally {
      console.warn = warn;
      await a.close();
    }
  });

  test("nothing listening: 69, naming host:port and the variable that chose it", async () => {
    const s = store("redis://:hunter2@127.0.0.1:1");
    const e = await failure(s.tryTake("a", LIMITS));
    expect(e.code).toBe("connection_failed");
    expect(e.exitCode).toBe(69);
    expect(e.message).toMatch(/127\.0\.0\.1:1: connection refused/);
    expect(e.hint).toMatch(/MAILSEND_RATE_LIMIT_URL \(redis:\/\/127\.0\.0\.1:1\) chose this Redis.*Nothing was sent/);
    clean(e, "hunter2");
    await s.close();
  });

  test("a server that is not Redis: 78", async () => {
    const http: Server = createServer((_req, res) => res.end("hello"));
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    try {
      const s = store(`redis://127.0.0.1:${(http.address() as AddressInfo).port}`, {}, { timeoutMs: 3000 });
      const e = await failure(s.tryTake("a", LIMITS));
      expect(e.exitCode).toBe(78);
      expect(e.message).toMatch(/does not speak the Redis protocol/);
      await s.close();
    } finally {
      http.close();
    }
  });

  test("the server goes away and comes back between two operations: the store connects again", async () => {
    const r = await startRedis();
    const s = store(r.url);
    try {
      expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
      await r.restart();
      expect((await s.tryTake("b", LIMITS)).ok).toBe(true);
    } finally {
      await s.close();
      await r.stop();
    }
  });

  test("the server stopped mid-run: 75 (lost), never 70, naming host:port", async () => {
    const r = await startRedis();
    const s = store(r.url);
    try {
      expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
      await r.stop();
      const e = await failure(s.tryTake("b", LIMITS));
      expect(e.code).toBe("temporary_failure");
      expect(e.exitCode).toBe(75);
      expect(e.message).toMatch(new RegExp(`lost the shared-budget Redis at 127\\.0\\.0\\.1:${r.port}`));
      expect(e.hint).toMatch(/Nothing was sent/);
      // Recording after a send says no such thing: the message went out.
      const rec = await failure(s.complete("a", LIMITS));
      expect(rec.exitCode).toBe(75);
      expect(rec.hint).not.toMatch(/Nothing was sent/);
    } finally {
      await s.close();
    }
  });

  test("a server that stops answering: 75 within the time limit, no hang", async () => {
    const r = await startRedis();
    const s = store(r.url, {}, { timeoutMs: 800 });
    try {
      expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
      process.kill(r.pid, "SIGSTOP");
      const t0 = Date.now();
      const e = await failure(s.tryTake("b", LIMITS));
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(e.exitCode).toBe(75);
    } finally {
      process.kill(r.pid, "SIGCONT");
      await s.close();
      await r.stop();
    }
  });

  test("a connection the server closes while idle (a long wait for a slot) is made again", async () => {
    // redis-server's `timeout 1` closes a client idle for a second, as managed services do after longer.
    const r = await startRedis({ args: ["--timeout", "1"] });
    const s = store(r.url);
    try {
      expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
      await new Promise((res) => setTimeout(res, 2_500));
      expect((await s.tryTake("b", LIMITS)).ok).toBe(true);
      expect(await s.used(LIMITS)).toBe(2);
    } finally {
      await s.close();
      await r.stop();
    }
  });
});

describe.skipIf(lacks(redisServer))("redis credentials", () => {
  let redis: RedisHandle;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mailsend-redis-auth-"));
    redis = await startRedis({
      password: "default-secret",
      users: [
        ["budget", "on", ">budget-secret", ...REDIS_ACL.split(" ")],
        ["reader", "on", ">reader-secret", "~*", "+get", "+ping"],
      ],
    });
  });
  afterAll(async () => {
    await redis?.stop();
  });
  const url = () => `redis://127.0.0.1:${redis.port}`;

  test("requirepass: the right password in the URL works; a wrong one is 77, authentication failed", async () => {
    const ok = store(`redis://:default-secret@127.0.0.1:${redis.port}`);
    expect((await ok.tryTake("a", LIMITS)).ok).toBe(true);
    await ok.close();
    const bad = store(`redis://:wrong-secret@127.0.0.1:${redis.port}`);
    const e = await failure(bad.tryTake("a", LIMITS));
    expect(e.code).toBe("auth_failed");
    expect(e.exitCode).toBe(77);
    expect(e.message).toMatch(/refused the password \(authentication failed\)/);
    clean(e, "wrong-secret", "default-secret");
    await bad.close();
  });

  test("no password for a server that needs one: 77, NOAUTH, with where to put it", async () => {
    const s = store(url());
    const e = await failure(s.tryTake("a", LIMITS));
    expect(e.exitCode).toBe(77);
    expect(e.message).toMatch(/requires a password/);
    expect(e.hint).toMatch(/MAILSEND_RATE_LIMIT_PASSWORD_FILE/);
    await s.close();
  });

  test("an ACL user with the budget's rights, its password from a file", async () => {
    writeFileSync(join(dir, "pw"), "budget-secret\n");
    const s = store(`redis://budget@127.0.0.1:${redis.port}`, { MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "pw") });
    expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
    expect(await s.used(LIMITS)).toBe(1);
    await s.release("a", LIMITS);
    await s.close();
  });

  test("an ACL user with a wrong password, or unknown: 77, naming the user, never the password", async () => {
    for (const u of ["budget:nope-secret", "ghost:budget-secret"]) {
      const s = store(`redis://${u}@127.0.0.1:${redis.port}`);
      const e = await failure(s.tryTake("a", LIMITS));
      expect(e.exitCode, u).toBe(77);
      expect(e.message).toMatch(/refused the user "(budget|ghost)" or its password \(authentication failed\)/);
      clean(e, "nope-secret", "budget-secret");
      await s.close();
    }
  });

  test("an ACL user without the budget's rights: 77 with the ACL it needs", async () => {
    const s = store(`redis://reader:reader-secret@127.0.0.1:${redis.port}`);
    const e = await failure(s.tryTake("a", LIMITS));
    expect(e.exitCode).toBe(77);
    expect(e.message).toMatch(/may not run the budget's commands/);
    expect(e.hint).toMatch(/ACL SETUSER reader ~mailsend:\* \+select \+eval/);
    await s.close();
  });
});

describe.skipIf(lacks(redisServer))("redis over TLS", () => {
  let tls: TlsMaterial;
  let redis: RedisHandle;
  let plain: RedisHandle;
  beforeAll(async () => {
    tls = await ensureTls(mkdtempSync(join(tmpdir(), "mailsend-redis-tls-")));
    redis = await startRedis({ tls, password: "tls-secret" });
    plain = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
    await plain?.stop();
  });

  test("rediss:// with the test CA (--ca-file): works, and doctor sees TLS", async () => {
    const s = store(`rediss://:tls-secret@127.0.0.1:${redis.port}`, {}, { caFile: tls.caPath });
    expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
    expect((await s.probe()).tlsProtocol).toMatch(/^TLSv1\.[23]$/);
    await s.close();
  });

  test("rediss:// to a certificate of an unknown CA: 78, untrusted, with the CA hint", async () => {
    const s = store(`rediss://:tls-secret@127.0.0.1:${redis.port}`);
    const e = await failure(s.tryTake("a", LIMITS));
    expect(e.code).toBe("tls_untrusted");
    expect(e.exitCode).toBe(78);
    expect(e.hint).toMatch(/--ca-file/);
    clean(e, "tls-secret");
    await s.close();
  });

  test("rediss:// to a plain port, and redis:// to a TLS port: 78", async () => {
    const a = store(`rediss://127.0.0.1:${plain.port}`, {}, { caFile: tls.caPath, timeoutMs: 3000 });
    const ea = await failure(a.tryTake("a", LIMITS));
    expect(ea.exitCode).toBe(78);
    expect(ea.code).toBe("tls_mismatch");
    await a.close();
    const b = store(`redis://:tls-secret@127.0.0.1:${redis.port}`, {}, { timeoutMs: 3000 });
    const eb = await failure(b.tryTake("a", LIMITS));
    expect(eb.exitCode).toBe(78);
    expect(`${eb.message} ${eb.hint}`).toMatch(/rediss:\/\//);
    clean(eb, "tls-secret");
    await b.close();
  });
});

describe.skipIf(lacks(redisServer))("redis through Sentinel", () => {
  let master: RedisHandle;
  let sentinel: { port: number; stop(): Promise<void> };
  beforeAll(async () => {
    master = await startRedis({ password: "master-secret" });
    sentinel = await startSentinel(master.port, "budgetmaster", { masterPassword: "master-secret" });
  });
  afterAll(async () => {
    await sentinel?.stop();
    await master?.stop();
  });

  test("the master found through the sentinels holds the log", async () => {
    const s = store(
      `redis-sentinel://:master-secret@127.0.0.1:${sentinel.port}/budgetmaster`,
      {},
      { key: "sentinel1" },
    );
    try {
      expect((await s.tryTake("a", LIMITS)).ok).toBe(true);
      const p = await s.probe();
      expect(p.master).toBe(`127.0.0.1:${master.port}`);
      const direct = store(`redis://:master-secret@127.0.0.1:${master.port}`, {}, { key: "sentinel1" });
      expect(await direct.used(LIMITS)).toBe(1);
      await direct.close();
    } finally {
      await s.close();
    }
  });

  test("a master name the sentinels do not know, and no sentinel reachable: 69", async () => {
    const s = store(`redis-sentinel://:master-secret@127.0.0.1:${sentinel.port}/nosuch`, {}, { timeoutMs: 2000 });
    const e = await failure(s.tryTake("a", LIMITS));
    expect(e.exitCode).toBe(69);
    expect(e.message).toMatch(/master "nosuch"/);
    clean(e, "master-secret");
    await s.close();
    const none = store("redis-sentinel://127.0.0.1:1,127.0.0.1:2/budgetmaster", {}, { timeoutMs: 2000 });
    const e2 = await failure(none.tryTake("a", LIMITS));
    expect(e2.exitCode).toBe(69);
    expect(e2.message).toMatch(/sentinels at 127\.0\.0\.1:1, 127\.0\.0\.1:2/);
    await none.close();
  });
});
