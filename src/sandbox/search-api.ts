/**
 * The inbox's JSON search and wait:
 *
 *   GET /api/messages?query=Q&limit=N      the messages matching Q, newest first
 *   GET /api/wait?query=Q&count=N&timeout=30s
 *       a long poll: 200 {messages} as soon as N messages match (those stored already count);
 *       408 at the timeout, with what it waited for and the closest messages it saw. 408 rather
 *       than an empty 200 so that `curl --fail` and any client that checks the status fail the
 *       test there, with the reason in the body.
 *
 * A bad query is a 400 whose message lists the known terms.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";
import { parseQuery } from "./query.js";
import { search, viewOf, waitFor, WaitTimeoutError, type Searcher } from "./search.js";
import type { StoredMessage } from "./types.js";

export const WAIT_DEFAULT_MS = 30_000;
/** Longer waits are refused: a forgotten client would hold a connection for ever. */
export const WAIT_MAX_MS = 3_600_000;
const LIST_DEFAULT = 200;
const LIST_MAX = 1000;

type SendJson = (req: IncomingMessage, res: ServerResponse, status: number, value: unknown) => void;

function badRequest(message: string, hint?: string): MailsendError {
  return new MailsendError("usage", message, hint ? { hint } : {});
}

function count(params: URLSearchParams): number {
  const v = params.get("count") ?? "1";
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > LIST_MAX)
    throw badRequest(`count=${v}: expected a whole number from 1 to ${LIST_MAX}`);
  return n;
}

function timeout(params: URLSearchParams): number {
  const v = params.get("timeout");
  if (v === null) return WAIT_DEFAULT_MS;
  const ms = durationMs(v);
  if (ms === undefined || ms > WAIT_MAX_MS)
    throw badRequest(`timeout=${v}: expected a duration up to 1h (500ms, 30s, 5m) or seconds`);
  return ms;
}

function limit(params: URLSearchParams): number {
  const requested = Number(params.get("limit") ?? LIST_DEFAULT);
  return Number.isInteger(requested) && requested > 0 ? Math.min(requested, LIST_MAX) : LIST_DEFAULT;
}

/** The JSON of messages, each with its parts and its page in the inbox. */
async function views(s: Searcher, list: StoredMessage[]): Promise<Record<string, unknown>[]> {
  return Promise.all(
    list.map(async (m) => ({ ...(await viewOf(s, m)), url: `/messages/${encodeURIComponent(m.id)}` })),
  );
}

function errorBody(e: MailsendError): { error: Record<string, unknown> } {
  return { error: { code: e.code, message: e.message, ...(e.hint ? { hint: e.hint } : {}) } };
}

async function waitRoute(
  s: Searcher,
  req: IncomingMessage,
  res: ServerResponse,
  params: URLSearchParams,
  sendJson: SendJson,
): Promise<void> {
  const q = parseQuery(params.get("query") ?? "");
  const n = count(params);
  const ms = timeout(params);
  // A client that hangs up ends its wait (and its subscription) at once.
  const gone = new AbortController();
  res.on("close", () => gone.abort());
  try {
    const found = await waitFor(s, q, { count: n, timeoutMs: ms, signal: gone.signal });
    sendJson(req, res, 200, { messages: await views(s, found) });
  } catch (e) {
    if (gone.signal.aborted) return;
    if (!(e instanceof WaitTimeoutError)) throw e;
    sendJson(req, res, 408, {
      ...errorBody(e),
      query: e.query,
      count: e.count,
      matched: await views(s, e.matched),
      closest: await views(s, e.closest),
    });
  }
}

/** Answers /api/messages and /api/wait. */
export function createSearchApi(s: Searcher, sendJson: SendJson) {
  return async (
    req: IncomingMessage,
    res: ServerResponse,
    route: "apiList" | "apiWait",
    params: URLSearchParams,
  ): Promise<void> => {
    try {
      if (route === "apiWait") return await waitRoute(s, req, res, params, sendJson);
      const q = params.get("query");
      const n = limit(params);
      const list = q === null ? await s.store.list({ limit: n }) : await search(s, parseQuery(q), { limit: n });
      sendJson(req, res, 200, { messages: await views(s, list) });
    } catch (e) {
      if (!(e instanceof MailsendError) || e.code !== "usage") throw e;
      sendJson(req, res, 400, errorBody(e));
    }
  };
}
