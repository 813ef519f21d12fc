/**
 * An urgent send never waits behind bulk: while a batch holds the key's budget (all of it but
 * the reserve), a `mailsend send` started meanwhile goes out at once rather than a window later,
 * and the service sees no 429 because the sum stays within the limit.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { runCli } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

const LIMIT = 10;
const WINDOW_S = 12;
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

async function delivered(prefix: string): Promise<number> {
  return (await t.sb.store.list()).filter((m) => m.subject.startsWith(prefix)).length;
}

async function statsOverHttp(): Promise<{ rest: { rateLimited: number } }> {
  const res = await fetch(new URL("/_sandbox/stats", t.env.MAILSEND_BASE_URL));
  return (await res.json()) as { rest: { rateLimited: number } };
}

test("a send started while a batch holds the budget goes out within seconds, with no 429", async () => {
  const state = scratch("mailsend-classes-state-");
  const env = { ...t.env, MAILSEND_STATE_DIR: state.dir, MAILSEND_RATE_LIMIT: String(LIMIT), MAILSEND_RATE_WINDOW: String(WINDOW_S) };
  const rows = Array.from({ length: ITEMS }, (_, i) => JSON.stringify({ to: `b${i}@example.com`, subject: `classes batch ${i}`, text: "x" }));
  const input = tmp.file("classes.jsonl", `${rows.join("\n")}\n`);
  const before = await statsOverHttp();
  const batch = runCli(["batch", input, "-f", "batch@example.com", "--transport", "rest", "--concurrency", "4", "--json"], { env, timeoutMs: 90_000 });

  // The batch has taken what bulk may of this window, and waits for the next one.
  for (let i = 0; i < 300 && (await delivered("classes batch ")) < LIMIT - 1; i++) await sleep(50);
  expect(await delivered("classes batch ")).toBe(LIMIT - 1);

  const started = Date.now();
  const send = await runCli(["send", "-f", "alert@example.com", "-t", "ops@example.com", "-s", "classes alert", "--text", "x", "--json"], { env, timeoutMs: 60_000 });
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
