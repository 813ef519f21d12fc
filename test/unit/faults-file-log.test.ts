/**
 * The file budget as an append-only log: the same answers as the pure
 * sliding log for any sequence of operations; a torn last line (a crash
 * mid-append) is a change that never happened; the single-object file of
 * earlier versions is read; the log is rewritten once it has grown.
 */
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { FileSlotStore } from "../../src/limits/file-store.js";
import { block, complete, EMPTY, release, tryTake, used, type LogState } from "../../src/limits/sliding-log.js";

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "mailsend-file-log-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("file store as a log", () => {
  test("answers exactly as the pure sliding log over 3,000 random operations (a fake clock, two stores on one file)", async () => {
    const dir = tmp();
    let now = 1_700_000_000_000;
    const clock = () => now;
    const stores = [
      new FileSlotStore({ dir, keyHash: "k", now: clock }),
      new FileSlotStore({ dir, keyHash: "k", now: clock }),
    ];
    const limits = { limit: 5, windowMs: 10_000 };
    let model: LogState = EMPTY;
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const live: string[] = [];
    for (let i = 0; i < 3000; i++) {
      now += Math.floor(rnd() * 900);
      if (rnd() < 0.02) now -= 5_000; // the wall clock goes back now and then
      const store = stores[i % 2]!;
      const r = rnd();
      if (r < 0.5) {
        const id = `id${i}`;
        const got = await store.tryTake(id, limits);
        const want = tryTake(model, now, limits, id);
        model = want.state;
        expect(got.ok, `op ${i}`).toBe(want.ok);
        if (!want.ok && !got.ok) expect(got.waitMs).toBe(want.waitMs);
        if (want.ok) live.push(id);
      } else if (r < 0.75 && live.length) {
        const id = live.shift()!;
        await store.complete(id, limits);
        model = complete(model, now, id);
      } else if (r < 0.9 && live.length) {
        const id = live.pop()!;
        await store.release(id, limits);
        model = release(model, id);
      } else if (r < 0.93) {
        await store.block(2_000, limits);
        model = block(model, now + 2_000);
      } else {
        expect(await store.used(limits), `op ${i}`).toBe(used(model, now, limits));
      }
    }
    // Appended, and rewritten whenever it grew: never long.
    expect(readFileSync(join(dir, "k.json"), "utf8").split("\n").length).toBeLessThanOrEqual(32 + 2 * 5 + 8);
  });

  test("a slot is one appended line, not a rewrite of the file", async () => {
    const dir = tmp();
    const store = new FileSlotStore({ dir, keyHash: "k" });
    const limits = { limit: 60, windowMs: 60_000 };
    await store.tryTake("a", limits);
    const first = readFileSync(join(dir, "k.json"), "utf8");
    await store.tryTake("b", limits);
    const second = readFileSync(join(dir, "k.json"), "utf8");
    expect(second.startsWith(first)).toBe(true);
    expect(second.slice(first.length)).toMatch(/^\{"take":"b","t":\d+\}\n$/);
  });

  test("a torn last line (a crash mid-append) is a change that never happened, and the next write leaves a clean log", async () => {
    const dir = tmp();
    const limits = { limit: 2, windowMs: 60_000 };
    const store = new FileSlotStore({ dir, keyHash: "k" });
    expect((await store.tryTake("a", limits)).ok).toBe(true);
    appendFileSync(join(dir, "k.json"), '{"take":"b","t":');
    expect(await store.used(limits)).toBe(1);
    expect((await store.tryTake("c", limits)).ok).toBe(true);
    const text = readFileSync(join(dir, "k.json"), "utf8");
    expect(text.endsWith("\n")).toBe(true);
    for (const l of text.trim().split("\n")) JSON.parse(l);
    expect((await store.tryTake("d", limits)).ok).toBe(false);
    expect(store.takeWarnings()).toEqual([]);
  });

  test("the single-object file of earlier versions is read as it is", async () => {
    const dir = tmp();
    const now = Date.now();
    writeFileSync(
      join(dir, "k.json"),
      JSON.stringify({
        entries: [
          { t: now, id: "x" },
          { t: now, id: "y" },
        ],
        blockedUntil: 0,
      }),
    );
    const store = new FileSlotStore({ dir, keyHash: "k" });
    expect(await store.used({ limit: 2, windowMs: 60_000 })).toBe(2);
    expect((await store.tryTake("z", { limit: 2, windowMs: 60_000 })).ok).toBe(false);
    expect(store.takeWarnings()).toEqual([]);
  });

  test("a line in the middle that is not a change is damage: said, and the window counted as full", async () => {
    const dir = tmp();
    const store = new FileSlotStore({ dir, keyHash: "k" });
    await store.tryTake("a", { limit: 5, windowMs: 60_000 });
    appendFileSync(join(dir, "k.json"), 'garbage\n{"take":"b","t":1}\n');
    const r = await store.tryTake("c", { limit: 5, windowMs: 60_000 });
    expect(r.ok).toBe(false);
    expect(store.takeWarnings()[0]).toMatch(/was damaged \(line 2 is not a change of the log|Unexpected token/);
  });
});
