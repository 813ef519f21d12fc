// `mailsend batch` throughput and memory, against a `mailsend sandbox` child
// whose rate limit is set out of the way:
//  - messages per second for N small messages (default 2,000) over REST and
//    over SMTP, for a few --concurrency settings; whole process (start-up and
//    the validation pass included), and the sending phase alone (first to last
//    message stored by the sandbox);
//  - (a) a shell loop of `mailsend send` for the same messages: a sample of
//    S sends is timed and extrapolated per message (said so in the table);
//  - (b) the sandbox's own REST ceiling: autocannon, the same payload, a fresh
//    Idempotency-Key per request as the batch sends it. The machine is shared,
//    so the ceiling is measured again in every round, just before that round's
//    batches, and each round's ratio uses its own ceiling;
//  - peak RSS of `mailsend batch --check` for 100,000 rows, and of real sends
//    of growing size.
// Aims: REST batch >= 0.6 x ceiling and >= 30 x the shell loop;
// peak RSS for 100,000 rows under 150 MB.
// Knobs: BENCH_BATCH_N, BENCH_BATCH_SAMPLE, BENCH_BATCH_REST_C / _SMTP_C
// (comma lists), BENCH_BATCH_ROUNDS, BENCH_BATCH_MEM_SEND (rows of the
// largest real send, default 20000; 100000 takes a few minutes).
import autocannon from "autocannon";
import { cpus, loadavg, tmpdir } from "node:os";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import nodemailer from "nodemailer";
import { BIN, median, runOnce, startSandbox, table } from "./lib.mjs";

const N = Number(process.env.BENCH_BATCH_N ?? 2000);
const SAMPLE = Number(process.env.BENCH_BATCH_SAMPLE ?? 50);
const REST_C = (process.env.BENCH_BATCH_REST_C ?? "8,16,32,64").split(",").map(Number);
const SMTP_C = (process.env.BENCH_BATCH_SMTP_C ?? "4,8,16").split(",").map(Number);
const ROUNDS = Number(process.env.BENCH_BATCH_ROUNDS ?? 3);
const MEM_ROWS = 100_000;
const MEM_SEND = Number(process.env.BENCH_BATCH_MEM_SEND ?? 20_000);
const CEILING_SECONDS = 3;

const FROM = "bench@example.com";
const TO = "Someone <someone@example.com>";
const HTML = "<p>Hello from the benchmark.</p>";
const request = (subject) => ({ from: FROM, to: TO, subject, html: HTML });

const loads = [loadavg()[0]];
const work = mkdtempSync(join(tmpdir(), "mailsend-bench-batch-"));
const sb = startSandbox(join(work, "sb"), ["--rate-limit", "100000000"]);
let runId = 0;

function writeInput(name, n, prefix) {
  const path = join(work, name);
  const lines = [];
  for (let i = 0; i < n; i++) lines.push(JSON.stringify(request(`${prefix} ${i}`)));
  writeFileSync(path, `${lines.join("\n")}\n`);
  return path;
}

const best = (xs, f) => xs.reduce((a, b) => (f(b) > f(a) ? b : a));

