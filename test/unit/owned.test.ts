/**
 * Files written where another user may own the directory (root in a daemon user's state dir): no
 * link at the end of the path is followed, and what root makes there is that user's. The rate-limit
 * state, the runner's pid and log go through this; the outbox's own files through writeDurably.
 */
import {
  chownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { closeSync, writeSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { openOwned } from "../../src/core/owned.js";
import { FileSlotStore } from "../../src/limits/file-store.js";
import { scratch } from "../helpers/tmp.js";

const s = scratch("mailsend-owned-");
afterAll(() => s.remove());
const NOBODY = 65534;
const AS_ROOT = process.getuid?.() === 0;

test("a link planted at the path is never written through, to append or to make", () => {
  const dir = join(s.dir, "links");
  mkdirSync(dir);
  const victim = join(s.dir, "victim");
  writeFileSync(victim, "precious\n");
  symlinkSync(victim, join(dir, "runner.log"));
  symlinkSync(victim, join(dir, "state.tmp"));
  expect(() => openOwned(join(dir, "runner.log"), "append")).toThrow(/ELOOP|symbolic link/);
  expect(() => openOwned(join(dir, "state.tmp"), "new")).toThrow(/EEXIST/);
  expect(readFileSync(victim, "utf8")).toBe("precious\n");
  // A plain file: appended to, made when missing.
  const fd = openOwned(join(dir, "plain.log"), "append");
  writeSync(fd, "one\n");
  closeSync(fd);
  expect(readFileSync(join(dir, "plain.log"), "utf8")).toBe("one\n");
});

test.skipIf(!AS_ROOT)(
  "as root in nobody's state dir: the rate-limit state stays nobody's, so nobody's sends go on using it",
  async () => {
    const dir = join(s.dir, "state-nobody");
    mkdirSync(dir);
    chownSync(dir, NOBODY, NOBODY);
    const limits = { limit: 10, windowMs: 60_000 };
    // ratelimit/ made by root in nobody's dir: nobody's too, or nobody could not enter it at all.
    const store = new FileSlotStore({ dir: join(dir, "ratelimit"), keyHash: "k" });
    for (const id of ["a", "b", "c"]) {
      expect((await store.tryTake(id, limits)).ok).toBe(true);
      await store.complete(id, limits);
    }
    expect(statSync(join(dir, "ratelimit")).uid).toBe(NOBODY);
    const files = readdirSync(join(dir, "ratelimit"));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(lstatSync(join(dir, "ratelimit", f)).uid, f).toBe(NOBODY);
    const fd = openOwned(join(dir, "runner.log"), "append");
    closeSync(fd);
    expect(statSync(join(dir, "runner.log")).uid).toBe(NOBODY);
  },
);
