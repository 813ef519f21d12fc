/**
 * What a job printed, kept for its mail in bounded memory: the last `maxBytes` of stdout and
 * stderr as they came (interleaved), with counts of everything. A job that prints gigabytes
 * costs no more memory than one that prints `maxBytes`.
 */

/** The output as the mail shows it. */
export interface KeptOutput {
  /** The last lines, for the body (decoded as UTF-8). */
  tail: string;
  tailLines: number;
  /** The output from where it was cut (at a line's start) to its end, for the attachment. */
  kept: Buffer;
  /** Bytes cut from the beginning of `kept` (0: it is the whole output). */
  cutBytes: number;
  totalBytes: number;
  totalLines: number;
}

export class OutputKeeper {
  #chunks: Buffer[] = [];
  #size = 0;
  #total = 0;
  #lines = 0;
  #endsInNewline = true;

  constructor(private readonly maxBytes: number) {}

  add(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#total += chunk.length;
    for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) this.#lines++;
    this.#endsInNewline = chunk[chunk.length - 1] === 0x0a;
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    // Whole chunks go once the rest still holds maxBytes: the bound is maxBytes and one chunk.
    while (this.#chunks.length > 1 && this.#size - this.#chunks[0]!.length >= this.maxBytes)
      this.#size -= this.#chunks.shift()!.length;
  }

  /** The last `lines` lines (at most `bytes` of them), and the last `keepBytes` of the output, cut at a line's start. */
  result(lines: number, bytes: number, keepBytes = this.maxBytes): KeptOutput {
    const all = Buffer.concat(this.#chunks, this.#size);
    const tail = lastLines(
      all.length > this.maxBytes ? fromLineStart(all.subarray(all.length - this.maxBytes)) : all,
      lines,
      bytes,
    );
    const limit = Math.min(keepBytes, this.maxBytes);
    let kept: Buffer = all.length > limit ? all.subarray(all.length - limit) : all;
    if (kept.length < this.#total) kept = limit === 0 ? kept : fromLineStart(kept);
    const totalLines = this.#lines + (this.#endsInNewline || this.#total === 0 ? 0 : 1);
    return {
      tail: tail.text,
      tailLines: tail.lines,
      kept,
      cutBytes: this.#total - kept.length,
      totalBytes: this.#total,
      totalLines,
    };
  }
}

/** From the first line start of a cut buffer on (unless the line is longer than a few KiB). */
function fromLineStart(b: Buffer): Buffer {
  const nl = b.indexOf(0x0a);
  return nl >= 0 && nl < 4096 ? b.subarray(nl + 1) : b;
}

/** The last `n` lines of `b`, at most `max` bytes of them (the first of them then cut at a line's start). */
function lastLines(b: Buffer, n: number, max: number): { text: string; lines: number } {
  if (n <= 0 || b.length === 0) return { text: "", lines: 0 };
  let end = b.length;
  if (b[end - 1] === 0x0a) end--;
  let start = end;
  let lines = 0;
  while (lines < n && start > 0) {
    const nl = b.lastIndexOf(0x0a, start - 1);
    start = nl + 1;
    lines++;
    if (nl < 0) break;
    // Not done: the next line up ends at this newline.
    if (lines < n) start = nl;
  }
  let slice = b.subarray(start, end);
  if (slice.length > max) slice = fromLineStart(slice.subarray(slice.length - max));
  return { text: slice.toString("utf8"), lines: Math.min(lines, countLines(slice)) };
}

function countLines(b: Buffer): number {
  if (b.length === 0) return 0;
  let n = 1;
  for (let i = b.indexOf(0x0a); i >= 0; i = b.indexOf(0x0a, i + 1)) n++;
  return n;
}
