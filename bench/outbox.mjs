// The outbox: (1) the share of the budget used while one runner drains N
// queued messages at a limit of L per window (aim >= 0.95, 0 429s, each
// message once); (2) peak RSS of the runner with 100,000 queued messages
// (aim < 150 MB); (3) `mailsend sendmail` when it queues, against `node -e 0`
// (aim <= 1.5x), when the sendmail command is built.
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { BIN, compare, runOnce, startSandbox, table } from "./lib.mjs";

const N = Number(process.env.BENCH_OUTBOX_MESSAGES ?? 1000);
const L = Number(process.env.BENCH_OUTBOX_LIMIT ?? 600);
const WINDOW_S = Number(process.env.BENCH_OUTBOX_WINDOW_S ?? 60);
const BIG = Number(process.env.BENCH_OUTBOX_BIG ?? 100_000);

let seq = 0;
/** Queue files as the outbox writes them (without the fsyncs: this is set-up, not the thing measured). */
function seed(dir, n, prefix) {
  const q = join(dir, "queue");
  for (const d of [q, join(dir, "failed"), join(dir, "tmp")]) mkdirSync(d, { recursive: true });
  const t = Date.now().toString(36).padStart(9, "0");
  for (let i = 0; i < n; i++) {
    const id = `${t}${(seq++ % 1296).toString(36).padStart(2, "0")}${(0x10000000 + i).toString(16).slice(-8)}`;
    const subject = `${prefix} ${i}`;
    const raw = `From: bench@example.com\r\nTo: sink@example.com\r\nSubject: ${subject}\r\nMessage-ID: <${id}@example.com>\r\n\r\n<p>${subject}</p>\r\n`;
    const meta = {
      v: 1,
      id,
      createdAt: Date.now(),
      envelope: { from: "bench@example.com", to: ["sink@example.com"] },
      idempotencyKey: randomUUID(),
      source: "sendmail",
      size: raw.length,
      subject,
    };
    writeFileSync(join(q, `${id}.msg`), `${JSON.stringify(meta)}\n${raw}`);
  }
}

