/**
 * --results: one JSON line per item, as the run reports it. The items are sent (or not)
 * whatever this file says: a write that fails is said once and the batch goes on, the
 * journal still knowing each item's state.
 */
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { localFileError } from "../core/errors.js";

export class ResultsFile {
  private failed = false;

  private constructor(
    private readonly path: string,
    private readonly fd: number,
    private readonly journalPath: string | undefined,
    private readonly say: (text: string) => void,
  ) {}

  static open(path: string, journalPath: string | undefined, say: (text: string) => void): ResultsFile {
    let fd: number;
    try {
      // Each run reports every item (what an earlier run sent, as skipped), so the
      // file is rewritten: appending would give an item one line per run.
      // 0600 like the journal: it holds addresses and subjects.
      fd = openSync(path, "w", 0o600);
    } catch (e) {
      throw localFileError(e, path, "write", "results file");
    }
    return new ResultsFile(path, fd, journalPath, say);
  }

  /** The line of the item at `index` (from 0). */
  write(line: string, index: number): void {
    if (this.failed) return;
    try {
      const buf = Buffer.from(line);
      // A full disk may take part of a write before refusing the rest: the rest is tried, so the refusal is seen.
      for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off);
    } catch (e) {
      this.failed = true;
      this.say(
        `${localFileError(e, this.path, "write", "results file").message}; the batch goes on (the journal ${this.journalPath ?? ""} still records every item), but this file is incomplete from item ${index + 1} on`,
      );
    }
  }

  close(): void {
    try {
      fsyncSync(this.fd);
    } catch (e) {
      if (!this.failed)
        this.say(
          `${localFileError(e, this.path, "sync", "results file").message}; it may be incomplete (the journal still records every item)`,
        );
    }
    closeSync(this.fd);
  }
}
