/**
 * The budget and retry settings of a run: the rate limit and its window, retries, the longest
 * wait, the deadline of the attempts. Read like the connection settings (resolve.ts): what the
 * front end was given > environment (with the profile under it) > defaults; a bad value is
 * named as the front end that was given it says it.
 */
import { DEFAULTS } from "../core/config.js";
import type { Env } from "../core/env.js";
import { MailsendError } from "../core/errors.js";
import { settingName, SETTINGS, type Front, type Setting } from "../core/setting-names.js";

/** What a front end was given: the CLI's flags in seconds, the library's options in milliseconds. */
export interface BudgetGiven {
  rateLimit?: number | undefined;
  /** The library's window, in ms (the CLI has no flag for it). */
  rateWindowMs?: number | undefined;
  retries?: number | undefined;
  /** The CLI's --max-wait and --deadline, in seconds. */
  maxWait?: number | undefined;
  deadline?: number | undefined;
  /** The library's, in ms. */
  maxWaitMs?: number | undefined;
  deadlineMs?: number | undefined;
  /** false: --no-wait, or the library's wait: false. */
  wait?: boolean | undefined;
}

export interface Budget {
  limits: { limit: number; windowMs: number; reserve?: number };
  retries: number;
  maxWaitMs: number;
  deadlineMs: number;
  noWait: boolean;
}

/** The default delivery deadline (CLI --deadline, API deadlineMs): a CI step does not hang on a stuck endpoint. */
const DEFAULT_DEADLINE_MS = 60_000;

export const BUDGET_DEFAULTS = {
  retries: 3,
  maxWaitSeconds: 300,
  deadlineSeconds: DEFAULT_DEADLINE_MS / 1000,
  windowSeconds: 60,
};

const UP = Number.MAX_SAFE_INTEGER;

/**
 * A whole number of `setting`, given or from the environment, in the unit the source uses:
 * `scale` turns a variable's (seconds) into the given value's unit (the library's milliseconds).
 */
function whole(
  front: Front,
  env: Env,
  setting: Setting,
  given: number | undefined,
  min: number,
  max = UP,
): { n: number; source: "given" | "env" } | undefined {
  const variable: string | undefined = (SETTINGS[setting] as { env?: string }).env;
  const raw = given ?? (variable !== undefined && env[variable] !== "" ? env[variable] : undefined);
  if (raw === undefined) return undefined;
  const source = given !== undefined ? "given" : "env";
  const n = typeof raw === "number" ? raw : /^\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    const range = max === UP ? `from ${min} up` : `from ${min} to ${max}`;
    throw new MailsendError(
      "config_invalid",
      `${settingName(setting, front, source)} must be a whole number ${range}, got ${JSON.stringify(raw)}`,
      { setting },
    );
  }
  return { n, source };
}

/** A duration: the library's option in ms, else the CLI's flag or a variable in seconds. */
function duration(
  front: Front,
  env: Env,
  setting: Setting,
  ms: number | undefined,
  seconds: number | undefined,
  minSeconds: number,
  fallbackSeconds: number,
): number {
  if (front === "api" && ms !== undefined) return whole(front, env, setting, ms, minSeconds * 1000)!.n;
  return (whole(front, env, setting, front === "cli" ? seconds : undefined, minSeconds)?.n ?? fallbackSeconds) * 1000;
}

/**
 * MAILSEND_RATE_RESERVE: the slots of each window kept for urgent mail, a number of slots ("5")
 * or a share of the limit ("10%"); unset, sliding-log.ts's default (10%, at least one slot).
 */
function reserveOf(front: Front, env: Env, limit: number): number | undefined {
  const variable = SETTINGS.rateReserve.env!;
  const raw = env[variable]?.trim();
  if (raw === undefined || raw === "") return undefined;
  const m = /^(\d+)(%?)$/.exec(raw);
  const n = m ? Number(m[1]) : Number.NaN;
  if (!m || (m[2] && n > 100)) {
    throw new MailsendError(
      "config_invalid",
      `${settingName("rateReserve", front, "env")} must be a whole number of slots or a percentage of the rate limit (like 5 or 10%), got ${JSON.stringify(raw)}`,
      {
        setting: "rateReserve",
      },
    );
  }
  return m[2] ? Math.floor((limit * n) / 100) : n;
}

/** The rate limit, its window and its reserve alone (doctor, the outbox's sender). */
export function limitsOf(front: Front, given: BudgetGiven, env: Env): Budget["limits"] {
  const limit = whole(front, env, "rateLimit", given.rateLimit, 0)?.n ?? DEFAULTS.rateLimit;
  const reserve = reserveOf(front, env, limit);
  return {
    limit,
    windowMs: duration(front, env, "rateWindow", given.rateWindowMs, undefined, 1, BUDGET_DEFAULTS.windowSeconds),
    ...(reserve !== undefined ? { reserve } : {}),
  };
}

export function budgetOf(front: Front, given: BudgetGiven, env: Env): Budget {
  return {
    limits: limitsOf(front, given, env),
    retries: whole(front, env, "retries", given.retries, 0, 100)?.n ?? BUDGET_DEFAULTS.retries,
    maxWaitMs: duration(front, env, "maxWait", given.maxWaitMs, given.maxWait, 0, BUDGET_DEFAULTS.maxWaitSeconds),
    deadlineMs: duration(front, env, "deadline", given.deadlineMs, given.deadline, 0, BUDGET_DEFAULTS.deadlineSeconds),
    noWait: given.wait === false,
  };
}

/** The CLI's rate limit and window: --rate-limit over the environment (with the profile under it). */
export function resolveLimits(flags: { rateLimit?: number | undefined }, env: Env): Budget["limits"] {
  return limitsOf("cli", flags, env);
}
