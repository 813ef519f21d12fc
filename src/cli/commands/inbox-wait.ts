/**
 * `mailsend inbox wait --query Q`: asks the sandbox running on the data dir (its address is in the
 * dir's sandbox.url while it runs) over its long poll, GET /api/wait, so the wait reacts to the
 * message's arrival. Exits 0 with what matched, 1 at the timeout with what it saw instead.
 */
import http from "node:http";
import { readFileSync } from "node:fs";
import { durationMs } from "../../core/duration.js";
import { MailsendError } from "../../core/errors.js";
import { sandboxPaths } from "../../sandbox/paths.js";
import { parseQuery } from "../../sandbox/query.js";
import type { MessageView } from "../../sandbox/search.js";
import { WAIT_DEFAULT_MS, WAIT_MAX_MS } from "../../sandbox/search-api.js";
import { shellWord, type CliIO } from "../io.js";
import { reportError } from "../report.js";
import { listTable, openInbox } from "./inbox-store.js";

export interface WaitFlags {
  dir?: string;
  query?: string;
  count?: number;
  timeout?: string;
  json?: boolean;
}

/** The base URL of the sandbox running on this store's dir. */
function sandboxUrl(dir: string): string {
  try {
    return readFileSync(sandboxPaths(dir).url, "utf8").trim();
  } catch {
    throw notRunning(dir);
  }
}

function notRunning(dir: string): MailsendError {
  return new MailsendError("connection_failed", `no sandbox is running with the data dir ${dir}`, {
    hint: `\`inbox wait\` asks the running sandbox; start it with \`mailsend sandbox --dir ${shellWord(dir)}\`.`,
  });
}

interface Answer {
  status: number;
  body: { messages?: MessageView[]; error?: { code?: string; message?: string; hint?: string } };
}

/** GET with node:http: it has no timeout of its own, so a long wait is not cut short by the client. */
function get(url: string, dir: string, limitMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Accept: "application/json" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        try {
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as Answer["body"],
          });
        } catch {
          reject(
            new MailsendError(
              "protocol_error",
              `the sandbox at ${url} answered ${res.statusCode} with something that is not JSON`,
            ),
          );
        }
      });
    });
    // Past the wait's own timeout, the sandbox is not answering: give up rather than hang.
    req.setTimeout(limitMs, () =>
      req.destroy(new MailsendError("timeout", `the sandbox at ${new URL(url).origin} did not answer the wait`)),
    );
    req.on("error", (e) =>
      reject(
        e instanceof MailsendError ? e : (e as NodeJS.ErrnoException).code === "ECONNREFUSED" ? notRunning(dir) : e,
      ),
    );
  });
}

function timeoutOf(flags: WaitFlags): number {
  if (flags.timeout === undefined) return WAIT_DEFAULT_MS;
  const ms = durationMs(flags.timeout);
  if (ms === undefined || ms > WAIT_MAX_MS)
    throw new MailsendError(
      "usage",
      `--timeout ${JSON.stringify(flags.timeout)}: expected a duration up to 1h, such as 500ms, 30s or 5m`,
    );
  return ms;
}

export async function runInboxWait(flags: WaitFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    const timeoutMs = timeoutOf(flags);
    // Checked here too, so that a mistyped query fails before anything is asked of the sandbox.
    parseQuery(flags.query ?? "");
    const store = await openInbox(flags, io);
    const base = sandboxUrl(store.paths.dir);
    const params = new URLSearchParams({
      query: flags.query ?? "",
      count: String(flags.count ?? 1),
      timeout: `${timeoutMs}ms`,
    });
    const { status, body } = await get(`${base}/api/wait?${params}`, store.paths.dir, timeoutMs + 10_000);
    if (status === 200 && body.messages) {
      io.stdout.write(json ? `${JSON.stringify(body.messages)}\n` : listTable(body.messages));
      return 0;
    }
    const e = body.error ?? {};
    const hint = e.hint !== undefined ? { hint: e.hint } : {};
    if (status === 408)
      return reportError(new MailsendError("timeout", e.message ?? "the wait timed out", hint), io, { json, exit: 1 });
    if (status === 400) throw new MailsendError("usage", e.message ?? "the sandbox refused the query", hint);
    if (status === 401)
      throw new MailsendError(
        "auth_failed",
        "this sandbox listens beyond loopback and wants its token: `inbox wait` works with a sandbox on loopback",
      );
    throw new MailsendError("service_error", `the sandbox answered ${status}${e.message ? `: ${e.message}` : ""}`, {
      status,
    });
  } catch (e) {
    return reportError(e, io, { json });
  }
}
