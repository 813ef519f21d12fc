import type { Limits, SlotClass } from "./sliding-log.js";

/** Milliseconds on a monotonic clock (not the global `performance`, which loads perf_hooks in every send). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export type TakeOutcome = { ok: true } | { ok: false; waitMs: number };

/**
 * Where the sliding log of one key lives: a file shared by the processes of
 * one machine, or Redis shared by many machines. Each operation is atomic.
 */
export interface SlotStore {
  /** A slot for a send of class `cls` (sliding-log.ts's SlotClass; urgent when not said). */
  tryTake(id: string, limits: Limits, cls?: SlotClass): Promise<TakeOutcome>;
  /**
   * The service answered: the slot counts from that moment. `elapsedMs`, when
   * given, says how long ago the answer came (a monotonic clock, read by the
   * store just before its own clock, so lock waits and round trips to Redis
   * are not added to the slot's time); without it, from the store's now.
   */
  complete(id: string, limits: Limits, elapsedMs?: () => number): Promise<void>;
  /** The request never reached the service: free the slot. */
  release(id: string, limits: Limits): Promise<void>;
  /** The server refused for rate: nobody sends for waitMs. */
  block(waitMs: number, limits: Limits): Promise<void>;
  /** Slots used in the current window. */
  used(limits: Limits): Promise<number>;
  close(): Promise<void>;
  /** Things the store found that the user should hear (a damaged state file), each once. */
  takeWarnings?(): string[];
}
