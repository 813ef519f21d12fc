/**
 * The outbox's runner lock: one runner at a time delivers. It is core/lock.ts's refreshed lock
 * (proper-lockfile's directory, whose mtime the holder refreshes, so a runner killed with -9 stops
 * holding it within STALE_MS), with the holder's pid in <outbox>/runner.pid. Whether someone holds
 * it is asked by every `sendmail` that queues: one stat (refreshedLockFresh), so asking does not
 * load the library and its fs patches.
 *
 * A runner killed with -9 leaves a fresh lock for up to STALE_MS: mail queued meanwhile must not
 * count on it. A fresh lock whose pid is gone is not held: the writer starts a runner, and that
 * runner waits until the library judges the lock stale and takes it.
 */
import { join } from "node:path";
import { holderFileRuns, refreshedLockFresh, removeFutureLock, tryRefreshedLock } from "../core/lock.js";
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
export async function lockOutbox(
  outbox: Outbox,
  onCompromised: () => void,
  timing: LockTiming = {},
): Promise<Release | undefined> {
  outbox.ensureDirs();
  const staleMs = Math.max(2000, timing.staleMs ?? STALE_MS);
  const poll = Math.max(10, timing.pollMs ?? DEAD_POLL_MS);
  const lock = {
    guarded: outbox.dir,
    lock: lockPath(outbox),
    holderFile: ownerPath(outbox),
    staleMs,
    updateMs: Math.min(UPDATE_MS, staleMs / 5),
    onCompromised,
  };
  // A dead holder's lock is stale STALE_MS after its last refresh, at most STALE_MS from now;
  // past that (and a margin) whoever holds it is not the dead runner: leave it to them.
  const giveUpAt = Date.now() + staleMs + 4 * poll;
  for (;;) {
    const a = await tryRefreshedLock(lock);
    if ("release" in a) return a.release;
    // Held by a live runner (or one that has not written its pid yet): it delivers.
    if (a.holderRuns !== false) return undefined;
    // A dead runner's lock from "the future" would wait until the clock passed it again: nothing
    // would be delivered until then. Its holder is gone, and no live runner made it.
    if (removeFutureLock(lock.lock, staleMs)) continue;
    if (Date.now() >= giveUpAt) return undefined;
    await new Promise((r) => setTimeout(r, poll));
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
  return refreshedLockFresh(lockPath(outbox), STALE_MS, now) && ownerAlive(outbox) !== false;
}
