/**
 * The per-key budget holds across a batch and `mailsend send` processes
 * running beside it: with a small limit and a short window in the sandbox
 * (and the same numbers given to mailsend), a batch of 16 and 3 concurrent
 * sends all get through without a single 429, paced by the limit.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { runCli } from "../helpers/cli.js";
import { addKey, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

const LIMIT = 8;
const WINDOW_S = 3;
const ITEMS = 16;
const SENDS = 3;

let t: TestSandbox;
let tmp: Scratch;
useSandbox((sb) => (t = sb), { rateLimit: LIMIT, rateWindowMs: WINDOW_S * 1000 });
beforeAll(async () => {
  tmp = scratch("mailsend-batch-budget-");
});
afterAll(async () => {
  tmp?.remove();
});
/**
 * A key of each test's own: the sandbox and the budget count per key, so the next test starts with
 * the whole budget without waiting out the window this one used.
 */
let key: string;
beforeEach(async () => {
  key = (await addKey(t.dir)).key;
});

describe.each(["rest", "smtp"] as const)("a batch over %s", (transport) => {
  test(`${ITEMS} items with ${SENDS} concurrent sends at ${LIMIT} per ${WINDOW_S} s: all delivered, zero 429s`, async () => {
    const state = scratch("mailsend-budget-state-");
    const { MAILSEND_API_KEY_FILE: _file, ...sandbox } = t.env;
    const env = {
      ...sandbox,
      MAILSEND_API_KEY: key,
      MAILSEND_STATE_DIR: state.dir,
      MAILSEND_RATE_LIMIT: String(LIMIT),
      MAILSEND_RATE_WINDOW: String(WINDOW_S),
      MAILSEND_RETRIES: "3",
    };
    const prefix = `budget ${transport}`;
    const rows = Array.from({ length: ITEMS }, (_, i) =>
      JSON.stringify({ to: `b${i}@example.com`, subject: `${prefix} batch ${i}`, text: "x" }),
    );
    const input = tmp.file(`budget-${transport}.jsonl`, `${rows.join("\n")}\n`);
    const before = t.sb.stats.toJSON();
    const started = Date.now();

    const [b, ...sends] = await Promise.all([
      runCli(["batch", input, "-f", "batch@example.com", "--transport", transport, "--concurrency", "4", "--json"], {
        env,
        timeoutMs: 60_000,
      }),
      ...Array.from({ length: SENDS }, (_, i) =>
        runCli(
          [
            "send",
            "-f",
            "send@example.com",
            "-t",
            "s@example.com",
            "-s",
            `${prefix} send ${i}`,
            "--text",
            "x",
            "--json",
          ],
          { env, timeoutMs: 60_000 },
        ),
      ),
    ]);
    const elapsed = Date.now() - started;

    expect(b!.exitCode, b!.stderr).toBe(0);
    for (const s of sends) expect(s.exitCode, s.stderr).toBe(0);
    const out = b!.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { status: string; attempts: number });
    expect(out.filter((r) => r.status === "sent")).toHaveLength(ITEMS);
    // Paced by the budget, not by refusals: every item went through on its first attempt.
    expect(out.map((r) => r.attempts)).toEqual(Array(ITEMS).fill(1));
    // Waiting for slots over a whole batch leaves no pile of listeners behind.
    expect(b!.stderr).not.toMatch(/MaxListenersExceededWarning/);

    const after = t.sb.stats.toJSON();
    for (const ch of ["rest", "smtp"] as const) {
      expect(after[ch].rateLimited - before[ch].rateLimited, `429s on ${ch}`).toBe(0);
      expect(after[ch].duplicates - before[ch].duplicates).toBe(0);
    }
    const got = (await t.sb.store.list()).filter((m) => m.subject.startsWith(`${prefix} `)).map((m) => m.subject);
    expect(got).toHaveLength(ITEMS + SENDS);
    expect(new Set(got).size).toBe(ITEMS + SENDS);
    // 19 messages at 8 per window: the third window is needed. (How close the
    // pacing comes to the limit is bench/ratelimit's and bench/batch's to measure.)
    expect(elapsed).toBeGreaterThanOrEqual(2 * WINDOW_S * 1000);
    state.remove();
  });
});
