/** How many items of a batch ended each way: the CLI's progress and summary, and the library's BatchSummary. */
export interface Counts {
  total: number;
  sent: number;
  failed: number;
  invalid: number;
  skipped: number;
  unknown: number;
  /** Of those sent, the messages some recipients of which the server refused (status "partial"). */
  partial: number;
}
