// The budget row of bench/speed.mjs alone, with what explains it: 4 loops, each running 15
// one-process `mailsend send` (REST) in turn, sharing a key with a limit of 10 per 5 s, against
// the sandbox with the same limit. Prints the share of the limit used (the ideal first-to-last
// span over the measured one; aim >= 0.97) and the 429s (aim 0), and beside them:
//  - first window: how long the first `limit` arrivals took (process start-up, not the budget).
//    No budget can make up for it: the service's log holds arrival k+limit to at least arrival
//    k + window, so the span is at least 5 windows + this, and the share at most 25 s / that;
//  - beyond: the span less 5 windows and the first window's spread: what the budget's pace
//    (and start-up that could not keep up with it) added, the part a budget change can move;
//  - lag: how long after the slot it waits for freed (arrival k + window) arrival k+limit came,
//    p50 / p90 / max; and the same for the sends that were waiting for their slot (--json's
//    waited_ms > 0): there no start-up is in it, only what the budget's book-keeping, the
//    wake-up and the request cost.
// Each send runs with --json where speed.mjs has -q (to read waited_ms); the work is the same.
// Knobs: BENCH_ROUNDS (default 1), BENCH_NODE24 (a second node binary to run it under too),
// BENCH_OTHER_BIN (another build's bin/mailsend.js, e.g. a checkout of the previous commit, run
// interleaved with this one: same rounds, same load).
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, runOnce, table, withBudgetSandbox } from "./lib.mjs";

const LIMIT = 10;
const WINDOW_S = 5;
const PROCESSES = 4;
const MESSAGES = 15;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const FROM = "bench@example.com";
const TO = "someone@example.com";

const nodes = [process.execPath, ...(process.env.BENCH_NODE24 ? [process.env.BENCH_NODE24] : [])];
const bins = [["this", BIN], ...(process.env.BENCH_OTHER_BIN ? [["other", process.env.BENCH_OTHER_BIN]] : [])];
const work = mkdtempSync(join(tmpdir(), "mailsend-bench-budget-"));
const rows = [];
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const node of nodes)
      for (const [which, bin] of round % 2 ? [...bins].reverse() : bins) {
        const version = (await runOnce(node, ["--version"])).stdout.trim();
        const label = `${version}-${which}-${round}`;
        const load0 = loadavg()[0];
        const place = {
          dir: join(work, `sb-${label}`),
          stateDir: join(work, `state-${label}`),
          limit: LIMIT,
          windowS: WINDOW_S,
        };
        await withBudgetSandbox(place, async ({ ready, env: shared }) => {
          const env = { ...shared, MAILSEND_RETRIES: "3" };
          const stats = async () => (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
          const s0 = await stats();
          const prefix = `rl ${label} `;
          const waited = new Set();
          await Promise.all(
            Array.from({ length: PROCESSES }, async (_, p) => {
              for (let m = 0; m < MESSAGES; m++) {
                const subject = `${prefix}p${p} m${m}`;
                const r = await runOnce(
                  node,
                  [bin, "send", "-f", FROM, "-t", TO, "-s", subject, "--text", "x", "--json"],
                  { env },
                );
                if (r.code !== 0) throw new Error(`budget send exited ${r.code}: ${r.stderr.slice(0, 500)}`);
                if (JSON.parse(r.stdout).waited_ms > 0) waited.add(subject);
              }
            }),
          );
          const s1 = await stats();
          const list = await (await fetch(`${ready.base_url}/api/messages?limit=100000`)).json();
          const arrivals = (Array.isArray(list) ? list : list.messages)
            .filter((m) => m.subject.startsWith(prefix))
            .map((m) => ({ t: Date.parse(m.receivedAt), waited: waited.has(m.subject) }))
            .sort((a, b) => a.t - b.t);
          const times = arrivals.map((a) => a.t);
          const n = PROCESSES * MESSAGES;
          const W = WINDOW_S * 1000;
          const ideal = (Math.ceil(n / LIMIT) - 1) * W;
          const span = times[times.length - 1] - times[0];
          const lags = times
            .slice(LIMIT)
            .map((t, i) => t - (times[i] + W))
            .sort((a, b) => a - b);
          const waitedLags = arrivals
            .slice(LIMIT)
            .flatMap((a, i) => (a.waited ? [a.t - (times[i] + W)] : []))
            .sort((a, b) => a - b);
          const q = (f, xs = lags) => xs[Math.min(xs.length - 1, Math.floor(xs.length * f))];
          rows.push({
            node: version,
            build: which,
            span: `${(span / 1000).toFixed(2)} s`,
            stored: `${times.length}/${n}`,
            "429s": s1.rest.rateLimited - s0.rest.rateLimited,
            used: (ideal / span).toFixed(3),
            "first window": `${times[LIMIT - 1] - times[0]} ms`,
            beyond: `${span - ideal - (times[LIMIT - 1] - times[0])} ms`,
            "lag p50/p90/max": `${q(0.5)}/${q(0.9)}/${lags[lags.length - 1]} ms`,
            "min lag": `${lags[0]} ms`,
            "waiters' lag p50/p90 (n)": `${q(0.5, waitedLags)}/${q(0.9, waitedLags)} ms (${waitedLags.length})`,
            load: `${load0.toFixed(1)} -> ${loadavg()[0].toFixed(1)}`,
          });
        });
      }
  }
  console.log(
    `\nBudget: ${PROCESSES} processes x ${MESSAGES} sends, limit ${LIMIT} per ${WINDOW_S} s (ideal span ${((Math.ceil((PROCESSES * MESSAGES) / LIMIT) - 1) * WINDOW_S).toFixed(2)} s; aim >= 0.97, 0 429s)\n`,
  );
  table(rows, [
    "node",
    "build",
    "span",
    "stored",
    "429s",
    "used",
    "first window",
    "beyond",
    "lag p50/p90/max",
    "min lag",
    "waiters' lag p50/p90 (n)",
    "load",
  ]);
} finally {
  rmSync(work, { recursive: true, force: true });
}
