/** Waiting in a test for something another process or server does, bounded. */

export interface UntilOptions {
  /** What is waited for, for the failure message; the check's own source when not given. */
  what?: string;
  timeoutMs?: number;
  /** Time between checks. */
  everyMs?: number;
}

/**
 * Polls `check` until it is true; past the timeout, fails saying what it waited for (so a test that
 * times out here names its condition, not only the line). A number is the timeout alone.
 */
export async function until(check: () => boolean | Promise<boolean>, opts: number | UntilOptions = {}): Promise<void> {
  const { what, timeoutMs = 5000, everyMs = 25 } = typeof opts === "number" ? { timeoutMs: opts } : opts;
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what ?? described(check)}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function described(check: () => unknown): string {
  const src = check
    .toString()
    .replace(/\s+/g, " ")
    .replace(/^(async )?\(\) => /, "");
  return src.length > 200 ? `${src.slice(0, 197)}...` : src;
}
