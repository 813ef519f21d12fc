/**
 * A duration as people write one on a command line or in a query: 500ms, 90s, 15m, 12h, 30d, 2w,
 * or a bare number of seconds.
 */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 7 * 86400e3 };

/** Milliseconds, or undefined when `text` is not a duration. `unit: "required"` refuses a bare number. */
export function durationMs(text: string, opts: { unit?: "required" | "optional" } = {}): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?$/.exec(text.trim());
  if (!m || (m[2] === undefined && opts.unit === "required")) return undefined;
  const ms = Number(m[1]) * UNIT_MS[m[2] ?? "s"]!;
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}
