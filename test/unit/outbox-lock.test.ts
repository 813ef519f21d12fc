/**
 * The runner lock's read-only check (one stat) against proper-lockfile's own check(), which
 * it stands in for: no lock, a fresh one, one refreshed by its holder, one a dead runner left
 * (mtime past the stale limit), and one released.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { afterAll, describe, expect, it } from "vitest";
import { lockOutbox, ownerAlive, runnerHoldsOutbox } from "../../src/outbox/runner-lock.js";
import { Outbox } from "../../src/outbox/store.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-outbox-lock-");
afterAll(() => tmp.remove());

const theirs = (o: Outbox) =>
  lockfile.check(o.dir, { lockfilePath: join(o.dir, "runner.lock"), realpath: false, stale: 10_000 });

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

/** A pid that was a process and is no more (a child that exited and was reaped). */
function deadPid(): number {
  const pid = Number(
    execFileSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }),
  );
  expect(pid).toBeGreaterThan(0);
  return pid;
}

let k = 0;
/** An outbox whose lock a runner left as it was killed with -9: the directory, fresh, and its pid file. */
function leftBy(pid: number): Outbox {
  const outbox = new Outbox(join(tmp.dir, `dead-${k++}`));
  outbox.ensureDirs();
  mkdirSync(join(outbox.dir, "runner.lock"));
  writeFileSync(join(outbox.dir, "runner.pid"), `${pid}\n`);
  return outbox;
}

describe("a lock whose holder is dead", () => {
  it("is held while its pid is alive, or while no pid was written yet", () => {
    expect(runnerHoldsOutbox(leftBy(process.pid))).toBe(true);
    const outbox = leftBy(process.pid);
    writeFileSync(join(outbox.dir, "runner.pid"), "");
    expect(ownerAlive(outbox)).toBeUndefined();
    expect(runnerHoldsOutbox(outbox)).toBe(true);
  });

  it("is not held when its pid is gone, fresh as the lock is", async () => {
    const outbox = leftBy(deadPid());
    expect(await theirs(outbox)).toBe(true);
    expect(ownerAlive(outbox)).toBe(false);
    expect(runnerHoldsOutbox(outbox)).toBe(false);
  });

  it("a runner gives up at once on a live holder's lock, and waits for a dead one's until it is stale, then takes it", async () => {
    // Nobody refreshes this lock either: had the runner waited, it would have taken it once stale.
    const live = leftBy(process.pid);
    expect(await lockOutbox(live, () => {}, { staleMs: 2000, pollMs: 50 })).toBeUndefined();
    expect(existsSync(join(live.dir, "runner.lock"))).toBe(true);

    const dead = leftBy(deadPid());
    const release = await lockOutbox(dead, () => {}, { staleMs: 2000, pollMs: 50 });
    expect(release).toBeDefined();
    // Taken over by proper-lockfile's rule (the dead lock was stale), and now this process's.
    expect(readFileSync(join(dead.dir, "runner.pid"), "utf8")).toBe(`${process.pid}\n`);
    expect(runnerHoldsOutbox(dead)).toBe(true);
    expect(await lockOutbox(dead, () => {}, { staleMs: 2000, pollMs: 50 })).toBeUndefined();
    await release!();
    expect(existsSync(join(dead.dir, "runner.pid"))).toBe(false);
    expect(existsSync(join(dead.dir, "runner.lock"))).toBe(false);
    expect(runnerHoldsOutbox(dead)).toBe(false);
  }, 20_000);

  it("a dead runner's lock from the future (the clock set back since) is taken at once, not when the clock passes it again", async () => {
    const outbox = leftBy(deadPid());
    const hourAhead = new Date(Date.now() + 3600_000);
    utimesSync(join(outbox.dir, "runner.lock"), hourAhead, hourAhead);
    // Without the check it would wait for staleness that never comes (the mtime is ahead), then give up.
    const release = await lockOutbox(outbox, () => {}, { staleMs: 2000, pollMs: 50 });
    expect(release).toBeDefined();
    expect(readFileSync(join(outbox.dir, "runner.pid"), "utf8")).toBe(`${process.pid}\n`);
    await release!();
    // A live holder's, ahead or not, is left alone.
    const live = leftBy(process.pid);
    utimesSync(join(live.dir, "runner.lock"), hourAhead, hourAhead);
    expect(await lockOutbox(live, () => {}, { staleMs: 2000, pollMs: 50 })).toBeUndefined();
    expect(existsSync(join(live.dir, "runner.lock"))).toBe(true);
  }, 20_000);
});
