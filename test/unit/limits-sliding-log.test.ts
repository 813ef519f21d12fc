import { describe, expect, test } from "vitest";
import { block, complete, EMPTY, prune, release, tryTake, type LogState } from "../../src/limits/sliding-log.js";

const limits = { limit: 5, windowMs: 60_000 };

/** Most sends that any window of `windowMs` holds, from the send times. */
function maxInAnyWindow(times: number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i]! - t[j]! >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

describe("sliding log", () => {
  test("takes up to the limit, then says how long until a slot frees", () => {
    let s: LogState = EMPTY;
    for (let i = 0; i < 5; i++) {
      const r = tryTake(s, 1000 + i, limits, `id${i}`);
      expect(r.ok).toBe(true);
      s = r.state;
    }
    const r = tryTake(s, 2000, limits, "id5");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.waitMs).toBe(1000 + 60_000 - 2000 + 1);
  });

  test("never more than N in any rolling window, with a fake clock and a greedy client", () => {
    let s: LogState = EMPTY;
    const sent: number[] = [];
    let now = 0;
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let step = 0; step < 5000; step++) {
      now += Math.floor(rand() * 3000);
      const r = tryTake(s, now, limits, `s${step}`);
      s = r.state;
      if (r.ok) sent.push(now);
      else now += r.waitMs * (rand() < 0.5 ? 1 : 0); // sometimes wait exactly as told
    }
    expect(sent.length).toBeGreaterThan(100);
    expect(maxInAnyWindow(sent, limits.windowMs)).toBeLessThanOrEqual(limits.limit);
  });

  test("across the edge of a minute there is no second burst (unlike a token bucket)", () => {
    let s: LogState = EMPTY;
    const sent: number[] = [];
    for (const t of [59_000, 59_100, 59_200, 59_300, 59_400, 60_000, 60_100, 61_000]) {
      const r = tryTake(s, t, limits, `t${t}`);
      s = r.state;
      if (r.ok) sent.push(t);
    }
    expect(sent).toEqual([59_000, 59_100, 59_200, 59_300, 59_400]);
    const later = tryTake(s, 59_000 + 60_000 + 1, limits, "later");
    expect(later.ok).toBe(true);
  });

  test("a wall clock that jumps back does not let a burst through or block forever", () => {
    let s: LogState = EMPTY;
    for (let i = 0; i < 5; i++) s = tryTake(s, 1_800_000_000_000 + i, limits, `a${i}`).state;
    // The clock goes back an hour: the entries look like the future.
    const back = 1_800_000_000_000 - 3_600_000;
    const r = tryTake(s, back, limits, "b");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.waitMs).toBeLessThanOrEqual(limits.windowMs + 1);
    // A window after the jump, sends flow again.
    expect(tryTake(r.state, back + limits.windowMs + 1, limits, "c").ok).toBe(true);
  });

  test("a wall clock that jumps forward frees the old window", () => {
    let s: LogState = EMPTY;
    for (let i = 0; i < 5; i++) s = tryTake(s, 1000 + i, limits, `a${i}`).state;
    expect(tryTake(s, 1000 + 3_600_000, limits, "f").ok).toBe(true);
  });

  test("complete moves the entry to the finish time; release frees it", () => {
    let s = tryTake(EMPTY, 1000, limits, "x").state;
    s = complete(s, 4000, "x");
    expect(s.entries).toEqual([{ t: 4000, id: "x" }]);
    expect(complete(s, 2000, "x").entries[0]!.t).toBe(4000);
    expect(release(s, "x").entries).toEqual([]);
  });

  test("a block from the server holds everyone back until it ends", () => {
    const s = block(EMPTY, 10_000);
    const r = tryTake(s, 4000, limits, "x");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.waitMs).toBe(6000);
    expect(tryTake(s, 10_000, limits, "y").ok).toBe(true);
    // A block absurdly far ahead is a clock that went back, not a real Retry-After.
    expect(prune(block(EMPTY, 1000 + 10 * 3_600_000), 1000, limits).blockedUntil).toBe(1000 + limits.windowMs);
  });
});
