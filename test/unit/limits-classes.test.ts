import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  EMPTY,
  reserveOf,
  roomFor,
  tryTake,
  type Limits,
  type LogState,
  type SlotClass,
} from "../../src/limits/sliding-log.js";
import { FileSlotStore } from "../../src/limits/file-store.js";
import { redisConfigFrom } from "../../src/limits/redis-config.js";
import { RedisSlotStore } from "../../src/limits/redis-store.js";
import type { SlotStore } from "../../src/limits/store.js";
import { limitsOf } from "../../src/settings/budget.js";
import { slotClassOf } from "../../src/outbox/deliver.js";
import { startRedis, type RedisHandle } from "../helpers/redis.js";
import { lacks, redisServer } from "../helpers/tools.js";

describe("the reserve", () => {
  test("10% of the limit by default, at least one slot, never every slot", () => {
    expect(reserveOf({ limit: 60, windowMs: 1 })).toBe(6);
    expect(reserveOf({ limit: 5, windowMs: 1 })).toBe(1);
    expect(reserveOf({ limit: 1, windowMs: 1 })).toBe(0);
    expect(reserveOf({ limit: 10, windowMs: 1, reserve: 0 })).toBe(0);
    expect(reserveOf({ limit: 10, windowMs: 1, reserve: 30 })).toBe(9);
    expect(roomFor({ limit: 60, windowMs: 1 }, "bulk")).toBe(54);
    expect(roomFor({ limit: 60, windowMs: 1 }, "urgent")).toBe(60);
  });

  test("MAILSEND_RATE_RESERVE: slots or a share of the limit; anything else is refused by name", () => {
    expect(limitsOf("cli", {}, { MAILSEND_RATE_LIMIT: "50" }).reserve).toBeUndefined();
    expect(limitsOf("cli", {}, { MAILSEND_RATE_LIMIT: "50", MAILSEND_RATE_RESERVE: "7" }).reserve).toBe(7);
    expect(limitsOf("cli", {}, { MAILSEND_RATE_LIMIT: "50", MAILSEND_RATE_RESERVE: "20%" }).reserve).toBe(10);
    expect(() => limitsOf("cli", {}, { MAILSEND_RATE_RESERVE: "lots" })).toThrow(/MAILSEND_RATE_RESERVE must be/);
    expect(() => limitsOf("cli", {}, { MAILSEND_RATE_RESERVE: "150%" })).toThrow(/MAILSEND_RATE_RESERVE must be/);
    expect(() => limitsOf("api", {}, { MAILSEND_RATE_RESERVE: "-1" })).toThrow(
      /options\.env\.MAILSEND_RATE_RESERVE must be/,
    );
  });

  test("queued mail: the first attempt, alerts and notices are urgent; later attempts bulk", () => {
    expect(slotClassOf("sendmail", 1)).toBe("urgent");
    expect(slotClassOf("relay", 1)).toBe("urgent");
    expect(slotClassOf("sendmail", 2)).toBe("bulk");
    expect(slotClassOf("send", 3)).toBe("bulk");
    expect(slotClassOf("run", 5)).toBe("urgent");
    expect(slotClassOf("notice", 5)).toBe("urgent");
  });
});

describe("two classes in the sliding log", () => {
  const limits = { limit: 10, windowMs: 60_000 };

  test("bulk stops at the reserve and waits for room beyond it; urgent takes the reserve", () => {
    let s: LogState = EMPTY;
    for (let i = 0; i < 9; i++) {
      const r = tryTake(s, 1000 + i, limits, `b${i}`, "bulk");
      expect(r.ok).toBe(true);
      s = r.state;
    }
    const refused = tryTake(s, 2000, limits, "b9", "bulk");
    expect(refused.ok).toBe(false);
    // The first entry leaving the window makes room for bulk again.
    if (!refused.ok) expect(refused.waitMs).toBe(1000 + 60_000 - 2000 + 1);
    const urgent = tryTake(s, 2000, limits, "u0", "urgent");
    expect(urgent.ok).toBe(true);
    s = urgent.state;
    const full = tryTake(s, 2001, limits, "u1", "urgent");
    expect(full.ok).toBe(false);
    // Urgent waits for one slot to free: the oldest entry. Bulk, with 10 taken, for the second.
    if (!full.ok) expect(full.waitMs).toBe(1000 + 60_000 - 2001 + 1);
    const bulk = tryTake(s, 2001, limits, "b10", "bulk");
    if (!bulk.ok) expect(bulk.waitMs).toBe(1001 + 60_000 - 2001 + 1);
  });

  test("a random mix never exceeds the limit, and bulk alone never exceeds the limit less the reserve", () => {
    let s: LogState = EMPTY;
    let now = 0;
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const sent: Array<{ t: number; cls: SlotClass }> = [];
    for (let step = 0; step < 4000; step++) {
      now += Math.floor(rand() * 2000);
      const cls: SlotClass = rand() < 0.8 ? "bulk" : "urgent";
      const r = tryTake(s, now, limits, `s${step}`, cls);
      s = r.state;
      if (r.ok) sent.push({ t: now, cls });
      const inWindow = sent.filter((x) => x.t > now - limits.windowMs);
      expect(inWindow.length).toBeLessThanOrEqual(limits.limit);
    }
    expect(sent.filter((x) => x.cls === "urgent").length).toBeGreaterThan(0);
  });
});

/** The rule as each store keeps it (the file store and Redis run the same cases). */
function classCases(open: () => SlotStore, limits: Limits): void {
  test("bulk fills the window but the reserve; urgent still gets a slot; the sum stays at the limit", async () => {
    const store = open();
    try {
      const bulk = await Promise.all(Array.from({ length: 12 }, (_, i) => store.tryTake(`b${i}`, limits, "bulk")));
      expect(bulk.filter((r) => r.ok).length).toBe(limits.limit - reserveOf(limits));
      const wait = bulk.find((r) => !r.ok);
      // Waits for room beyond the reserve: the first bulk entry leaves the window (no spin).
      expect(wait && !wait.ok && wait.waitMs).toBeGreaterThan(limits.windowMs - 5_000);
      const urgent = await Promise.all(Array.from({ length: 4 }, (_, i) => store.tryTake(`u${i}`, limits, "urgent")));
      expect(urgent.filter((r) => r.ok).length).toBe(reserveOf(limits));
      expect(await store.used(limits)).toBe(limits.limit);
      expect((await store.tryTake("b-late", limits, "bulk")).ok).toBe(false);
      // An urgent slot given back is room for urgent again, not for bulk.
      await store.release("u0", limits);
      expect((await store.tryTake("b-late2", limits, "bulk")).ok).toBe(false);
      expect((await store.tryTake("u-late", limits, "urgent")).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  test("no class given: urgent, as before", async () => {
    const store = open();
    try {
      for (let i = 0; i < limits.limit; i++) expect((await store.tryTake(`x${i}`, limits)).ok).toBe(true);
      expect((await store.tryTake("over", limits)).ok).toBe(false);
    } finally {
      await store.close();
    }
  });
}

describe("two classes in the file store", () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-classes-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  classCases(() => new FileSlotStore({ dir, keyHash: `k${n++}` }), { limit: 10, windowMs: 60_000, reserve: 2 });
});

describe.skipIf(lacks(redisServer))("two classes in the Redis store", () => {
  let redis: RedisHandle;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  let n = 0;
  classCases(() => new RedisSlotStore(redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: redis.url })!, `classes${n++}`), {
    limit: 10,
    windowMs: 60_000,
    reserve: 2,
  });
});
