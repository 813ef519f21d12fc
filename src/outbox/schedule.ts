/**
 * When each message the runner knows of is next due, kept compact: three
 * typed arrays in arrival (id) order, 24 bytes a message, rather than a map
 * of id strings, so a runner with a large queue stays small.
 *
 * Due mail is taken in arrival order by a cursor that walks the arrays once;
 * what it passes that is not yet due sets `later`, and the walk starts again
 * from the beginning only once `later` has come. A delivered (or failed, or
 * removed) message is a tombstone until the next listing replaces the arrays.
 */
import { compareIds, findId, packId, type PackedIds, unpackId } from "./ids.js";

/** A tombstone: delivered, failed, or gone. */
const GONE = -1;

export class Schedule {
  private hi = new Float64Array(0);
  private lo = new Float64Array(0);
  private at = new Float64Array(0);
  private n = 0;
  private live = 0;
  /** Entries before it were passed by the walk: not due then, in flight, or taken. */
  private cursor = 0;
  /** The earliest due time passed by the walk (a lower bound: it may since have gone). */
  private later: number | undefined;

  /** Messages known and not delivered, failed or gone. */
  get size(): number {
    return this.live;
  }

  private indexOf(hi: number, lo: number): number {
    return findId(this.hi, this.lo, this.n, hi, lo);
  }

  private idAt(i: number): string {
    return unpackId(this.hi[i]!, this.lo[i]!);
  }

  /** Known and not a tombstone. */
  knows(hi: number, lo: number): boolean {
    const i = this.indexOf(hi, lo);
    return i >= 0 && this.at[i] !== GONE;
  }

  has(id: string): boolean {
    return this.knows(...packId(id));
  }

  /** The time the message is due (ms), or undefined when not known. */
  when(id: string): number | undefined {
    const i = this.indexOf(...packId(id));
    return i >= 0 && this.at[i] !== GONE ? this.at[i] : undefined;
  }

  set(id: string, when: number): void {
    const [h, l] = packId(id);
    let i = this.indexOf(h, l);
    if (i < 0) i = this.insert(h, l);
    if (this.at[i] === GONE) this.live++;
    this.at[i] = Math.max(0, when);
    if (when <= Date.now()) {
      // Due now and already passed by the walk: the walk goes back to it (arrival order).
      if (i < this.cursor) this.cursor = i;
    } else if (this.later === undefined || when < this.later) this.later = when;
  }

  delete(id: string): void {
    const i = this.indexOf(...packId(id));
    if (i >= 0 && this.at[i] !== GONE) {
      this.at[i] = GONE;
      this.live--;
    }
  }

  /** Not known from a listing (the runner sets only what it listed): kept in order all the same. */
  private insert(h: number, l: number): number {
    let i = 0;
    while (i < this.n && compareIds(this.hi[i]!, this.lo[i]!, h, l) < 0) i++;
    if (this.n === this.hi.length) {
      const cap = Math.max(16, this.n * 2);
      for (const k of ["hi", "lo", "at"] as const) {
        const a = new Float64Array(cap);
        a.set(this[k].subarray(0, this.n));
        this[k] = a;
      }
    }
    for (const k of ["hi", "lo", "at"] as const) this[k].copyWithin(i + 1, i, this.n);
    this.hi[i] = h;
    this.lo[i] = l;
    this.at[i] = GONE;
    this.n++;
    if (i < this.cursor) this.cursor++;
    return i;
  }

  /**
   * What a listing of queue/ says is there now. A listed message already known keeps its time
   * (the runner's word is newer than its state file); a new one is due at `listedAt[j]` (its
   * state file's time, 0 when it has none). A known message no longer listed is forgotten (queue
   * rm), unless `keep` says otherwise (in flight). The walk starts again from the oldest.
   */
  replace(listing: PackedIds, listedAt: Float64Array, keep: (id: string) => boolean): void {
    const { hi, lo, at, n } = this;
    const walk = (emit: (h: number, l: number, a: number) => void) => {
      let i = 0;
      let j = 0;
      while (i < n || j < listing.n) {
        const c = i >= n ? 1 : j >= listing.n ? -1 : compareIds(hi[i]!, lo[i]!, listing.hi[j]!, listing.lo[j]!);
        if (c < 0) {
          if (at[i] !== GONE && keep(unpackId(hi[i]!, lo[i]!))) emit(hi[i]!, lo[i]!, at[i]!);
          i++;
        } else if (c > 0) {
          emit(listing.hi[j]!, listing.lo[j]!, listedAt[j]!);
          j++;
        } else {
          emit(hi[i]!, lo[i]!, at[i] !== GONE ? at[i]! : listedAt[j]!);
          i++;
          j++;
        }
      }
    };
    let count = 0;
    walk(() => count++);
    const h2 = new Float64Array(count);
    const l2 = new Float64Array(count);
    const a2 = new Float64Array(count);
    let k = 0;
    walk((h, l, a) => {
      h2[k] = h;
      l2[k] = l;
      a2[k] = a;
      k++;
    });
    this.hi = h2;
    this.lo = l2;
    this.at = a2;
    this.n = count;
    this.live = count;
    this.cursor = 0;
    this.later = undefined;
  }

  /**
   * Moves the walk to the next message due at `now` that is not busy and returns its index, or
   * -1. Passes what is not due (noting when it will be) and what is in flight.
   */
  private seek(now: number, busy: (id: string) => boolean): number {
    for (let pass = 0; pass < 2; pass++) {
      while (this.cursor < this.n) {
        const a = this.at[this.cursor]!;
        if (a !== GONE) {
          if (a <= now) {
            if (!busy(this.idAt(this.cursor))) return this.cursor;
          } else if (this.later === undefined || a < this.later) this.later = a;
        }
        this.cursor++;
      }
      if (pass > 0 || this.later === undefined || this.later > now) break;
      // Something passed earlier is due by now: walk again from the oldest.
      this.cursor = 0;
      this.later = undefined;
    }
    return -1;
  }

  /** The oldest message due now that is not in flight; taken (the walk moves past it). */
  next(now: number, busy: Set<string>): string | undefined {
    const i = this.seek(now, (id) => busy.has(id));
    if (i < 0) return undefined;
    this.cursor = i + 1;
    return this.idAt(i);
  }

  /**
   * When something not in flight is next due: a time <= now when something is due now,
   * undefined when nothing is known but what is in flight.
   */
  earliest(busy: Set<string>, now = Date.now()): number | undefined {
    const i = this.seek(now, (id) => busy.has(id));
    return i >= 0 ? this.at[i] : this.later;
  }
}
