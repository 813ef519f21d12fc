/**
 * Outbox ids as numbers, so that a big outbox is known to the runner as a few
 * typed arrays rather than one string (and one map entry) per message.
 *
 * An id is 9 base-36 digits of ms, 2 base-36 digits of sequence, 8 hex digits
 * of randomness (store.ts, newOutboxId). It packs exactly into two doubles:
 * hi = the time digits (< 36^9, about 2^46.5), lo = sequence * 2^32 +
 * randomness (< 2^43). Both fit a double's 53 bits, and the order of
 * (hi, lo) is the order of the strings (fixed width, digits in ASCII order),
 * which is the order of arrival.
 */

const TWO32 = 4294967296;

/** The two numbers of a valid id (isOutboxId); anything else is not an id. */
export function packId(id: string): [hi: number, lo: number] {
  return [parseInt(id.slice(0, 9), 36), parseInt(id.slice(9, 11), 36) * TWO32 + parseInt(id.slice(11, 19), 16)];
}

export function unpackId(hi: number, lo: number): string {
  const seq = Math.floor(lo / TWO32);
  return `${hi.toString(36).padStart(9, "0")}${seq.toString(36).padStart(2, "0")}${(lo - seq * TWO32).toString(16).padStart(8, "0")}`;
}

export function compareIds(aHi: number, aLo: number, bHi: number, bLo: number): number {
  return aHi - bHi || aLo - bLo;
}

/** A growable list of packed ids; sort() puts it in arrival order. 16 bytes an id. */
export class PackedIds {
  hi: Float64Array;
  lo: Float64Array;
  n = 0;

  constructor(capacity = 1024) {
    this.hi = new Float64Array(capacity);
    this.lo = new Float64Array(capacity);
  }

  push(id: string): void {
    if (this.n === this.hi.length) {
      const hi = new Float64Array(this.hi.length * 2);
      const lo = new Float64Array(this.hi.length * 2);
      hi.set(this.hi);
      lo.set(this.lo);
      this.hi = hi;
      this.lo = lo;
    }
    const [h, l] = packId(id);
    this.hi[this.n] = h;
    this.lo[this.n] = l;
    this.n++;
  }

  idAt(i: number): string {
    return unpackId(this.hi[i]!, this.lo[i]!);
  }

  sort(): void {
    const { hi, lo, n } = this;
    let sorted = true;
    for (let i = 1; i < n && sorted; i++) if (compareIds(hi[i - 1]!, lo[i - 1]!, hi[i]!, lo[i]!) > 0) sorted = false;
    if (sorted) return;
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => compareIds(hi[a]!, lo[a]!, hi[b]!, lo[b]!));
    const h2 = new Float64Array(n);
    const l2 = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      h2[i] = hi[order[i]!]!;
      l2[i] = lo[order[i]!]!;
    }
    this.hi = h2;
    this.lo = l2;
  }

  /** The index of an id in a sorted list, or -1. */
  indexOf(hi: number, lo: number): number {
    return findId(this.hi, this.lo, this.n, hi, lo);
  }
}

/** Binary search for an id among the first `n` of sorted packed ids: its index, or -1. */
export function findId(his: Float64Array, los: Float64Array, n: number, hi: number, lo: number): number {
  let a = 0;
  let b = n - 1;
  while (a <= b) {
    const m = (a + b) >>> 1;
    const c = compareIds(his[m]!, los[m]!, hi, lo);
    if (c === 0) return m;
    if (c < 0) a = m + 1;
    else b = m - 1;
  }
  return -1;
}
