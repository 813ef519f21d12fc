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
