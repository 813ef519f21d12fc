/**
 * core/abort.ts (many watchers of one signal through one listener) and limits/deadline.ts (attempts
 * whose deadlines fall in the same slice share one controller and timer; near ones are exact).
 */
import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { whenAborted } from "../../src/core/abort.js";
import { attemptDeadline, EXACT_BELOW_MS, SLICE_MS } from "../../src/limits/deadline.js";

describe("whenAborted", () => {
  test("many watchers are one listener on the signal, gone with the last watcher", () => {
    const c = new AbortController();
    const stops = Array.from({ length: 40 }, () => whenAborted(c.signal, () => {}));
    expect(getEventListeners(c.signal, "abort")).toHaveLength(1);
    for (const stop of stops.slice(1)) stop();
    expect(getEventListeners(c.signal, "abort")).toHaveLength(1);
    stops[0]!();
    expect(getEventListeners(c.signal, "abort")).toHaveLength(0);
    // Stopping twice changes nothing, and watching again adds the listener again.
    stops[0]!();
    const again = whenAborted(c.signal, () => {});
    expect(getEventListeners(c.signal, "abort")).toHaveLength(1);
    again();
  });

  test("an abort tells each watcher still watching, once; not one that stopped", () => {
    const c = new AbortController();
    const told: number[] = [];
    const stops = [1, 2, 3].map((i) => whenAborted(c.signal, () => told.push(i)));
    stops[1]!();
    c.abort();
    c.abort();
    expect(told).toEqual([1, 3]);
    expect(getEventListeners(c.signal, "abort")).toHaveLength(0);
    // A stop after the abort is harmless.
    stops[0]!();
  });

  test("a signal aborted already tells the watcher at once", () => {
    const c = new AbortController();
    c.abort();
    const told = vi.fn();
    const stop = whenAborted(c.signal, told);
    expect(told).toHaveBeenCalledTimes(1);
    stop();
    expect(getEventListeners(c.signal, "abort")).toHaveLength(0);
  });

  test("a watcher that throws does not keep the others from being told; its error is reported", () => {
    const c = new AbortController();
    const told: string[] = [];
    whenAborted(c.signal, () => told.push("a"));
    whenAborted(c.signal, () => {
      throw new Error("boom");
    });
    whenAborted(c.signal, () => told.push("c"));
    const reported: unknown[] = [];
    const tick = vi.spyOn(process, "nextTick").mockImplementation(((fn: () => void) => {
      try {
        fn();
      } catch (e) {
        reported.push(e);
      }
    }) as never);
    try {
      c.abort();
    } finally {
      tick.mockRestore();
    }
    expect(told).toEqual(["a", "c"]);
    expect(reported).toHaveLength(1);
    expect((reported[0] as Error).message).toBe("boom");
  });
});

describe("attemptDeadline", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 * SLICE_MS + 3 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test("attempts whose deadlines fall in one slice share a signal and one timer, aborted at the slice's start", () => {
    const a = attemptDeadline(60_000);
    vi.advanceTimersByTime(2);
    const b = attemptDeadline(60_000);
    expect(b.signal).toBe(a.signal);
    expect(vi.getTimerCount()).toBe(1);
    // Another slice: its own.
    vi.advanceTimersByTime(SLICE_MS);
    const c = attemptDeadline(60_000);
    expect(c.signal).not.toBe(a.signal);
    expect(vi.getTimerCount()).toBe(2);
    // Never later than an attempt's own deadline, and less than a slice before it.
    const started = 1_000_000 * SLICE_MS + 3;
    vi.advanceTimersByTime(60_000 - 2 - SLICE_MS - SLICE_MS);
    expect(a.signal.aborted).toBe(false);
    vi.advanceTimersByTime(SLICE_MS - 1);
    expect(a.signal.aborted).toBe(true);
    expect(Date.now()).toBeLessThanOrEqual(started + 60_000);
    expect(Date.now()).toBeGreaterThan(started + 60_000 - SLICE_MS);
    a.release();
    b.release();
    c.release();
  });

  test("the timer goes when the last attempt of its slice ends, not before", () => {
    const a = attemptDeadline(30_000);
    const b = attemptDeadline(30_000);
    a.release();
    a.release();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(30_000);
    expect(b.signal.aborted).toBe(true);
    b.release();
    expect(vi.getTimerCount()).toBe(0);

    const c = attemptDeadline(30_000);
    const d = attemptDeadline(30_000);
    c.release();
    d.release();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(60_000);
    expect(d.signal.aborted).toBe(false);
    // A new attempt in that slice after all ended gets a fresh deadline.
    vi.setSystemTime(1_000_000 * SLICE_MS + 3);
    const e = attemptDeadline(30_000);
    expect(e.signal).not.toBe(d.signal);
    e.release();
  });

  test("a deadline under a second is the attempt's own, to the millisecond", () => {
    const a = attemptDeadline(EXACT_BELOW_MS - 1);
    const b = attemptDeadline(EXACT_BELOW_MS - 1);
    expect(b.signal).not.toBe(a.signal);
    vi.advanceTimersByTime(EXACT_BELOW_MS - 2);
    expect(a.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(a.signal.aborted).toBe(true);
    b.release();
    a.release();
    const c = attemptDeadline(0);
    vi.advanceTimersByTime(0);
    expect(c.signal.aborted).toBe(true);
    c.release();
    expect(vi.getTimerCount()).toBe(0);
  });

  test("the caller's signal aborts the shared deadlines following it, with its reason, and no others", () => {
    const caller = new AbortController();
    const other = new AbortController();
    const a = attemptDeadline(60_000, caller.signal);
    const b = attemptDeadline(60_000, caller.signal);
    const near = attemptDeadline(10, caller.signal);
    const free = attemptDeadline(60_000);
    const others = attemptDeadline(60_000, other.signal);
    expect(a.signal).toBe(b.signal);
    expect(free.signal).not.toBe(a.signal);
    expect(others.signal).not.toBe(a.signal);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    caller.abort(new Error("stop"));
    expect(a.signal.aborted && near.signal.aborted).toBe(true);
    expect((a.signal.reason as Error).message).toBe("stop");
    expect(free.signal.aborted || others.signal.aborted).toBe(false);
    // An attempt after the caller stopped starts stopped.
    const late = attemptDeadline(60_000, caller.signal);
    expect(late.signal.aborted).toBe(true);
    for (const d of [a, b, near, free, others, late]) d.release();
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(other.signal, "abort")).toHaveLength(0);
  });
});