const work = mkdtempSync(join(tmpdir(), "mailsend-bench-outbox-"));
const sb = startSandbox(join(work, "sb"), ["--rate-limit", String(L), "--rate-window-ms", String(WINDOW_S * 1000)]);
try {
  const ready = await sb.ready;
  const key = readFileSync(ready.api_key_file, "utf8").trim();
  const env = {
    ...process.env,
    ...ready.env,
    NO_COLOR: "1",
    MAILSEND_API_KEY: key,
    MAILSEND_STATE_DIR: join(work, "state"),
    MAILSEND_RATE_LIMIT: String(L),
    MAILSEND_RATE_WINDOW: String(WINDOW_S),
    MAILSEND_QUEUE_AUTORUN: "0",
  };
  delete env.MAILSEND_API_KEY_FILE;

  // 1. Drain N at L per window.
  const box = join(work, "outbox-drain");
  seed(box, N, "drain");
  const before = await (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
  const drain = await runOnce(process.execPath, [BIN, "queue", "run", "--drain", "--json", "--concurrency", "8"], {
    env: { ...env, MAILSEND_OUTBOX_DIR: box },
  });
  if (drain.code !== 0) throw new Error(`queue run exited ${drain.code}: ${drain.stderr.slice(0, 500)}`);
  const stats = await (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
  const list = await (await fetch(`${ready.base_url}/api/messages?limit=1000000`)).json();
  const messages = (Array.isArray(list) ? list : list.messages).filter((m) => m.subject.startsWith("drain "));
  const times = messages.map((m) => Date.parse(m.receivedAt)).sort((a, b) => a - b);
  // What the budget allows, given how fast the first window's messages actually went out: a
  // sliding log lets message k (k >= L) go a window after message k-L. The share of the budget
  // used is that best span over the span measured; the lag is how long after its slot freed a
  // message reached the service.
  const W = WINDOW_S * 1000;
  const best = [];
  for (let k = 0; k < times.length; k++) best.push(k < L ? times[k] : Math.max(best[k - 1], best[k - L] + W));
  const idealSpan = best.at(-1) - times[0];
  const span = times.at(-1) - times[0];
  const share = span === 0 ? 1 : idealSpan / span;
  const lags = times
    .slice(L)
    .map((t, i) => t - (times[i] + W))
    .sort((a, b) => a - b);
  const lagP50 = lags.length ? lags[lags.length >> 1] : 0;
  const lagP90 = lags.length ? lags[Math.floor(lags.length * 0.9)] : 0;
  console.log(
    `\nOutbox drain: ${N} queued messages, limit ${L} per ${WINDOW_S} s (the sandbox enforces the same), one runner, 8 in flight\n`,
  );
  table(
    [
      {
        queued: N,
        stored: messages.length,
        distinct: new Set(messages.map((m) => m.subject)).size,
        "429s": stats.rest.rateLimited - before.rest.rateLimited,
        "ideal span s": (idealSpan / 1000).toFixed(1),
        "span s": (span / 1000).toFixed(1),
        "budget used": share.toFixed(3),
        "lag after slot frees p50/p90 ms": `${lagP50}/${lagP90}`,
        aim: ">= 0.95, 0 429s",
        "runner peak RSS MB": (drain.rssKB / 1024).toFixed(0),
      },
    ],
    [
      "queued",
      "stored",
      "distinct",
      "429s",
      "ideal span s",
      "span s",
      "budget used",
      "lag after slot frees p50/p90 ms",
      "aim",
      "runner peak RSS MB",
    ],
  );

  // 2. The runner's memory with BIG queued: it lists and schedules them all, and delivers for a while.
  const bigBox = join(work, "outbox-big");
  seed(bigBox, BIG, "big");
  // Its own sandbox, without a limit: the first one's budget is used up by the drain.
  const open = startSandbox(join(work, "sb-open"), ["--rate-limit", "10000000"]);
  const openReady = await open.ready;
  const openEnv = {
    ...env,
    ...openReady.env,
    MAILSEND_API_KEY: readFileSync(openReady.api_key_file, "utf8").trim(),
    MAILSEND_OUTBOX_DIR: bigBox,
    MAILSEND_RATE_LIMIT: "0",
  };
  delete openEnv.MAILSEND_API_KEY_FILE;
  const child = spawn(process.execPath, [BIN, "queue", "run", "--quiet"], { env: openEnv, stdio: "ignore" });
  let hwm = 0;
  let cpuS = 0;
  const t0 = Date.now();
  await new Promise((resolve) => {
    const poll = setInterval(() => {
      try {
        const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
        if (m) hwm = Math.max(hwm, Number(m[1]));
        // utime + stime, in clock ticks (100 a second on Linux): the machine's load changes how much is delivered in 30 s, not this per message.
        const stat = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1].split(" ");
        cpuS = (Number(stat[11]) + Number(stat[12])) / 100;
      } catch {}
      if (Date.now() - t0 > 30_000) {
        clearInterval(poll);
        child.kill("SIGKILL");
        resolve();
      }
    }, 50);
    child.on("exit", () => {
      clearInterval(poll);
      resolve();
    });
  });
  await open.stop();
  const left = (await import("node:fs")).readdirSync(join(bigBox, "queue")).filter((f) => f.endsWith(".msg")).length;
  console.log(`\nOutbox runner with ${BIG} queued messages (30 s of delivery, no rate limit)\n`);
  table(
    [
      {
        queued: BIG,
        "delivered in 30 s": BIG - left,
        "runner CPU s": cpuS.toFixed(1),
        "peak RSS MB": (hwm / 1024).toFixed(0),
        aim: "< 150 MB",
        load: readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "),
      },
    ],
    ["queued", "delivered in 30 s", "runner CPU s", "peak RSS MB", "aim", "load"],
  );

  // 3. sendmail when it queues, against node -e 0.
  const probe = await runOnce(process.execPath, [BIN, "sendmail", "--help"], { env });
  if (probe.code === 0) {
    const qenv = { ...env, MAILSEND_OUTBOX_DIR: join(work, "outbox-sendmail"), MAILSEND_QUEUE: "always" };
    const input = "From: cron@example.com\nTo: sink@example.com\nSubject: queued\n\nbody\n";
    const rows = await compare(
      [
        // In the same environment (NODE_EXTRA_CA_CERTS from the sandbox's lines makes any Node start dearer).
        { name: "node -e 0", cmd: process.execPath, args: ["-e", "0"], env: qenv },
        { name: "sendmail -t (queues)", cmd: process.execPath, args: [BIN, "sendmail", "-t", "-i"], env: qenv, input },
      ],
      Number(process.env.BENCH_RUNS ?? 10),
    );
    console.log(
      `\nsendmail when it queues (--queue always), whole process, median of ${process.env.BENCH_RUNS ?? 10}\n`,
    );
    table(
      rows.map((r) => ({
        what: r.name,
        ms: r.ms.toFixed(0),
        "RSS MB": r.rssMB.toFixed(0),
        ratio: `${(r.ms / rows[0].ms).toFixed(2)}x`,
      })),
      ["what", "ms", "RSS MB", "ratio"],
    );
    console.log("aim: <= 1.5x");
  } else {
    console.log("\n(sendmail is not built yet: its timing is skipped)");
  }
} finally {
  await sb.stop();
  rmSync(work, { recursive: true, force: true });
}
