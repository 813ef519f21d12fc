/**
 * The outbox runner's compact bookkeeping: ids packed into two numbers
 * (ids.ts), the directory listing kept as numbers (store.ts listing/count),
 * and the schedule that takes due mail in arrival order (schedule.ts),
 * against a plain model under random operations on a fake clock.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { PackedIds, packId, unpackId } from "../../src/outbox/ids.js";
import { Schedule } from "../../src/outbox/schedule.js";
import { isOutboxId, newOutboxId, Outbox } from "../../src/outbox/store.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-outbox-schedule-");
afterAll(() => tmp.remove());
afterEach(() => {
  vi.useRealTimers();
});

/** A small deterministic generator (the tests replay the same operations every run). */
function rng(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

function ids(n: number, start = Date.now()): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(newOutboxId(start + i * 7));
  return out;
}

describe("packed ids", () => {
  it("round-trip exactly, extremes included, and keep the order of the strings", () => {
    const sample = [
      ...ids(500),
      "00000000000" + "00000000",
      "zzzzzzzzzzz" + "ffffffff",
      "0000000000z" + "0000000f",
      "zzzzzzzzz00" + "ffffffff",
    ];
    for (const id of sample) {
      expect(isOutboxId(id)).toBe(true);
      expect(unpackId(...packId(id))).toBe(id);
    }
    const list = new PackedIds(4);
    const shuffled = [...sample].sort((a, b) => (packId(a)[1] % 97) - (packId(b)[1] % 97));
    for (const id of shuffled) list.push(id);
    list.sort();
    const back = Array.from({ length: list.n }, (_, i) => list.idAt(i));
    expect(back).toEqual([...sample].sort());
    for (const id of sample) expect(back[list.indexOf(...packId(id))]).toBe(id);
    expect(list.indexOf(...packId("00000000001" + "00000000"))).toBe(-1);
  });
});

describe("the outbox listing", () => {
  it("lists queue/'s ids in arrival order with the ones that have a state file, and counts without a list", async () => {
    const box = new Outbox(join(tmp.dir, "box"));
    mkdirSync(box.queueDir, { recursive: true });
    const all = ids(700);
    const r = rng(7);
    const withState = new Set<string>();
    for (const id of [...all].reverse()) {
      writeFileSync(join(box.queueDir, `${id}.msg`), "{}\n");
      if (r(3) === 0) {
        writeFileSync(join(box.queueDir, `${id}.state`), "{}");
        withState.add(id);
      }
    }
    // Not messages: what a person or another program left there.
    for (const junk of ["notes.txt", "ABC.msg", "x.state", `${all[0]}.msg.tmp`])
      writeFileSync(join(box.queueDir, junk), "");
    const { ids: listed, withState: states } = await box.listing();
    expect(Array.from({ length: listed.n }, (_, i) => listed.idAt(i))).toEqual(all);
    expect(Array.from({ length: states.n }, (_, i) => states.idAt(i))).toEqual(all.filter((id) => withState.has(id)));
    expect(await box.count()).toBe(700);
    expect(await box.count("failed")).toBe(0);
    const missing = new Outbox(join(tmp.dir, "none"));
    expect((await missing.listing()).ids.n).toBe(0);
    expect(await missing.count()).toBe(0);
  });
});

