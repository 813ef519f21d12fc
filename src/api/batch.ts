/**
 * sendBatch(): many messages through the runner of `mailsend batch` (every
 * item validated first, then sent N at a time over a connection pool,
 * through the shared budget, optionally journaled for resuming). The items
 * are handed to the runner as JSON lines, the rows `mailsend batch` reads;
 * an input that is not an array is spooled to a private temp file, since the
 * runner reads its input twice (validate, then send).
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EXIT, MailsendError, type ErrorCode } from "../core/errors.js";
import { checkHeader, type HeaderList } from "../core/headers.js";
import type { Transport } from "../core/transport.js";
import type { RowDefaults } from "../batch/item.js";
import type { Journal } from "../batch/journal.js";
import type { BatchInput, BatchSummary, ItemResult } from "../batch/runner.js";
import { createTransport } from "../transports/index.js";
import { openBudget, resolveConnection, resolveTransportName, type Budget } from "./options.js";
import { asMailsendError } from "./send.js";
import type { BatchItem, BatchItemResult, BatchResult, BatchTemplate, SendBatchOptions } from "./types.js";

const CHUNK = 64 * 1024;

/** An error thrown by the caller's onResult: rethrown as it is, not as a mailsend error. */
class CallerError {
  constructor(readonly error: unknown) {}
}

/** One item as a JSON line; bytes given as Buffers become base64, as in the REST API. */
function line(item: unknown): string {
  let value = item;
  if (item && typeof item === "object" && !Array.isArray(item) && Array.isArray((item as BatchItem).attachments)) {
    const attachments = (item as BatchItem).attachments!.map((a) =>
      a && typeof a === "object" && "content" in a && a.content instanceof Uint8Array
        ? {
            ...a,
            content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength).toString("base64"),
          }
        : a,
    );
    value = { ...item, attachments };
  }
  try {
    return `${JSON.stringify(value) ?? "null"}\n`;
  } catch {
    // Not serialisable (a BigInt, a cycle): the runner reports it as an invalid item.
    return "null\n";
  }
}

async function* chunks(items: Iterable<unknown> | AsyncIterable<unknown>): AsyncGenerator<Buffer> {
  let buf = "";
  for await (const item of items) {
    buf += line(item);
    if (buf.length >= CHUNK) {
      yield Buffer.from(buf);
      buf = "";
    }
  }
  if (buf) yield Buffer.from(buf);
}

/**
 * The input, readable twice: an array as it is, anything else spooled to a
 * 0600 file in a 0700 dir; and a hash of its content, the journal's identity
 * of the input (other items with the same journal are a new batch, as in the CLI):
 * taken while spooling, and for an array only when a journal asks for it.
 */
async function inputOf(
  items: Iterable<unknown> | AsyncIterable<unknown>,
): Promise<{ input: BatchInput; fingerprint: () => Promise<string>; cleanup: () => Promise<void> }> {
  const digest = (hash: ReturnType<typeof createHash>) => hash.digest("hex").slice(0, 32);
  if (Array.isArray(items)) {
    const fingerprint = async () => {
      const hash = createHash("sha256");
      for await (const chunk of chunks(items)) hash.update(chunk);
      return digest(hash);
    };
    return { input: { format: "jsonl", open: () => chunks(items) }, fingerprint, cleanup: async () => {} };
  }
  const dir = await mkdtemp(join(tmpdir(), "mailsend-api-batch-"));
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    const path = join(dir, "items.jsonl");
    const out = createWriteStream(path, { mode: 0o600 });
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => {});
    const hash = createHash("sha256");
    for await (const chunk of chunks(items)) {
      hash.update(chunk);
      if (!out.write(chunk)) await Promise.race([new Promise<void>((r) => out.once("drain", () => r())), failed]);
    }
    await Promise.race([new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r()))), failed]);
    const fingerprint = digest(hash);
    return {
      input: { format: "jsonl", open: () => createReadStream(path, { highWaterMark: CHUNK }) },
      fingerprint: async () => fingerprint,
      cleanup,
    };
  } catch (e) {
    await cleanup();
    throw e;
  }
}

