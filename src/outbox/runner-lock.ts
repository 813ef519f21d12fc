/**
 * The outbox's runner lock: one runner at a time delivers. proper-lockfile
 * takes it (a directory made atomically, whose mtime the holder refreshes, so
 * a runner killed with -9 stops holding it within STALE_MS). Whether someone
 * holds it is asked by every `sendmail` that queues: that is read here with one
 * stat, by the library's own rule (check(): held while the lock's mtime is no
 * older than `stale`), so asking does not load the library and its fs patches
 * (~30 ms of a queueing sendmail's start-up).
 *
 * A runner killed with -9 leaves a fresh lock for up to STALE_MS: mail queued
 * meanwhile must not count on it. So the holder writes its pid beside the lock
 * (<outbox>/runner.pid: the lock is a directory proper-lockfile removes with
 * rmdir, so nothing may go inside it), and removes it before releasing. A
 * fresh lock whose pid is gone is not held: the writer starts a runner, and
 * that runner waits until the library judges the lock stale and takes it.
 */
import { readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../core/atomic.js";
import { holderFileRuns } from "../core/lock.js";
import type { Outbox } from "./store.js";

/** A lock not refreshed for this long is a dead runner's. */
const STALE_MS = 10_000;
/** How often the holder refreshes it (well inside STALE_MS). */
const UPDATE_MS = 2_000;
/** How often a runner looks again at a lock a dead runner left, until it is stale. */
const DEAD_POLL_MS = 500;

const lockPath = (outbox: Outbox) => join(outbox.dir, "runner.lock");
/** The holder's pid, one line (for a person, `kill $(cat runner.pid)`, too). */
const ownerPath = (outbox: Outbox) => join(outbox.dir, "runner.pid");

export type Release = () => Promise<void>;

export interface LockTiming {
  /** proper-lockfile's `stale` (at least 2000: the library's minimum). Tests shorten it. */
  staleMs?: number;
  /** How often to look again at a dead runner's lock. */
  pollMs?: number;
}

/**
 * Take the lock, or undefined when a live runner holds it. A lock whose holder
 * is dead (its pid gone) is waited for, until proper-lockfile judges it stale
 * (bounded: its mtime no longer moves), then taken.
 */
export async function lockOutbox(outbox: Outbox, onCompromised: () => void, timing: LockTiming = {}): Promise<Release | undefined> {
  const { default: lockfile } = await import("proper-lockfile");
  outbox.ensureDirs();
  const stale = Math.max(2000, timing.staleMs ?? STALE_MS);
  const poll = Math.max(10, timing.pollMs ?? DEAD_POLL_MS);
  const update = Math.min(UPDATE_MS, stale / 5);
  // A dead holder's lock is stale STALE_MS after its last refresh, at most STALE_MS from now;
  // past that (and a margin) whoever holds it is not the dead runner: leave it to them.
  const giveUpAt = Date.now() + stale + 4 * poll;
  for (;;) {
    let release: Release;
    try {
      release = await lockfile.lock(outbox.dir, { lockfilePath: lockPath(outbox), realpath: false, stale, update, retries: 0, onCompromised });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ELOCKED") throw e;
      // Held by a live runner (or one that has not written its pid yet): it delivers.
      if (ownerAlive(outbox) !== false) return undefined;
      // A dead runner's lock from "the future" (the clock was set back after it ran) would not be
      // stale by the library's rule until the clock passed it again: nothing would be delivered
      // until then. Its holder is gone, and no live runner made it (theirs has the clock's time).
      if (removeFutureLock(outbox, stale)) continue;
      if (Date.now() >= giveUpAt) return undefined;
      await new Promise((r) => setTimeout(r, poll));
      continue;
    }
    writeOwner(outbox);
    return async () => {
      // The pid goes first (if still ours): once the lock is released another runner may write its own.
      try {
        if (Number.parseInt(readFileSync(ownerPath(outbox), "utf8"), 10) === process.pid) rmSync(ownerPath(outbox), { force: true });
      } catch {}
      await release();
    };
  }
}

/** Removes the lock when its mtime is further ahead of the clock than a live runner's refresh could put it; true when it did. */
function removeFutureLock(outbox: Outbox, stale: number): boolean {
  try {
    if (statSync(lockPath(outbox)).mtimeMs <= Date.now() + stale) return false;
    rmSync(lockPath(outbox), { recursive: true, force: true });
    return true;
  } catch {
    return false;
  }
}

/** The pid, atomically (tmp + rename): a reader sees the old file or the whole new one. */
function writeOwner(outbox: Outbox): void {
  try {
    writeFileAtomic(ownerPath(outbox), `${process.pid}\n`, { durable: false });
  } catch {
    // Without it the lock counts as held (as before pids were written): still one runner.
  }
}

/**
 * Whether the process named in runner.pid is alive: undefined when there is no (readable) pid. A
 * zombie is dead (where nobody reaps orphans, a container's init, a runner killed with -9 stays
 * one), and so is a pid now another program's: core/lock.ts holderFileRuns.
 */
export function ownerAlive(outbox: Outbox): boolean | undefined {
  return holderFileRuns(ownerPath(outbox));
}

/**
 * Whether a live runner holds the outbox now: a lock there, refreshed within
 * STALE_MS, whose holder's pid (when it wrote one) is alive.
 */
export function runnerHoldsOutbox(outbox: Outbox, now = Date.now()): boolean {
  try {
    // proper-lockfile compares the mtime as a Date: whole milliseconds.
    if (Math.trunc(statSync(lockPath(outbox)).mtimeMs) < now - STALE_MS) return false;
  } catch {
    return false;
  }
  return ownerAlive(outbox) !== false;
}
