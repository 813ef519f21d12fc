/**
 * The outbox's health as a monitor judges it (`mailsend queue check`, after Nagios' plugin
 * rules): OK, WARNING or CRITICAL against thresholds on the oldest message's age and the number
 * queued; failed messages (and damaged files) are at least a WARNING, since nobody else will say
 * that mail was given up.
 */

export type CheckStatus = "OK" | "WARNING" | "CRITICAL" | "UNKNOWN";

/** Nagios's exit codes. */
export const CHECK_EXIT: Record<CheckStatus, number> = { OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3 };

export interface QueueCounts {
  queued: number;
  failed: number;
  /** Files in the outbox that cannot be read as messages. */
  damaged: number;
  /** The oldest queued message's age (ms); undefined when none is queued. */
  oldestMs?: number;
}

export interface CheckThresholds {
  warningAgeMs?: number;
  criticalAgeMs?: number;
  warningCount?: number;
  criticalCount?: number;
}

export interface CheckResult {
  status: CheckStatus;
  /** What made it WARNING or CRITICAL, in a few words each. */
  reasons: string[];
}

export function judgeQueue(c: QueueCounts, t: CheckThresholds, age: (ms: number) => string): CheckResult {
  const critical: string[] = [];
  const warning: string[] = [];
  const oldest = c.oldestMs;
  if (oldest !== undefined && t.criticalAgeMs !== undefined && oldest >= t.criticalAgeMs)
    critical.push(`oldest ${age(oldest)} >= ${age(t.criticalAgeMs)}`);
  else if (oldest !== undefined && t.warningAgeMs !== undefined && oldest >= t.warningAgeMs)
    warning.push(`oldest ${age(oldest)} >= ${age(t.warningAgeMs)}`);
  if (t.criticalCount !== undefined && c.queued >= t.criticalCount)
    critical.push(`${c.queued} queued >= ${t.criticalCount}`);
  else if (t.warningCount !== undefined && c.queued >= t.warningCount)
    warning.push(`${c.queued} queued >= ${t.warningCount}`);
  if (c.failed > 0) warning.push(`${c.failed} failed (mailsend queue --failed)`);
  if (c.damaged > 0) warning.push(`${c.damaged} damaged file${c.damaged === 1 ? "" : "s"}`);
  if (critical.length > 0) return { status: "CRITICAL", reasons: [...critical, ...warning] };
  if (warning.length > 0) return { status: "WARNING", reasons: warning };
  return { status: "OK", reasons: [] };
}
