// The shared per-key budget, measured in one run against a sandbox with the
// same limit: P shell-style loops of `mailsend send` (one process per message)
// share one key. Reports utilisation of the limit (aim >= 0.95), 429s the
// sandbox saw (aim 0), duplicates (must be 0), and what taking a slot costs
// when the budget is free (aim under 5 ms per message).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { BIN, ROOT, median, runOnce, startSandbox, table } from "./lib.mjs";

const L = Number(process.env.BENCH_LIMIT ?? 10);
const WINDOW_S = Number(process.env.BENCH_WINDOW_S ?? 5);
const P = Number(process.env.BENCH_PROCESSES ?? 4);
const M = Number(process.env.BENCH_MESSAGES ?? 15);

const work = mkdtempSync(join(tmpdir(), "mailsend-bench-rl-"));
const sb = startSandbox(join(work, "sb"), ["--rate-limit", String(L), "--rate-window-ms", String(WINDOW_S * 1000)]);
try {
  const ready = await sb.ready;
  const key = readFileSync(ready.api_key_file, "utf8").trim();
  const env = {
    ...process.env,
    ...ready.env,
    NO_COLOR: "1",
    MAILSEND_API_KEY_FILE: undefined,
    MAILSEND_API_KEY: key,
    MAILSEND_STATE_DIR: join(work, "state"),
    MAILSEND_RATE_LIMIT: String(L),
    MAILSEND_RATE_WINDOW: String(WINDOW_S),
    MAILSEND_RETRIES: "3",
  };
  delete env.MAILSEND_API_KEY_FILE;

  // 1. P loops x M sends sharing the key.
  const statsBefore = await (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
  const loop = async (p) => {
    for (let m = 0; m < M; m++) {
      const r = await runOnce(
        process.execPath,
        [BIN, "send", "-f", "bench@example.com", "-t", "sink@example.com", "-s", `rl p${p} m${m}`, "--text", "x", "-q"],
        { env },
      );
      if (r.code !== 0) throw new Error(`send failed (${r.code}): ${r.stderr}`);
    }
  };
  await Promise.all(Array.from({ length: P }, (_, p) => loop(p)));
  const stats = await (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
  const list = await (await fetch(`${ready.base_url}/api/messages?limit=100000`)).json();
  const messages = (Array.isArray(list) ? list : list.messages).filter((m) => m.subject.startsWith("rl "));
  const times = messages.map((m) => Date.parse(m.receivedAt)).sort((a, b) => a - b);
  const n = P * M;
  // A sliding log lets L through at once, then L per window: the best span from first to last is this.
  const idealSpan = (Math.ceil(n / L) - 1) * WINDOW_S * 1000;
  const span = times[times.length - 1] - times[0];
  const utilisation = idealSpan / span;
  const dupes = messages.length - new Set(messages.map((m) => m.subject)).size;
  console.log(
    `\nShared budget: ${P} processes x ${M} messages, limit ${L} per ${WINDOW_S} s window (sandbox enforces the same)\n`,
  );
  table(
    [
      {
        messages: n,
        stored: messages.length,
        "429s seen": stats.rest.rateLimited - statsBefore.rest.rateLimited,
        duplicates: dupes,
        "first->last s": (span / 1000).toFixed(2),
        "ideal s": (idealSpan / 1000).toFixed(2),
        utilisation: utilisation.toFixed(3),
        aim: utilisation >= 0.95 ? ">= 0.95 OK" : ">= 0.95 MISSED",
      },
    ],
    ["messages", "stored", "429s seen", "duplicates", "first->last s", "ideal s", "utilisation", "aim"],
  );

  // 2. The cost of a slot when the budget is free, in process (take + complete under the file lock).
  const mod = join(ROOT, "node_modules", ".mailsend-bench-limits.mjs");
  await build({
    entryPoints: [join(ROOT, "src/limits/file-store.ts")],
    bundle: true,
    packages: "external",
    format: "esm",
    platform: "node",
    outfile: mod,
    logLevel: "error",
  });
  const { FileSlotStore } = await import(mod);
  rmSync(mod, { force: true });
  const store = new FileSlotStore({ dir: join(work, "slots"), keyHash: "bench" });
  const limits = { limit: 1_000_000, windowMs: 60_000 };
  const ITER = 500;
  const per = [];
  for (let i = 0; i < ITER; i++) {
    const t0 = process.hrtime.bigint();
    await store.tryTake(`s${i}`, limits);
    await store.complete(`s${i}`, limits);
    per.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  // ... and through the whole CLI: a send with the budget on against one with it off,
  // against a second sandbox whose own limit is out of the way.
  const fast = startSandbox(join(work, "sb-fast"), ["--rate-limit", "100000000"]);
  const fastReady = await fast.ready;
  const fastEnv = { ...env, ...fastReady.env, MAILSEND_API_KEY: readFileSync(fastReady.api_key_file, "utf8").trim() };
  delete fastEnv.MAILSEND_API_KEY_FILE;
  const cli = async (limit) => {
    const ms = [];
    for (let i = 0; i < 5; i++) {
      const r = await runOnce(
        process.execPath,
        [BIN, "send", "-f", "a@example.com", "-t", "b@example.com", "-s", "o", "--text", "x", "-q"],
        { env: { ...fastEnv, MAILSEND_RATE_LIMIT: String(limit), MAILSEND_STATE_DIR: join(work, `state-${limit}`) } },
      );
      if (r.code !== 0) throw new Error(r.stderr);
      ms.push(r.ms);
    }
    return median(ms);
  };
  let off = [];
  let on = [];
  // Interleaved, so machine noise falls on both alike.
  for (let round = 0; round < 3; round++) {
    off.push(await cli(0));
    on.push(await cli(1_000_000));
  }
  off = median(off);
  on = median(on);
  await fast.stop();
  console.log(`\nTaking a slot when the budget is free\n`);
  const rows = [
    {
      what: `take + complete, in process (median of ${ITER}, file lock + rename)`,
      ms: median(per).toFixed(3),
      "aim < 5 ms": median(per) < 5 ? "OK" : "MISSED",
    },
  ];
  rows.push({
    what: `whole \`mailsend send\` with the budget on (${on.toFixed(1)} ms) minus off (${off.toFixed(1)} ms)`,
    ms: (on - off).toFixed(1),
    "aim < 5 ms": on - off < 5 ? "OK" : "MISSED (noise: see the in-process row)",
  });
  table(rows, ["what", "ms", "aim < 5 ms"]);
} finally {
  await sb.stop();
  rmSync(work, { recursive: true, force: true });
}