describe("the schedule", () => {
  it("gives due mail in arrival order, once each, and what is deferred when its time comes", () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const s = new Schedule();
    const list = ids(50, 900_000);
    const packed = new PackedIds();
    for (const id of list) packed.push(id);
    const at = new Float64Array(packed.n);
    at[3] = 1_000_000 + 5_000; // deferred by an earlier run
    s.replace(packed, at, () => false);
    const busy = new Set<string>();
    const got: string[] = [];
    for (let id; (id = s.next(Date.now(), busy)); ) {
      got.push(id);
      s.delete(id);
    }
    expect(got).toEqual(list.filter((_, i) => i !== 3));
    expect(s.earliest(busy)).toBe(1_005_000);
    vi.setSystemTime(1_005_000);
    expect(s.next(Date.now(), busy)).toBe(list[3]);
    expect(s.size).toBe(1);
  });

  it("skips what is in flight, keeps known times over a new listing, forgets what vanished unless in flight", () => {
    vi.useFakeTimers({ now: 2_000_000 });
    const s = new Schedule();
    const [a, b, c, d] = ids(4, 1_900_000) as [string, string, string, string];
    const listing = (...xs: string[]) => {
      const p = new PackedIds();
      for (const x of xs) p.push(x);
      p.sort();
      return p;
    };
    s.replace(listing(a, b, c), new Float64Array(3), () => false);
    const busy = new Set<string>([a]);
    expect(s.next(Date.now(), busy)).toBe(b);
    busy.add(b);
    s.set(b, 2_060_000); // deferred
    busy.delete(b);
    // A new listing: b's state file on disk might say otherwise; the runner's own time wins.
    // c was removed by a person (queue rm); a is gone from the listing but in flight; d is new.
    const l2 = listing(b, d);
    s.replace(l2, Float64Array.from([0, 0]), (id) => busy.has(id));
    expect(s.has(a)).toBe(true);
    expect(s.has(c)).toBe(false);
    expect(s.when(b)).toBe(2_060_000);
    expect(s.next(Date.now(), busy)).toBe(d);
    expect(s.next(Date.now(), busy)).toBeUndefined();
    expect(s.earliest(busy)).toBe(2_060_000);
    // a comes back due now (its attempt could not finish): the walk goes back for it.
    busy.delete(a);
    s.set(a, Date.now());
    expect(s.next(Date.now(), busy)).toBe(a);
  });

  it("agrees with a plain model under random operations: only known, due, idle mail; none left behind", () => {
    vi.useFakeTimers({ now: 5_000_000 });
    const r = rng(2026);
    const s = new Schedule();
    const model = new Map<string, number>();
    const busy = new Set<string>();
    const pool = ids(300, 4_000_000);
    const relist = () => {
      // What is on disk: the model's messages, minus some removed by a person, plus new arrivals.
      for (const id of [...model.keys()]) if (!busy.has(id) && r(20) === 0) model.delete(id);
      const arrivals = pool.splice(0, r(15));
      const p = new PackedIds();
      const present = [...model.keys()]
        .filter((id) => !busy.has(id) || r(2) === 0)
        .concat(arrivals)
        .sort();
      for (const id of present) p.push(id);
      const at = new Float64Array(p.n);
      for (let j = 0; j < p.n; j++) {
        const id = p.idAt(j);
        if (!model.has(id)) {
          at[j] = r(3) === 0 ? Date.now() + r(10_000) : 0;
          model.set(id, at[j]!);
        }
      }
      // Known but not listed (and not in flight): forgotten.
      for (const id of [...model.keys()]) if (!present.includes(id) && !busy.has(id)) model.delete(id);
      s.replace(p, at, (id) => busy.has(id));
    };
    relist();
    for (let step = 0; step < 4000; step++) {
      const op = r(10);
      const now = Date.now();
      if (op < 4) {
        const id = s.next(now, busy);
        if (id === undefined) {
          for (const [k, t] of model)
            if (t <= now) expect(busy.has(k), `${k} due at ${t}, now ${now}, left behind`).toBe(true);
        } else {
          expect(model.has(id)).toBe(true);
          expect(model.get(id)!).toBeLessThanOrEqual(now);
          expect(busy.has(id)).toBe(false);
          busy.add(id);
        }
      } else if (op < 7 && busy.size > 0) {
        // An attempt ends: delivered (or failed), or deferred, or back to due now.
        const id = [...busy][r(busy.size)]!;
        busy.delete(id);
        const how = r(4);
        if (how < 2) {
          s.delete(id);
          model.delete(id);
        } else {
          const t = how === 2 ? now + 1 + r(20_000) : now;
          s.set(id, t);
          model.set(id, t);
        }
      } else if (op < 9) {
        vi.setSystemTime(now + r(3_000));
      } else {
        relist();
      }
      const e = s.earliest(busy);
      const idle = [...model].filter(([k]) => !busy.has(k));
      if (idle.length === 0) expect(e).toBeUndefined();
      else {
        expect(e).toBeDefined();
        // Due now when something idle is due now; else never later than the real earliest.
        const min = Math.min(...idle.map(([, t]) => t));
        expect(e!).toBeLessThanOrEqual(Math.max(min, Date.now()));
      }
      expect(s.size).toBe(model.size);
    }
  });
});
