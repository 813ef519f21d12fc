/**
 * search(), waitFor(), latest() and raw() of createSandbox()'s handle: the sandbox's one query language
 * and its wait on the store, with each message's parts read for the test.
 */
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";
import { parseQuery } from "../sandbox/query.js";
import { createSearcher, latest, LATEST, search, waitFor, type Searcher } from "../sandbox/search.js";
import { WAIT_DEFAULT_MS } from "../sandbox/search-api.js";
import type { MessageStore, StoredMessage } from "../sandbox/types.js";
import type { MailSandbox, SandboxMail, WaitForOptions } from "./types.js";

async function mailOf(s: Searcher, m: StoredMessage): Promise<SandboxMail> {
  const { keyId: _keyId, attachments: _meta, ...rest } = m;
  const p = await s.parts(m.id);
  return {
    ...rest,
    cc: p?.cc ?? [],
    text: p?.text ?? null,
    html: p?.html ?? null,
    links: p?.links ?? [],
    attachments: (p?.attachments ?? []).map(({ content, ...a }) => ({ ...a, content: () => content })),
  };
}

function timeoutMs(t: WaitForOptions["timeout"]): number {
  if (t === undefined) return WAIT_DEFAULT_MS;
  const ms = typeof t === "number" ? t : durationMs(t);
  if (ms === undefined || !Number.isFinite(ms) || ms < 0)
    throw new MailsendError(
      "usage",
      `options.timeout ${JSON.stringify(t)}: expected milliseconds or a duration such as "30s"`,
    );
  return ms;
}

export function searchMethods(store: MessageStore): Pick<MailSandbox, "search" | "waitFor" | "latest" | "raw"> {
  const s = createSearcher(store);
  const mails = (list: StoredMessage[]) => Promise.all(list.map((m) => mailOf(s, m)));
  async function waitForImpl(query: string, options: WaitForOptions = {}): Promise<SandboxMail | SandboxMail[]> {
    const q = parseQuery(query);
    const found = await waitFor(s, q, { count: options.count ?? 1, timeoutMs: timeoutMs(options.timeout) });
    return options.count === undefined ? mailOf(s, found[0]!) : mails(found);
  }
  return {
    search: async (query) => mails(await search(s, parseQuery(query))),
    waitFor: waitForImpl as MailSandbox["waitFor"],
    latest: async () => {
      const m = await latest(store);
      return m && mailOf(s, m);
    },
    raw: async (id) => store.raw(id === LATEST ? ((await latest(store))?.id ?? "") : id),
  };
}
