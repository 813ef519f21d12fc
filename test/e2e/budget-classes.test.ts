/**
 * An urgent send never waits behind bulk: while a batch holds the key's budget (all of it but
 * the reserve), a `mailsend send` started meanwhile goes out at once rather than a window later,
 * and the service sees no 429 because the sum stays within the limit.
 */
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { keyHash } from "../../src/limits/budget.js";
import { FileSlotStore } from "../../src/limits/file-store.js";
import { QueueRunner } from "../../src/outbox/runner.js";
import { Outbox } from "../../src/outbox/store.js";
import { runCli } from "../helpers/cli.js";
import { inProcessSandbox, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

const LIMIT = 10;
const WINDOW_S = 12;
/** The outbox's case: long enough that a retry sent at once would show, short for the test's time. */
const OUTBOX_WINDOW_S = 5;
/** Two windows' worth of bulk (9 each, the reserve being 1). */
const ITEMS = 18;

let t: TestSandbox;
let tmp: Scratch;
useSandbox((sb) => (t = sb), { rateLimit: LIMIT, rateWindowMs: WINDOW_S * 1000 });
beforeAll(() => {
  tmp = scratch("mailsend-budget-classes-");
});
afterAll(() => tmp?.remove());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function delivered(prefix: string, sandbox = t): Promise<number> {
  return (await sandbox.sb.store.list()).filter((m) => m.subject.startsWith(prefix)).length;
}

async function statsOverHttp(): Promise<{ rest: { rateLimited: number } }> {
  const res = await fetch(new URL("/_sandbox/stats", t.env.MAILSEND_BASE_URL));
  return (await res.json()) as { rest: { rateLimited: number } };
}

test("a send started while a batch holds the budget goes out within seconds, with no 429", async () => {
  const state = scratch("mailsend-classes-state-");
  const env = {
    ...t.env,
    MAILSEND_STATE_DIR: state.dir,
    MAILSEND_RATE_LIMIT: String(LIMIT),
    MAILSEND_RATE_WINDOW: String(WINDOW_S),
  };
  const rows = Array.from({ length: ITEMS }, (_, i) =>
    JSON.stringify({ to: `b${i}@example.com`, subject: `classes batch ${i}`, text: "x" }),
  );
  const input = tmp.file("classes.jsonl", `${rows.join("\n")}\n`);
  const before = await statsOverHttp();
  const batch = runCli(
    ["batch", input, "-f", "batch@example.com", "--transport", "rest", "--concurrency", "4", "--json"],
    { env, timeoutMs: 90_000 },
  );

  // The batch has taken what bulk may of this window, and waits for the next one.
  for (let i = 0; i < 300 && (await delivered("classes batch ")) < LIMIT - 1; i++) await sleep(50);
  expect(await delivered("classes batch ")).toBe(LIMIT - 1);

  const started = Date.now();
  const send = await runCli(
    ["send", "-f", "alert@example.com", "-t", "ops@example.com", "-s", "classes alert", "--text", "x", "--json"],
    { env, timeoutMs: 60_000 },
  );
  const tookMs = Date.now() - started;
  expect(send.exitCode, send.stderr).toBe(0);
  expect(await delivered("classes alert")).toBe(1);
  // A process start and one request, not the rest of the batch's window.
  expect(tookMs).toBeLessThan(5_000);
  // The batch is still held back by its window: the alert did not wait for that.
  expect(await delivered("classes batch ")).toBe(LIMIT - 1);

  const b = await batch;
  expect(b.exitCode, b.stderr).toBe(0);
  expect(await delivered("classes batch ")).toBe(ITEMS);
  const after = await statsOverHttp();
  expect(after.rest.rateLimited - before.rest.rateLimited).toBe(0);
  state.remove();
}, 90_000);

test("the outbox: a first attempt takes the reserve at once, a retry waits for room beyond it and then goes", async () => {
  // A sandbox of its own, with a short window, so the batch's sends above do not count here.
  const own = await inProcessSandbox({ rateLimit: LIMIT, rateWindowMs: OUTBOX_WINDOW_S * 1000 });
  try {
    const state = own.scratch;
    const env = {
      ...own.env,
      MAILSEND_STATE_DIR: state.dir,
      MAILSEND_RATE_LIMIT: String(LIMIT),
      MAILSEND_RATE_WINDOW: String(OUTBOX_WINDOW_S),
      MAILSEND_QUEUE_AUTORUN: "0",
      // Room for both at once, were the retry urgent too.
      MAILSEND_RATE_RESERVE: "2",
      // In this process NODE_EXTRA_CA_CERTS was read at start-up: the sandbox's CA by name.
      MAILSEND_CA_FILE: own.env.NODE_EXTRA_CA_CERTS!,
    };
    const limits = { limit: LIMIT, windowMs: OUTBOX_WINDOW_S * 1000 };
    // Other senders of the key hold all of this window but the reserve.
    const budget = new FileSlotStore({ dir: join(state.dir, "ratelimit"), keyHash: keyHash(own.key) });
    for (let i = 0; i < LIMIT - 2; i++) expect((await budget.tryTake(`other${i}`, limits)).ok).toBe(true);
    const outbox = Outbox.fromEnv(env);
    const add = (subject: string) =>
      outbox.add({
        raw: Buffer.from(
          `From: cron@example.com\r\nTo: ops@example.com\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nx\r\n`,
        ),
        envelope: { from: "cron@example.com", to: ["ops@example.com"] },
        idempotencyKey: `classes-${subject.replace(/\W/g, "-")}-${Date.now()}`,
        source: "sendmail",
        subject,
      });
    const retry = await add("classes outbox retry");
    await outbox.setState(retry, { attempts: 1, nextAttemptAt: 0 });
    await add("classes outbox first");

    const runner = new QueueRunner({ env, mode: "due", outbox });
    const started = Date.now();
    const run = runner.run();
    for (let i = 0; i < 200 && (await delivered("classes outbox first", own)) < 1; i++) await sleep(50);
    expect(await delivered("classes outbox first", own)).toBe(1);
    expect(Date.now() - started).toBeLessThan(5_000);
    await sleep(1_000);
    expect(await delivered("classes outbox retry", own)).toBe(0);
    // Not starved: it goes once the others' slots leave the window.
    const summary = await run;
    expect(summary.sent).toBe(2);
    expect(await delivered("classes outbox retry", own)).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(OUTBOX_WINDOW_S * 1000 - 1_000);
  } finally {
    await own.stop();
    own.scratch.remove();
  }
}, 60_000);
