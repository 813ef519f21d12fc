import type { Limits } from "./sliding-log.js";

export type TakeOutcome = { ok: true } | { ok: false; waitMs: number };

/**
 * Where the sliding log of one key lives: a file shared by the processes of
 * one machine, or Redis shared by many machines. Each operation is atomic.
 */
export interface SlotStore {
  tryTake(id: string, limits: Limits): Promise<TakeOutcome>;
  /** The send finished: its slot counts from now. */
  complete(id: string, limits: Limits): Promise<void>;
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
