import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RedisSlotStore } from "../../src/limits/redis-store.js";
import { REDIS_SERVER, startRedis, type RedisHandle } from "../helpers/redis.js";

// A real redis-server (Debian's package; .ci/run installs it).
describe.skipIf(!REDIS_SERVER && !process.env.CI)("redis slot store", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  test("two clients (two machines) share one window, atomically", async () => {
    const limits = { limit: 6, windowMs: 60_000 };
    const a = new RedisSlotStore(redis.url, "shared1");
    const b = new RedisSlotStore(redis.url, "shared1");
    try {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).tryTake(`id${i}`, limits)));
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

  test("a block set by one client holds the other back", async () => {
    const limits = { limit: 100, windowMs: 60_000 };
    const a = new RedisSlotStore(redis.url, "shared2");
    const b = new RedisSlotStore(redis.url, "shared2");
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

  test("the window slides: slots free as entries age out", async () => {
    const limits = { limit: 2, windowMs: 3000 };
    const a = new RedisSlotStore(redis.url, "shared3");
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

  test("an unreachable Redis is a configuration error naming the variable", async () => {
    const s = new RedisSlotStore("redis://127.0.0.1:1", "x");
    await expect(s.tryTake("a", { limit: 1, windowMs: 1000 })).rejects.toMatchObject({ code: "config_invalid" });
    await s.close();
  });
});