try {
  const ready = await sb.ready;
  const key = readFileSync(ready.api_key_file, "utf8").trim();
  const env = {
    ...process.env,
    ...ready.env,
    NO_COLOR: "1",
    MAILSEND_STATE_DIR: join(work, "state"),
    // The sandbox will not refuse: the local budget and retries stay out of the measurement.
    MAILSEND_RATE_LIMIT: "0",
    MAILSEND_RETRIES: "0",
  };
  const stats = async () => (await fetch(`${ready.base_url}/_sandbox/stats`)).json();

  /**
   * One `mailsend batch` of n fresh messages (a subject prefix of its own, a new journal).
   * rate: whole process; sendingRate: first to last message stored by the sandbox.
   */
  const batch = async (n, transport, c) => {
    const id = runId++;
    const prefix = `b${id}`;
    const input = writeInput(`in-${id}.jsonl`, n, prefix);
    const s0 = await stats();
    const r = await runOnce(
      process.execPath,
      [
        BIN,
        "batch",
        input,
        "--transport",
        transport,
        "--concurrency",
        String(c),
        "--journal",
        join(work, `journal-${id}`),
        "--quiet",
      ],
      { env },
    );
    if (r.code !== 0) throw new Error(`batch (${transport}, -c ${c}) exited ${r.code}: ${r.stderr.slice(0, 500)}`);
    const s1 = await stats();
    const stored = s1[transport].accepted - s0[transport].accepted;
    if (stored !== n) throw new Error(`batch (${transport}, -c ${c}) stored ${stored} of ${n}`);
    // The sandbox's own index (its API lists at most 1,000): when each message was stored.
    const times = [];
    for (const line of readFileSync(join(work, "sb", "index.jsonl"), "utf8").split("\n")) {
      if (line.includes(`"subject":"${prefix} `)) times.push(Date.parse(JSON.parse(line).receivedAt));
    }
    const sendingRate = times.length === n ? (n - 1) / ((Math.max(...times) - Math.min(...times)) / 1000) : undefined;
    rmSync(input);
    return { c, ms: r.ms, rate: n / (r.ms / 1000), sendingRate, rssMB: r.rssKB / 1024 };
  };

  /** The sandbox's REST ceiling now: the best of 32 and 64 autocannon connections. */
  const ceiling = async () => {
    let top = { rate: 0 };
    for (const connections of [32, 64]) {
      let n = 0;
      const s0 = await stats();
      const r = await autocannon({
        url: `${ready.base_url}/send`,
        method: "POST",
        connections,
        duration: CEILING_SECONDS,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(request("ceiling")),
        requests: [
          {
            setupRequest: (req) => ({
              ...req,
              headers: { ...req.headers, "idempotency-key": `ceiling-${runId}-${connections}-${n++}` },
            }),
          },
        ],
      });
      const s1 = await stats();
      const rate = (s1.rest.accepted - s0.rest.accepted) / r.duration;
      if (rate > top.rate) top = { rate, connections };
    }
    // Requests still in flight when autocannon stopped: let them land before the next count.
    for (let last = -1, now = (await stats()).rest.accepted; now !== last; now = (await stats()).rest.accepted) {
      last = now;
      await new Promise((r) => setTimeout(r, 200));
    }
    return top;
  };

  // Warm the sandbox (JIT, first files), autocannon and the page cache for the CLI.
  await batch(300, "rest", 16);
  await batch(300, "smtp", 8);
  await ceiling();

  // REST: rounds of (ceiling, then each --concurrency), so every ratio compares like with like.
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const top = await ceiling();
    const runs = [];
    for (const c of REST_C) runs.push(await batch(N, "rest", c));
    rounds.push({ ceiling: top, runs });
    loads.push(loadavg()[0]);
  }
  const rows = [];
  for (const c of REST_C) {
    const mine = rounds.map((r) => r.runs.find((x) => x.c === c));
    const med = (f) => median(mine.map(f));
    rows.push({
      what: `mailsend batch, REST, --concurrency ${c}`,
      messages: N,
      "wall s": (N / med((x) => x.rate)).toFixed(2),
      "messages/s": Math.round(med((x) => x.rate)),
      "sending phase msg/s": Math.round(med((x) => x.sendingRate ?? 0)),
      "peak RSS MB": Math.round(med((x) => x.rssMB)),
    });
  }
  const restBestC = best(REST_C, (c) => median(rounds.map((r) => r.runs.find((x) => x.c === c).rate)));
  const ceilings = rounds.map((r) => r.ceiling.rate);
  rows.push({
    what: `sandbox REST ceiling: autocannon, best of 32/64 connections, ${CEILING_SECONDS} s (${ceilings.map(Math.round).join(" / ")})`,
    messages: "-",
    "wall s": "-",
    "messages/s": Math.round(median(ceilings)),
    "sending phase msg/s": "-",
    "peak RSS MB": "-",
  });

  // SMTP: each --concurrency, best of the rounds.
  const smtpRuns = [];
  for (let r = 0; r < ROUNDS; r++) for (const c of SMTP_C) smtpRuns.push(await batch(N, "smtp", c));
  for (const c of SMTP_C) {
    const mine = smtpRuns.filter((x) => x.c === c);
    rows.push({
      what: `mailsend batch, SMTP, --concurrency ${c}`,
      messages: N,
      "wall s": (N / median(mine.map((x) => x.rate))).toFixed(2),
      "messages/s": Math.round(median(mine.map((x) => x.rate))),
      "sending phase msg/s": Math.round(median(mine.map((x) => x.sendingRate ?? 0))),
      "peak RSS MB": Math.round(median(mine.map((x) => x.rssMB))),
    });
  }
  const smtpBestC = best(SMTP_C, (c) => median(smtpRuns.filter((x) => x.c === c).map((x) => x.rate)));
  const smtpBest = median(smtpRuns.filter((x) => x.c === smtpBestC).map((x) => x.rate));

  // For scale only: the SMTP side with nodemailer's own pool, in this process.
  const smtp = nodemailer.createTransport({
    pool: true,
    maxConnections: smtpBestC,
    maxMessages: Infinity,
    host: ready.smtp.host,
    port: ready.smtp.port,
    secure: false,
    requireTLS: true,
    auth: { user: "mailsend", pass: key, method: "LOGIN" },
    tls: { ca: readFileSync(ready.ca_file, "utf8") },
  });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      smtp.sendMail({
        from: FROM,
        to: TO,
        subject: `pool ${i}`,
        html: HTML,
        headers: { "X-Idempotency-Key": `pool-${i}` },
      }),
    ),
  );
  const smtpPool = N / ((performance.now() - t0) / 1000);
  smtp.close();
  rows.push({
    what: `sandbox SMTP: nodemailer pool of ${smtpBestC}, in-process`,
    messages: N,
    "wall s": (N / smtpPool).toFixed(2),
    "messages/s": Math.round(smtpPool),
    "sending phase msg/s": "-",
    "peak RSS MB": "-",
  });

  // (a) The shell loop: one process (start-up, connection, TLS, AUTH) per message.
  const loop = {};
  for (const transport of ["rest", "smtp"]) {
    const script = `i=0; while [ "$i" -lt ${SAMPLE} ]; do "$NODE" "$BIN" send --transport ${transport} -f ${FROM} -t "${TO}" -s "loop ${transport} $i" --html '${HTML}' -q || exit 1; i=$((i+1)); done`;
    const r = await runOnce("sh", ["-c", script], { env: { ...env, NODE: process.execPath, BIN } });
    if (r.code !== 0) throw new Error(`shell loop (${transport}) exited ${r.code}: ${r.stderr.slice(0, 500)}`);
    const perMessage = r.ms / SAMPLE;
    loop[transport] = 1000 / perMessage;
    rows.push({
      what: `shell loop of mailsend send, ${transport.toUpperCase()} (${SAMPLE} timed, ${N} extrapolated)`,
      messages: N,
      "wall s": ((perMessage * N) / 1000).toFixed(1),
      "messages/s": (1000 / perMessage).toFixed(1),
      "sending phase msg/s": "-",
      "peak RSS MB": "-",
    });
  }
  loads.push(loadavg()[0]);

  console.log(
    `mailsend batch: ${N} small messages; medians of ${ROUNDS} rounds (${cpus().length} CPUs shared by the CLI, the sandbox and autocannon; load average ${loads.map((l) => l.toFixed(1)).join(" -> ")})\n`,
  );
  table(rows, ["what", "messages", "wall s", "messages/s", "sending phase msg/s", "peak RSS MB"]);

  const perRound = (f) => rounds.map((r) => f(r.runs.find((x) => x.c === restBestC)) / r.ceiling.rate);
  const whole = perRound((x) => x.rate);
  const sending = perRound((x) => x.sendingRate ?? 0);
  const restBest = median(rounds.map((r) => r.runs.find((x) => x.c === restBestC).rate));
  const span = (xs) => `${median(xs).toFixed(2)} (rounds: ${xs.map((x) => x.toFixed(2)).join(", ")})`;
  console.log("");
  table(
    [
      {
        ratio: `REST batch (--concurrency ${restBestC}, the best) / sandbox REST ceiling, whole process`,
        value: span(whole),
        aim: ">= 0.6",
      },
      {
        ratio: `REST batch (--concurrency ${restBestC}) / sandbox REST ceiling, sending phase only`,
        value: span(sending),
        aim: "-",
      },
      {
        ratio: `REST batch (--concurrency ${restBestC}) / shell loop of send (REST)`,
        value: `${(restBest / loop.rest).toFixed(0)}x`,
        aim: ">= 30x",
      },
      {
        ratio: `SMTP batch (--concurrency ${smtpBestC}, the best) / nodemailer pool`,
        value: (smtpBest / smtpPool).toFixed(2),
        aim: "-",
      },
      {
        ratio: `SMTP batch (--concurrency ${smtpBestC}) / shell loop of send (SMTP)`,
        value: `${(smtpBest / loop.smtp).toFixed(0)}x`,
        aim: "-",
      },
    ],
    ["ratio", "value", "aim"],
  );

  // Memory: the input is streamed; what is kept does not grow with the rows.
  const memRows = [];
  const big = writeInput("big.jsonl", MEM_ROWS, "check");
  const check = await runOnce(process.execPath, [BIN, "batch", big, "--check", "--quiet"], { env });
  if (check.code !== 0) throw new Error(`--check exited ${check.code}: ${check.stderr.slice(0, 500)}`);
  memRows.push({
    what: `mailsend batch --check, ${MEM_ROWS.toLocaleString("en")} rows`,
    "wall s": (check.ms / 1000).toFixed(1),
    "peak RSS MB": Math.round(check.rssKB / 1024),
    aim: "< 150",
  });
  for (const n of [...new Set([N, MEM_SEND])]) {
    const r = await batch(n, "rest", restBestC);
    memRows.push({
      what: `mailsend batch, REST, ${n.toLocaleString("en")} rows sent, --concurrency ${restBestC}`,
      "wall s": (r.ms / 1000).toFixed(1),
      "peak RSS MB": Math.round(r.rssMB),
      aim: n >= MEM_ROWS ? "< 150" : "-",
    });
  }
  console.log("");
  table(memRows, ["what", "wall s", "peak RSS MB", "aim"]);
} finally {
  await sb.stop();
  rmSync(work, { recursive: true, force: true });
}
