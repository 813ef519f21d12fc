/**
 * Where a batch's journal is: named after its input in the state dir, or where --journal says, or
 * (for a run an earlier version started) next to its results file. A journal that would resend
 * what another journal of the same input records as sent is refused.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "../core/atomic.js";
import { dirname, join, resolve } from "node:path";
import type { Env } from "../core/env.js";
import { MailsendError } from "../core/errors.js";
import { ensurePrivateDir } from "../limits/private-dir.js";
import { stateDir } from "../settings/state-dir.js";
import { Journal, type OpenOptions, type Replaced } from "./journal.js";

/** Who a journal belongs to: the input's identity, and the one earlier versions gave it. */
export type InputIds = Pick<OpenOptions, "input" | "legacyInput">;

export interface JournalPlace {
  /** The input's identity (its path, or a hash of what stdin held): names the default journal. */
  identity: string;
  fp: InputIds;
  /** --journal. */
  journal?: string;
  /** --results: a run of an earlier version kept its journal at <results>.journal. */
  results?: string;
  /** --check: nothing is opened, what a run would do is said. */
  check: boolean;
  fresh: boolean;
  resume: boolean;
  env: Env;
  say: (text: string) => void;
}

/** The batch's journal, opened (undefined under --check), with what it replaced said. */
export async function openBatchJournal(o: JournalPlace): Promise<Journal | undefined> {
  // The journal is named after the input, in the state dir, whatever else the command says: a
  // rerun that only adds or changes --results must find what the first run sent. A journal at
  // R.journal beside --results R (where earlier versions kept it) is continued there.
  const batchesDir = join(stateDir(o.env), "batches");
  const inputHash = createHash("sha256").update(o.identity).digest("hex").slice(0, 24);
  const defaultJournal = join(batchesDir, `${inputHash}.journal`);
  const legacyJournal = o.results ? `${o.results}.journal` : undefined;
  // Only a journal of this input (one a run would continue): another input's is not this batch's.
  const journalPath =
    o.journal ?? (legacyJournal && journalAction(legacyJournal, o.fp) === "resume" ? legacyJournal : defaultJournal);
  if (journalPath === defaultJournal && !o.check) {
    // Journals hold addresses and subjects: the state dir is private (made 0700; a looser one is said).
    const loose = [ensurePrivateDir(stateDir(o.env)), ensurePrivateDir(batchesDir, "batch journal directory")];
    for (const text of loose) if (text) o.say(text);
  }
  const lastPointer = join(batchesDir, `${inputHash}.last`);
  if (!o.fresh) guardNewJournal(journalPath, [readPointer(lastPointer), defaultJournal, legacyJournal], o.fp);
  const journalOptions = { path: journalPath, ...o.fp, fresh: o.fresh, resume: o.resume };
  const journal = o.check ? undefined : await Journal.open(journalOptions);
  if (journal) writePointer(lastPointer, journal.path);
  if (journal?.replaced?.reason === "input_changed" && journal.replaced.sent > 0)
    o.say(newBatchNotice(journal.replaced, journal.replaced.path, false));
  if (journal?.replaced?.reason === "damaged") {
    const r = journal.replaced;
    o.say(
      `the journal ${journalPath} was damaged (line ${r.damagedLine ?? "?"}); it is kept as ${r.path}, and this is a new batch: every item is sent again, also those the earlier run sent (${r.sent} recorded as sent before the damage)`,
    );
  }
  if (o.check) {
    // What the run would do with the journal, so that --check does not say "all fine" before a resend.
    // A journal that is missing or unusable is the real run's error to report, not --check's.
    let plan;
    try {
      plan = Journal.plan({ ...journalOptions, resume: false });
    } catch {
      plan = undefined;
    }
    if (plan?.action === "replace" && plan.reason === "input_changed" && plan.sent > 0)
      o.say(newBatchNotice(plan, `${journalPath}.<time>.old`, true));
  }
  return journal;
}

/** The journal last used for an input (batches/<hash>.last holds its path); undefined when none was recorded. */
function readPointer(pointer: string): string | undefined {
  try {
    const path = readFileSync(pointer, "utf8").split("\n")[0];
    return path ? path : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records which journal this input's run used, so that a later run given another (new) journal is
 * told of it. Book-keeping: a state dir that cannot take it does not stop the batch.
 */
function writePointer(pointer: string, journal: string): void {
  const path = resolve(journal);
  if (readPointer(pointer) === path) return;
  try {
    mkdirSync(dirname(pointer), { recursive: true, mode: 0o700 });
    writeFileAtomic(pointer, `${path}\n`, { mode: 0o600, durable: false });
  } catch {}
}

/** What Journal.open would do with the journal at `path` for this input: undefined when it cannot tell (damaged: open says so). */
function journalAction(path: string, fp: InputIds): string | undefined {
  try {
    return Journal.plan({ path, ...fp, fresh: false, resume: false }).action;
  } catch {
    return undefined;
  }
}

/**
 * A journal that starts a new batch here (none at `journalPath`, or one of another input or a
 * finished run that would be replaced) sends every row. When another journal of the same input
 * (same file, same content) records sends that a run would resume, that is a resend by mistake
 * (the journal moved: --journal given or changed), so it is refused; --fresh asks for it. A journal
 * this run continues (or refuses) needs no guard.
 */
function guardNewJournal(journalPath: string, earlier: ReadonlyArray<string | undefined>, fp: InputIds): void {
  const own = journalAction(journalPath, fp);
  if (own !== "create" && own !== "replace") return;
  const seen = new Set([resolve(journalPath)]);
  for (const path of earlier) {
    if (path === undefined || seen.has(resolve(path))) continue;
    seen.add(resolve(path));
    let plan;
    try {
      plan = existsSync(path) ? Journal.plan({ path, ...fp, fresh: false, resume: false }) : undefined;
    } catch {
      continue; // damaged or not a journal: nothing it can say about what was sent
    }
    if (plan?.action !== "resume") continue;
    const sent = [...plan.states.values()].filter((st) => st.s === "done").length;
    if (sent === 0) continue;
    throw new MailsendError(
      "usage",
      `the journal ${journalPath} is new, but the journal ${path} records ${sent} item${sent === 1 ? "" : "s"} of this input as sent: a new journal would send every row again`,
      {
        hint: (s) =>
          `Give ${s.flag("journal")} ${path} to continue it (it skips what was sent), or ${s.flag("fresh")} to send everything again.`,
      },
    );
  }
}

const when = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * A finished run's journal of another input is replaced (kept as *.old) and
 * the batch starts over: every row goes out, also those that run sent. Right,
 * when the input is a new one; a surprise when it is the old one edited, so
 * it is said out loud. (--fresh asks for it; a run older than 24 h is
 * documented as history.)
 */
function newBatchNotice(r: Pick<Replaced, "finishedAt" | "sent">, keptAt: string, checking: boolean): string {
  const last = `the input differs from the last run's (finished at ${when(r.finishedAt)}, ${r.sent} sent)`;
  return checking
    ? `${last}, so sending it would start a new batch: every row of it would be sent, also any the last run sent; the old journal would be kept as ${keptAt}`
    : `${last}, so this is a new batch: every row of it is sent, also any the last run sent; the old journal is kept at ${keptAt}`;
}