function defaultsOf(t: BatchTemplate | undefined): RowDefaults {
  if (t === undefined) return {};
  if (!t || typeof t !== "object") throw new MailsendError("usage", "options.template must be an object");
  const s = (k: keyof BatchTemplate) => {
    const v = t[k];
    if (v !== undefined && typeof v !== "string")
      throw new MailsendError("usage", `options.template.${k} must be a string`);
    return v as string | undefined;
  };
  const headers: HeaderList = Object.entries(t.headers ?? {}).map(([n, v]) => {
    if (typeof v !== "string")
      throw new MailsendError("usage", `options.template.headers[${JSON.stringify(n)}] must be a string`);
    checkHeader(n, v);
    return [n, v];
  });
  const attach = t.attachments ?? [];
  if (!Array.isArray(attach) || !attach.every((a) => typeof a === "string")) {
    throw new MailsendError("usage", "options.template.attachments must be an array of file paths");
  }
  const [from, name, replyTo, subject, html, text] = [
    s("from"),
    s("name"),
    s("reply_to"),
    s("subject"),
    s("html"),
    s("text"),
  ];
  return {
    ...(from !== undefined ? { from } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(replyTo !== undefined ? { replyTo } : {}),
    ...(subject !== undefined ? { subject } : {}),
    ...(html !== undefined ? { htmlTemplate: html } : {}),
    ...(text !== undefined ? { textTemplate: text } : {}),
    labels: { subject: "template.subject", html: "template.html", text: "template.text" },
    headers,
    attach,
  };
}

/**
 * A batch sentence in the API's terms (the runner says settings as options already): the runner
 * names an item by its row and line in the JSON lines it was handed ("row 2 (line 2)", 1-based),
 * which for sendBatch() are an internal spool; the caller knows the item by its 0-based `index`,
 * so it is written items[1].
 */
function inItemTerms(text: string): string {
  const at = (n: string) => `items[${Number(n) - 1}]`;
  return text
    .replace(/\b(?:row|item) (\d+) \(line \d+\)/g, (_, n: string) => at(n))
    .replace(/\brow (\d+)'s\b/g, (_, n: string) => `${at(n)}'s`)
    .replace(
      "expected a JSON object (one send request)",
      "expected a message: an object of JSON values (no BigInt, no cycles)",
    );
}

function resultOf(r: ItemResult): BatchItemResult {
  return {
    index: r.index,
    status: r.status,
    recipients: r.recipients,
    ...(r.message_id !== undefined ? { messageId: r.message_id } : {}),
    ...(r.idempotency_key !== undefined ? { idempotencyKey: r.idempotency_key } : {}),
    ...(r.attempts !== undefined ? { attempts: r.attempts } : {}),
    ...(r.refused ? { refused: r.refused } : {}),
    ...(r.warnings ? { warnings: r.warnings.map(inItemTerms) } : {}),
    ...(r.error
      ? {
          error: {
            // The runner's codes are MailsendError codes (a journal keeps no error, only what was sent).
            code: r.error.code as ErrorCode,
            message: inItemTerms(r.error.message),
            ...(r.error.hint ? { hint: inItemTerms(r.error.hint) } : {}),
            exitCode: r.error.exit,
            exitClass: r.error.class,
          },
        }
      : {}),
  };
}

/** The shape of the input and the options checked before anything is opened. */
function checkBatchRequest(items: unknown, options: SendBatchOptions): { check: boolean; concurrency: number } {
  if (
    !items ||
    typeof items === "string" ||
    (typeof (items as Iterable<unknown>)[Symbol.iterator] !== "function" &&
      typeof (items as AsyncIterable<unknown>)[Symbol.asyncIterator] !== "function")
  ) {
    throw new MailsendError("usage", "sendBatch() takes an array, an iterable or an async iterable of messages");
  }
  const check = options.check === true;
  const concurrency = options.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    throw new MailsendError("usage", "options.concurrency must be a whole number from 1 to 64");
  if (options.journal !== undefined && typeof options.journal !== "string")
    throw new MailsendError("usage", "options.journal must be a file path");
  return { check, concurrency };
}

/** The journal at `path` for this input; a failure that is not already a mailsend error is the file's. */
async function openJournal(path: string, input: string, fresh: boolean): Promise<Journal> {
  const { Journal } = await import("../batch/journal.js");
  try {
    return await Journal.open({ path, input, fresh, resume: false });
  } catch (e) {
    if (e instanceof MailsendError) throw e;
    throw new MailsendError("file_unreadable", `cannot use the journal ${path}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * The caller's onResult and onWarning as the runner calls them: results in the API's shape (kept
 * unless collectResults is false), and the first error a callback throws held back, so the batch
 * still settles before the caller sees it.
 */
function callerCallbacks(options: SendBatchOptions) {
  const results: BatchItemResult[] = [];
  let callbackError: CallerError | undefined;
  const keep = options.collectResults !== false;
  const onResult = (r: ItemResult) => {
    const result = resultOf(r);
    if (keep) results.push(result);
    try {
      options.onResult?.(result);
    } catch (e) {
      callbackError ??= new CallerError(e);
    }
  };
  const onWarning = options.onWarning
    ? (text: string) => {
        try {
          options.onWarning!(inItemTerms(text));
        } catch (e) {
          callbackError ??= new CallerError(e);
        }
      }
    : undefined;
  return { results, onResult, ...(onWarning ? { onWarning } : {}), callbackError: () => callbackError };
}

/** The runner's summary as sendBatch() reports it; a batch the caller aborted exits as a temporary failure. */
function summaryOf(summary: BatchSummary, aborted: boolean, journal: Journal | undefined): BatchResult["summary"] {
  return {
    total: summary.total,
    sent: summary.sent,
    failed: summary.failed,
    invalid: summary.invalid,
    skipped: summary.skipped,
    unknown: summary.unknown,
    partial: summary.partial,
    exitCode: aborted ? EXIT.tempfail : summary.exitCode,
    elapsedMs: summary.elapsedMs,
    aborted,
    ...(journal ? { journal: journal.path } : {}),
  };
}

/**
 * Send many messages. Resolves, once every item is settled, to a summary and
 * the per-item results (also given to `onResult` as they come); a failed item
 * does not reject. Rejects with a MailsendError only when the batch cannot
 * run at all (no key, bad options, a journal that cannot be used).
 */
export async function sendBatch(
  items: Iterable<BatchItem> | AsyncIterable<BatchItem>,
  options: SendBatchOptions = {},
): Promise<BatchResult> {
  let cleanup = async () => {};
  let transport: Transport | undefined;
  let budget: Budget | undefined;
  let journal: Journal | undefined;
  try {
    const { check, concurrency } = checkBatchRequest(items, options);
    const defaults = defaultsOf(options.template);
    const transportName = check ? resolveTransportName(options) : undefined;
    const config = check ? undefined : await resolveConnection(options, { needKey: true });
    const opened = await inputOf(items);
    cleanup = opened.cleanup;
    if (!check && options.journal !== undefined) {
      journal = await openJournal(options.journal, await opened.fingerprint(), options.fresh === true);
    }
    if (config) {
      budget = openBudget(options, config.apiKey, config.caFile);
      transport = await createTransport(config, { pool: concurrency });
    }
    const { results, callbackError, ...callbacks } = callerCallbacks(options);
    const { runBatch } = await import("../batch/runner.js");
    const summary = await runBatch({
      input: opened.input,
      defaults,
      front: "api",
      transportName: config?.transport ?? transportName!,
      ...(transport ? { transport } : {}),
      deliver: {
        ...(budget?.options ?? { limits: { limit: 0, windowMs: 60_000 }, retries: 0, maxWaitMs: 0, noWait: true }),
        ...(options.onWait ? { onWait: (w) => options.onWait!(w.error ? { ...w, error: w.error.in("api") } : w) } : {}),
      },
      concurrency,
      check,
      failFast: options.failFast === true,
      ...(journal ? { journal } : {}),
      ...callbacks,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    // The caller's own callback threw: that is their error to see, after the batch settled.
    const thrown = callbackError();
    if (thrown) throw thrown;
    return { summary: summaryOf(summary, options.signal?.aborted === true, journal), results };
  } catch (e) {
    if (e instanceof CallerError) throw e.error;
    throw asMailsendError(e);
  } finally {
    await transport?.close();
    await budget?.close();
    await journal?.close();
    await cleanup();
  }
}
