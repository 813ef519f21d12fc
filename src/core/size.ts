/**
 * A byte count as people read it, in one unit system wherever mailsend shows
 * one (the CLI's inbox, the web inbox's pages and its script): powers of
 * 1024, named B, KiB and MiB.
 */
export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A duration as people read it, rounded to one unit: 45s, 12m, 3h, 2d (`mailsend queue`, doctor). */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}
