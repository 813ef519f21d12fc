import type { StoreSettings } from "../limits/budget.js";
import { DEFAULT_DEADLINE_MS, type DeliverOptions } from "../limits/deliver.js";
import { MailsendError } from "../core/errors.js";

export interface BudgetCliFlags {
  rateLimit?: number;
  maxWait?: number;
  /** commander's name for --no-wait (false when given). */
  wait?: boolean;
  retries?: number;
  deadline?: number;
}

const DEFAULT_MAX_WAIT_S = 300;
const DEFAULT_RETRIES = 3;


function whole(v: string | number | undefined, what: string): number | undefined {
  if (v === undefined || v === "") return undefined;
  const n = typeof v === "number" ? v : /^\d+$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isInteger(n) || n < 0) throw new MailsendError("config_invalid", `${what} must be a whole number, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * The shared budget and retry settings of one CLI run. The budget's code (its store, lock and
 * digest) loads here, when a message is about to go: a dry run or a refused input never needs it.
 */
export async function openBudget(flags: BudgetCliFlags, apiKey: string, env: Record<string, string | undefined>, settings: StoreSettings = {}) {
  const { resolveLimits, openSlotStore } = await import("../limits/budget.js");
  const limits = resolveLimits(flags, env);
  const store = openSlotStore(apiKey, limits, env, settings);
  const options: Omit<DeliverOptions, "onWait" | "sleep"> = {
    ...(store ? { store } : {}),
    limits,
    retries: whole(flags.retries ?? env.MAILSEND_RETRIES, "--retries") ?? DEFAULT_RETRIES,
    maxWaitMs: (whole(flags.maxWait ?? env.MAILSEND_MAX_WAIT, "--max-wait") ?? DEFAULT_MAX_WAIT_S) * 1000,
    noWait: flags.wait === false,
    deadlineMs: (whole(flags.deadline ?? env.MAILSEND_DEADLINE, "--deadline") ?? DEFAULT_DEADLINE_MS / 1000) * 1000,
  };
  return { options, close: async () => store?.close() };
}
