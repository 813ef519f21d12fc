/**
 * The outbox's runner lock: one runner at a time delivers. proper-lockfile
 * takes it (a directory made atomically, whose mtime the holder refreshes, so
 * a runner killed with -9 stops holding it within STALE_MS). Whether someone
 * holds it is asked by every `sendmail` that queues: that is read here with one
 * stat, by the library's own rule (check(): held while the lock's mtime is no
 * older than `stale`), so asking does not load the library and its fs patches
 * (~30 ms of a queueing sendmail's start-up).
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import type { Outbox } from "./store.js";

/** A lock not refreshed for this long is a dead runner's. */
const STALE_MS = 10_000;
/** How often the holder refreshes it (well inside STALE_MS). */
const UPDATE_MS = 2_000;

const lockPath = (outbox: Outbox) => join(outbox.dir, "runner.lock");

export type Release = () => Promise<void>;

/** Take the lock, or undefined when a live runner holds it. */
export async function lockOutbox(outbox: Outbox, onCompromised: () => void): Promise<Release | undefined> {
  const { default: lockfile } = await import("proper-lockfile");
  outbox.ensureDirs();
  try {
    return await lockfile.lock(outbox.dir, { lockfilePath: lockPath(outbox), realpath: false, stale: STALE_MS, update: UPDATE_MS, retries: 0, onCompromised });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOCKED") return undefined;
    throw e;
  }
}

/** Whether a live runner holds the outbox now (a lock there, refreshed within STALE_MS). */
export function runnerHoldsOutbox(outbox: Outbox, now = Date.now()): boolean {
  try {
    // proper-lockfile compares the mtime as a Date: whole milliseconds.
    return Math.trunc(statSync(lockPath(outbox)).mtimeMs) >= now - STALE_MS;
  } catch {
    return false;
  }
}
