/**
 * The runner lock's read-only check (one stat) against proper-lockfile's own check(), which
 * it stands in for: no lock, a fresh one, one refreshed by its holder, one a dead runner left
 * (mtime past the stale limit), and one released.
 */
import { statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { afterAll, describe, expect, it } from "vitest";
import { lockOutbox, runnerHoldsOutbox } from "../../src/outbox/runner-lock.js";
import { Outbox } from "../../src/outbox/store.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-outbox-lock-");
afterAll(() => tmp.remove());

const theirs = (o: Outbox) => lockfile.check(o.dir, { lockfilePath: join(o.dir, "runner.lock"), realpath: false, stale: 10_000 });

describe("runnerHoldsOutbox", () => {
  it("says what proper-lockfile's check() says", async () => {
    const outbox = new Outbox(join(tmp.dir, "outbox"));
    outbox.ensureDirs();
    expect(runnerHoldsOutbox(outbox)).toBe(false);
    expect(await theirs(outbox)).toBe(false);

    const release = await lockOutbox(outbox, () => {});
    expect(release).toBeDefined();
    expect(runnerHoldsOutbox(outbox)).toBe(true);
    expect(await theirs(outbox)).toBe(true);
    // A second runner does not get it.
    expect(await lockOutbox(outbox, () => {})).toBeUndefined();

    // A holder killed with -9 stops refreshing: past 10 s its lock is stale for both.
    const lock = join(outbox.dir, "runner.lock");
    const old = (Date.now() - 11_000) / 1000;
    utimesSync(lock, old, old);
    expect(runnerHoldsOutbox(outbox)).toBe(false);
    expect(await theirs(outbox)).toBe(false);
    // Just inside the limit it is still held.
    const recent = (Date.now() - 9_000) / 1000;
    utimesSync(lock, recent, recent);
    expect(runnerHoldsOutbox(outbox)).toBe(true);
    expect(await theirs(outbox)).toBe(true);
    // At the boundary, whole milliseconds as proper-lockfile compares them.
    const m = Math.trunc(statSync(lock).mtimeMs);
    expect(runnerHoldsOutbox(outbox, m + 10_000)).toBe(true);
    expect(runnerHoldsOutbox(outbox, m + 10_001)).toBe(false);

    utimesSync(lock, new Date(), new Date());
    await release!();
    expect(runnerHoldsOutbox(outbox)).toBe(false);
    expect(await theirs(outbox)).toBe(false);
  });
});
