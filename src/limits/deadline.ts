/**
 * The signal that ends an attempt at its delivery deadline (deliver()'s --deadline), and follows
 * the caller's own signal.
 *
 * An AbortController, a timer and a listener per attempt are a cost a batch pays per message,
 * and nearly all of a batch's attempts end long before their deadline. So attempts whose
 * deadlines fall within the same SLICE_MS, with the same caller's signal, share one controller and
 * one timer: the slice's start is their deadline, at most SLICE_MS before each one's own. The
 * timer goes when the last of them ends. A deadline closer than EXACT_BELOW_MS is the attempt's
 * own, to the millisecond: there SLICE_MS would be a noticeable share of the time left.
 */
import { whenAborted } from "../core/abort.js";

export const SLICE_MS = 16;
export const EXACT_BELOW_MS = 1_000;

export interface AttemptDeadline {
  /** Aborts at the deadline, or when the caller's signal does. */
  readonly signal: AbortSignal;
  /** The attempt has ended: its deadline is no longer needed (called once; more calls do nothing). */
  release(): void;
}

interface Shared {
  controller: AbortController;
  timer: NodeJS.Timeout;
  users: number;
  unfollow: () => void;
}

/** The shared deadlines still ahead, by slice: one map per caller's signal, and one for none. */
const byCaller = new WeakMap<AbortSignal, Map<number, Shared>>();
const noCaller = new Map<number, Shared>();

/** The controller aborts as `caller` does (at once, if it has). */
function follow(caller: AbortSignal | undefined, controller: AbortController): () => void {
  return whenAborted(caller, () => controller.abort(caller!.reason));
}

/** A deadline `ms` from now for one attempt, following `caller`. */
export function attemptDeadline(ms: number, caller?: AbortSignal, now: number = Date.now()): AttemptDeadline {
  if (ms < EXACT_BELOW_MS) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.max(0, ms));
    const unfollow = follow(caller, controller);
    let released = false;
    return {
      signal: controller.signal,
      release: () => {
        if (released) return;
        released = true;
        clearTimeout(timer);
        unfollow();
      },
    };
  }
  const slice = Math.floor((now + ms) / SLICE_MS);
  let group = caller ? byCaller.get(caller) : noCaller;
  if (!group) byCaller.set(caller!, (group = new Map()));
  const slices = group;
  let shared = slices.get(slice);
  if (!shared || shared.controller.signal.aborted) {
    const controller = new AbortController();
    const mine: Shared = {
      controller,
      users: 0,
      timer: setTimeout(
        () => {
          if (slices.get(slice) === mine) slices.delete(slice);
          mine.unfollow();
          controller.abort();
        },
        Math.max(0, slice * SLICE_MS - now),
      ),
      unfollow: () => {},
    };
    mine.unfollow = follow(caller, controller);
    slices.set(slice, mine);
    shared = mine;
  }
  const taken = shared;
  taken.users++;
  let released = false;
  return {
    signal: taken.controller.signal,
    release: () => {
      if (released) return;
      released = true;
      if (--taken.users > 0) return;
      clearTimeout(taken.timer);
      taken.unfollow();
      if (slices.get(slice) === taken) slices.delete(slice);
    },
  };
}
