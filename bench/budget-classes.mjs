// The budget's two classes: a `mailsend batch` (bulk) runs at the limit, 20 per 4 s, against the
// sandbox with the same limit; mid-way an urgent send starts, once through the library (send(),
// no process start-up: the budget's wait alone) and, after the windows measured, as a
// `mailsend send` process. Prints,
// for the default reserve (10%) and for none (MAILSEND_RATE_RESERVE=0, one class in effect):
//  - urgent: how long the library's send took, against one slot's interval (window / limit);
//    aim: within it with the reserve;
//  - cli send: the process's time and the budget wait it reported (waited_ms);
//  - used: the batch's arrivals (and all arrivals) in the first WINDOWS windows from the
//    batch's first, over what the limit allows in them; aim: the batch >= 0.88 with the reserve;
//  - 429s the sandbox answered (aim 0).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, ROOT, runOnce, table, withBudgetSandbox } from "./lib.mjs";

const LIMIT = 20;
const WINDOW_S = 4;
const WINDOWS = 8;
/** Enough rows to keep the batch at the limit past the windows measured, with a reserve or without. */
const ROWS = LIMIT * (WINDOWS + 1);
const INTERVAL_MS = (WINDOW_S * 1000) / LIMIT;

const { send } = await import(`${ROOT}dist/index.js`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const work = mkdtempSync(join(tmpdir(), "mailsend-bench-classes-"));
const rows = [];
let failed = false;

async function arrivals(baseUrl, prefix) {
  const list = await (await fetch(`${baseUrl}/api/messages?limit=100000`)).json();
  return (Array.isArray(list) ? list : list.messages)
    .filter((m) => m.subject.startsWith(prefix))
    .map((m) => ({ t: Date.parse(m.receivedAt), subject: m.subject }))
    .sort((a, b) => a.t - b.t);
}

/** One run: the batch, and the two urgent sends once it has filled two windows. */
async function run(label, reserve) {
  const place = {
    dir: join(work, `sb-${label}`),
    stateDir: join(work, `state-${label}`),
    limit: LIMIT,
    windowS: WINDOW_S,
  };
  await withBudgetSandbox(place, async ({ ready, env: shared }) => {
    const env = { ...shared, ...(reserve !== undefined ? { MAILSEND_RATE_RESERVE: reserve } : {}) };
    const input = join(work, `rows-${label}.jsonl`);
    writeFileSync(
      input,
      Array.from(
        { length: ROWS },
        (_, i) => `${JSON.stringify({ to: `r${i}@example.com`, subject: `${label} batch ${i}`, text: "x" })}\n`,
      ).join(""),
    );
    const stats = async () => (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
    // The library's own lazy loads (the transport) happen here, not in the send measured; its
    // slot leaves the window before the batch starts.
    await send({ from: "alert@example.com", to: "ops@example.com", subject: `warm-up ${label}`, text: "x" }, { env });
    await sleep(WINDOW_S * 1000 + 100);
    const s0 = await stats();
    const batch = runOnce(
      process.execPath,
      [BIN, "batch", input, "-f", "bulk@example.com", "--transport", "rest", "--concurrency", "4", "-q"],
      { env },
    );
    // Mid-way: half a window after the batch's third burst, while it waits for its next slots.
    let first;
    for (let i = 0; i < 400 && !first; i++) {
      first = (await arrivals(ready.base_url, `${label} batch `))[0];
      if (!first) await sleep(25);
    }
    await sleep(Math.max(0, first.t + 2.5 * WINDOW_S * 1000 - Date.now()));
    const t0 = performance.now();
    await send({ from: "alert@example.com", to: "ops@example.com", subject: `${label} urgent`, text: "x" }, { env });
    const urgentMs = performance.now() - t0;
    // The process send once the measured windows are over (the batch still running): each urgent
    // slot is one bulk does not get in its window, and "used" is to show bulk's share beside one.
    await sleep(Math.max(0, first.t + (WINDOWS + 0.5) * WINDOW_S * 1000 - Date.now()));
    const cli = await runOnce(
      process.execPath,
      [BIN, "send", "-f", "alert@example.com", "-t", "ops@example.com", "-s", `${label} cli`, "--text", "x", "--json"],
      { env },
    );
    if (cli.code !== 0) throw new Error(`send exited ${cli.code}: ${cli.stderr.slice(0, 500)}`);
    const b = await batch;
    if (b.code !== 0) throw new Error(`batch exited ${b.code}: ${b.stderr.slice(0, 500)}`);
    const s1 = await stats();
    const all = await arrivals(ready.base_url, `${label} `);
    const start = all.find((a) => a.subject.includes(" batch ")).t;
    const inWindows = all.filter((a) => a.t < start + WINDOWS * WINDOW_S * 1000);
    const allowed = WINDOWS * LIMIT;
    const batchUsed = inWindows.filter((a) => a.subject.includes(" batch ")).length / allowed;
    const withReserve = reserve === undefined;
    if (withReserve && (urgentMs > INTERVAL_MS || batchUsed < 0.88 || s1.rest.rateLimited !== s0.rest.rateLimited))
      failed = true;
    rows.push({
      reserve: reserve ?? "default (10%)",
      urgent: `${urgentMs.toFixed(0)} ms`,
      "slot interval": `${INTERVAL_MS} ms`,
      "cli send (waited)": `${cli.ms.toFixed(0)} ms (${JSON.parse(cli.stdout).waited_ms} ms)`,
      "batch used": batchUsed.toFixed(3),
      "all used": (inWindows.length / allowed).toFixed(3),
      "429s": s1.rest.rateLimited - s0.rest.rateLimited,
      stored: `${all.length}/${ROWS + 2}`,
    });
  });
}

try {
  await run("reserve", undefined);
  await run("none", "0");
  console.log(
    `\nBudget classes: a batch of ${ROWS} at ${LIMIT} per ${WINDOW_S} s, an urgent send 2.5 windows in; used over the first ${WINDOWS} windows`,
  );
  console.log(
    `(aim with the reserve: urgent within one slot's interval, ${INTERVAL_MS} ms; batch used >= 0.88; 0 429s)\n`,
  );
  table(rows, ["reserve", "urgent", "slot interval", "cli send (waited)", "batch used", "all used", "429s", "stored"]);
  if (failed) {
    console.error("\nbudget-classes: an aim was missed with the reserve (see the first row)");
    process.exitCode = 1;
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
