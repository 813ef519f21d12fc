/**
 * The per-key budget as a sliding log: the times of the sends in the last
 * window. A send may start only while fewer than `limit` entries are younger
 * than the window, so no window of that length ever holds more than `limit`
 * sends — unlike a token bucket, which can burst `limit` at the end of one
 * minute and `limit` more at the start of the next.
 *
 * Pure functions over plain data, so the file and Redis stores and the tests
 * share one definition.
 */

export interface LogEntry {
  /**
   * Wall-clock ms when the slot was taken, moved to when the service's answer
   * came: no earlier than the service saw the request, so a slot counted from
   * here frees no sooner than the service's own log lets the next one in.
   */
  t: number;
  id: string;
}

export interface LogState {
  entries: LogEntry[];
  /** The server asked everyone to wait until then (429 / SMTP 421). */
  blockedUntil: number;
}

export interface Limits {
  limit: number;
  windowMs: number;
  /** Slots of each window that only urgent sends may take (reserveOf says how many when unset). */
  reserve?: number;
}

/**
 * Who asks for a slot. Bulk (batch rows, queued mail tried again) takes one only while the
 * window has room beyond the reserve; urgent (a one-shot send, an alert, a notice, a message's
 * first attempt) may take any free slot, so it waits at most for one slot whatever bulk does.
 */
export type SlotClass = "urgent" | "bulk";

/** The default reserve: this share of the limit, at least one slot. */
export const DEFAULT_RESERVE_PERCENT = 10;

/**
 * The slots held back from bulk: as set, else 10% of the limit and at least one; never all of
 * them, so bulk always has a slot to wait for (a limit of 1 has no reserve).
 */
export function reserveOf({ limit, reserve }: Limits): number {
  const wanted = reserve ?? Math.max(1, Math.floor((limit * DEFAULT_RESERVE_PERCENT) / 100));
  return Math.max(0, Math.min(wanted, limit - 1));
}

/** How many slots of the window a send of this class may see taken and still take one. */
export function roomFor(limits: Limits, cls: SlotClass): number {
  return cls === "bulk" ? limits.limit - reserveOf(limits) : limits.limit;
}

export const EMPTY: LogState = { entries: [], blockedUntil: 0 };

/**
 * Drop what has left the window. Entries "from the future" mean the wall
 * clock went back: they are pulled to `now`, so they still count (and expire
 * a window from now) instead of blocking until the clock catches up.
 */
export function prune(state: LogState, now: number, { windowMs }: Limits): LogState {
  const entries = state.entries
    .map((e) => (e.t > now ? { ...e, t: now } : e))
    .filter((e) => e.t > now - windowMs)
    .sort((a, b) => a.t - b.t);
  // A block far beyond any real Retry-After is also a clock that went back.
  const until = state.blockedUntil > now + 3_600_000 ? now + windowMs : state.blockedUntil;
  return { entries, blockedUntil: state.blockedUntil > 0 && until > now ? until : 0 };
}

export type TakeResult = { ok: true; state: LogState } | { ok: false; waitMs: number; state: LogState };

export function tryTake(
  state: LogState,
  now: number,
  limits: Limits,
  id: string,
  cls: SlotClass = "urgent",
): TakeResult {
  const s = prune(state, now, limits);
  if (s.blockedUntil > 0) return { ok: false, waitMs: s.blockedUntil - now, state: s };
  const room = roomFor(limits, cls);
  if (s.entries.length < room) {
    return { ok: true, state: { ...s, entries: [...s.entries, { t: now, id }] } };
  }
  // A slot of this class frees when the entry that fills its room leaves the window: a bulk
  // waiter sleeps until there is room beyond the reserve, not until any slot frees.
  const freeing = s.entries[s.entries.length - room]!;
  return { ok: false, waitMs: Math.max(1, freeing.t + limits.windowMs - now + 1), state: s };
}

/**
 * The service answered at `at`: the entry now counts from there. The service
 * saw the request after it was written and before it answered, so the answer's
 * time is the earliest that is surely not before the service's own count
 * (the time of the write would be before it). Never moved earlier than taken.
 */
export function complete(state: LogState, at: number, id: string): LogState {
  return { ...state, entries: state.entries.map((e) => (e.id === id ? { ...e, t: Math.max(e.t, at) } : e)) };
}

/**
 * When the answer came, in the store's clock: `now` read after `elapsedMs`
 * (the time since the answer on a monotonic clock), rounded up, so it is
 * never before the answer, whose millisecond the service's clock already
 * had. Without `elapsedMs`: `now` (the book-keeping's own time, later still).
 */
export function answeredAt(now: () => number, elapsedMs?: () => number): number {
  if (!elapsedMs) return now();
  const ago = Math.max(0, elapsedMs());
  return Math.ceil(now() - ago);
}

/** The request surely never reached the service: give the slot back. */
export function release(state: LogState, id: string): LogState {
  return { ...state, entries: state.entries.filter((e) => e.id !== id) };
}

export function block(state: LogState, until: number): LogState {
  return { ...state, blockedUntil: Math.max(state.blockedUntil, until) };
}

/** Slots used in the window ending now (for `mailsend doctor`). */
export function used(state: LogState, now: number, limits: Limits): number {
  return prune(state, now, limits).entries.length;
}
