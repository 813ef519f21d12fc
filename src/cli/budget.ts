import { openSlotStore, type StoreSettings } from "../limits/budget.js";
import type { DeliverOptions } from "../limits/deliver.js";
import type { Env } from "../core/env.js";
import { budgetOf } from "../settings/budget.js";

export interface BudgetCliFlags {
  rateLimit?: number;
  maxWait?: number;
  /** commander's name for --no-wait (false when given). */
  wait?: boolean;
  retries?: number;
  deadline?: number;
}

/** The shared budget and retry settings of one CLI run. */
export async function openBudget(flags: BudgetCliFlags, apiKey: string, env: Env, settings: StoreSettings = {}) {
  const { limits, retries, maxWaitMs, noWait, deadlineMs } = budgetOf("cli", flags, env);
  const store = openSlotStore(apiKey, limits, env, settings);
  const options: Omit<DeliverOptions, "onWait" | "sleep"> = {
    ...(store ? { store } : {}),
    limits,
    retries,
    maxWaitMs,
    noWait,
    deadlineMs,
  };
  return { options, close: async () => store?.close() };
}
