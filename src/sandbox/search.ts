/**
 * Search and wait over the sandbox's store, for the CLI, the HTTP API and the library alike. A
 * wait reacts to the store's own signal that a message was written (subscribe), so it uses no
 * timer but its deadline and no CPU while nothing arrives.
 */
import { MailsendError } from "../core/errors.js";
import { formatAge } from "../core/size.js";
import { createPartsReader, searchableContent, type MessageParts } from "./content.js";
import { isClose, matches, type Query } from "./query.js";
import type { MessageStore, StoredMessage } from "./types.js";

/** A store and a reader of its messages' parts (cached), shared by a sandbox's searches. */
export interface Searcher {
  store: MessageStore;
  parts: (id: string) => Promise<MessageParts | undefined>;
}

export function createSearcher(store: MessageStore): Searcher {
  return { store, parts: createPartsReader(store) };
}

/** A message as the JSON answers show it: the index record, its Cc, its parts decoded and its links. */
export type MessageView = StoredMessage & { cc: string[]; text: string | null; html: string | null; links: string[] };

export async function viewOf(s: Searcher, m: StoredMessage): Promise<MessageView> {
  const p = await s.parts(m.id);
  return { ...m, cc: p?.cc ?? [], text: p?.text ?? null, html: p?.html ?? null, links: p?.links ?? [] };
}

async function test(s: Searcher, q: Query, m: StoredMessage): Promise<boolean> {
  if (!matches(q, m)) return false;
  if (!q.needsContent) return true;
  const p = await s.parts(m.id);
  return matches(q, m, p ? searchableContent(p) : { cc: [], body: "" });
}

/** The messages matching `q`, newest first (at most `limit`). */
export async function search(s: Searcher, q: Query, opts: { limit?: number } = {}): Promise<StoredMessage[]> {
  const out: StoredMessage[] = [];
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  for (const m of await s.store.list()) {
    if (out.length >= limit) break;
    if (await test(s, q, m)) out.push(m);
  }
  return out;
}

/** The newest message: what `latest` names wherever an id goes. */
export async function latest(store: MessageStore): Promise<StoredMessage | undefined> {
  return (await store.list({ limit: 1 }))[0];
}

export const LATEST = "latest";

const CLOSEST_MAX = 5;

/** A wait that ran out: what it waited for, what matched, and the messages that came closest. */
export class WaitTimeoutError extends MailsendError {
  readonly query: string;
  readonly count: number;
  readonly matched: StoredMessage[];
  readonly closest: StoredMessage[];
  constructor(o: WaitOutcome) {
    super("timeout", waitTimeoutText(o), {
      hint: "Check the recipient and subject the program under test uses (the messages above are what arrived), or wait longer.",
    });
    this.query = o.query;
    this.count = o.count;
    this.matched = o.matched;
    this.closest = o.closest;
  }
}

function line(m: StoredMessage): string {
  return `  ${m.id}  ${m.receivedAt}  ${m.channel}  to ${m.to.join(", ") || m.envelope.to.join(", ")}  subject ${JSON.stringify(m.subject)}`;
}

/** What a wait that ran out saw; byKeys: `closest` are those with the query's recipient or subject, else the newest. */
interface WaitOutcome {
  query: string;
  count: number;
  timeoutMs: number;
  matched: StoredMessage[];
  closest: StoredMessage[];
  total: number;
  byKeys: boolean;
}

function waitTimeoutText(o: WaitOutcome): string {
  const what = `${o.count === 1 ? "a message" : `${o.count} messages`} matching ${JSON.stringify(o.query)}`;
  const head = `waited ${o.timeoutMs < 1000 ? `${o.timeoutMs}ms` : formatAge(o.timeoutMs)} for ${what}; ${o.matched.length === 0 ? "none" : `only ${o.matched.length}`} arrived`;
  const lines = [head];
  if (o.matched.length > 0) lines.push("matched:", ...o.matched.map(line));
  if (o.total === 0) lines.push("the sandbox holds no messages at all");
  else if (o.closest.length === 0)
    lines.push(`none of the ${o.total} messages it holds has the same recipient or subject`);
  else lines.push(o.byKeys ? "closest (same recipient or subject):" : "the newest it holds:", ...o.closest.map(line));
  return lines.join("\n");
}

/** The messages nearest to a query that did not match it, newest first: the same recipient or subject (the newest, when it names neither). */
async function closestTo(
  store: MessageStore,
  q: Query,
  matched: StoredMessage[],
): Promise<{ closest: StoredMessage[]; total: number; byKeys: boolean }> {
  const all = await store.list();
  const ids = new Set(matched.map((m) => m.id));
  const hasKeys = q.terms.some((t) => (t.kind === "to" || t.kind === "subject") && !t.neg);
  const others = all.filter((m) => !ids.has(m.id));
  const closest = (hasKeys ? others.filter((m) => isClose(q, m)) : others).slice(0, CLOSEST_MAX);
  return { closest, total: all.length, byKeys: hasKeys };
}

export interface WaitOptions {
  /** How many messages must match (default 1). */
  count?: number;
  timeoutMs: number;
  /** Stops the wait (a client gone): rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Resolves with the messages matching `q` (newest first) once there are `count` of them, those
 * already stored included; rejects with a WaitTimeoutError at the deadline.
 */
export function waitFor(s: Searcher, q: Query, opts: WaitOptions): Promise<StoredMessage[]> {
  const count = Math.max(1, opts.count ?? 1);
  if (opts.signal?.aborted)
    return Promise.reject(opts.signal.reason instanceof Error ? opts.signal.reason : new Error("the wait was stopped"));
  return new Promise((resolve, reject) => {
    const found: StoredMessage[] = [];
    const seen = new Set<string>();
    let early: StoredMessage[] | undefined = [];
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (result: StoredMessage[] | Error) => {
      if (done) return;
      done = true;
      unsubscribe();
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      if (result instanceof Error) reject(result);
      else resolve(result.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)));
    };
    const consider = async (m: StoredMessage) => {
      if (seen.has(m.id)) return;
      seen.add(m.id);
      if (!(await test(s, q, m)) || done) return;
      found.push(m);
      if (found.length >= count) finish([...found]);
    };
    // Subscribed before the scan: what arrives during it is held, then considered after.
    const unsubscribe = s.store.subscribe((m) => (early ? early.push(m) : void consider(m).catch(finish)));
    const onAbort = () =>
      finish(opts.signal!.reason instanceof Error ? opts.signal!.reason : new Error("the wait was stopped"));
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    timer = setTimeout(() => {
      void closestTo(s.store, q, found).then(
        (near) =>
          finish(
            new WaitTimeoutError({ query: q.source, count, timeoutMs: opts.timeoutMs, matched: [...found], ...near }),
          ),
        finish,
      );
    }, opts.timeoutMs);
    void (async () => {
      for (const m of await search(s, q)) {
        seen.add(m.id);
        found.push(m);
      }
      const held = early ?? [];
      early = undefined;
      if (found.length >= count) return finish([...found]);
      for (const m of held) await consider(m);
    })().catch(finish);
  });
}
