/**
 * When a job's run is mailed: one failure, one mail. A job that keeps failing is mailed once per
 * quiet window, and the mail after a quiet spell says how many failures it stands for. Pure: the
 * caller reads and writes the state under the job's lock.
 */

export type OnWhat = "failure" | "change" | "always";

/** What is remembered of one job between its runs. */
export interface JobState {
  v: 1;
  /** The last run's outcome ("unknown": never run, or the state was lost). */
  status: "ok" | "failed";
  /** When the current streak of ok or failed runs began (ms). */
  since: number;
  /** Failed runs in the current streak. */
  streak: number;
  /** A failure mail went out during the current failed streak (so its end is news). */
  streakMailed: boolean;
  /** The last failure mail (ms); undefined: none yet. */
  lastFailureMail?: number;
  /** Failures not mailed since the last failure mail, and when the first of them was. */
  unmailed: number;
  unmailedSince?: number;
  lastRun: number;
}

export interface AlertMail {
  kind: "failed" | "recovered" | "ok";
  /** Failures this mail stands for that were not mailed (the quiet window), and since when. */
  unmailed: number;
  unmailedSince?: number;
  /** The failed streak: since when, how many runs (this one included for "failed"). */
  streakSince?: number;
  streak: number;
  previous: JobState["status"] | "unknown";
}

export interface Decision {
  mail?: AlertMail;
  next: JobState;
}

/** What this run's outcome mails (if anything), and the state after it. */
export function decide(
  prev: JobState | undefined,
  failed: boolean,
  on: OnWhat,
  quietForMs: number,
  now: number,
): Decision {
  return failed ? onFailure(prev, quietForMs, now) : onSuccess(prev, on, now);
}

function onFailure(prev: JobState | undefined, quietForMs: number, now: number): Decision {
  const continuing = prev?.status === "failed";
  const since = continuing ? prev.since : now;
  const streak = (continuing ? prev.streak : 0) + 1;
  // Whatever happened in between (a flapping job recovers and fails again), not more than one failure
  // mail per window. In either direction: runs on machines whose clocks differ a little share the state.
  const quiet = prev?.lastFailureMail !== undefined && Math.abs(now - prev.lastFailureMail) < quietForMs;
  const unmailed = prev?.unmailed ?? 0;
  if (quiet) {
    const next: JobState = {
      ...prev,
      v: 1,
      status: "failed",
      since,
      streak,
      streakMailed: continuing && prev.streakMailed,
      unmailed: unmailed + 1,
      unmailedSince: prev.unmailedSince ?? now,
      lastRun: now,
    };
    return { next };
  }
  const mail: AlertMail = {
    kind: "failed",
    unmailed,
    ...(prev?.unmailedSince !== undefined && unmailed > 0 ? { unmailedSince: prev.unmailedSince } : {}),
    streakSince: since,
    streak,
    previous: prev?.status ?? "unknown",
  };
  return {
    mail,
    next: {
      v: 1,
      status: "failed",
      since,
      streak,
      streakMailed: true,
      lastFailureMail: now,
      unmailed: 0,
      lastRun: now,
    },
  };
}

function onSuccess(prev: JobState | undefined, on: OnWhat, now: number): Decision {
  const wasFailing = prev?.status === "failed";
  const next: JobState = {
    v: 1,
    status: "ok",
    since: prev?.status === "ok" ? prev.since : now,
    streak: 0,
    streakMailed: false,
    ...(prev?.lastFailureMail !== undefined ? { lastFailureMail: prev.lastFailureMail } : {}),
    // Failures kept quiet stay counted for the next failure mail.
    unmailed: prev?.unmailed ?? 0,
    ...(prev?.unmailedSince !== undefined ? { unmailedSince: prev.unmailedSince } : {}),
    lastRun: now,
  };
  const previous = prev?.status ?? ("unknown" as const);
  // "Recovered" is news only to whoever was told of the failure; it stands for the whole streak.
  if (wasFailing && prev.streakMailed && on !== "failure") {
    const { unmailedSince: _, ...rest } = next;
    return {
      mail: { kind: "recovered", unmailed: 0, streakSince: prev.since, streak: prev.streak, previous },
      next: { ...rest, unmailed: 0 },
    };
  }
  if (on === "always") return { mail: { kind: "ok", unmailed: 0, streak: 0, previous }, next };
  return { next };
}
