// The speed table: each of mailsend's figures beside the floor it is measured against, both
// measured in the same run, interleaved (ours, floor, ours, floor, ...) so machine noise falls
// on both alike; medians. Whole processes, wall clock. Run under this Node and, when one is
// found, Node 24 as well (BENCH_NODE24=/path/to/node, else the binary .ci/run installs into
// ~/.cache/mailsend-ci/node24).
//
//  - one REST send / a bare node:http POST of the same request (aim <= 1.3x)
//  - one SMTP send / a bare nodemailer send of the same message, STARTTLS + AUTH LOGIN (<= 1.1x)
//  - mailsend --version / node -e 0 (<= 1.15x); send --dry-run / node -e 0 (<= 1.5x)
//  - batch REST, N messages at -c 32 / a bare node:http keep-alive client making the same N
//    POSTs 32 at a time, both reading the same JSON lines (rate ratio, aim >= 0.85)
//  - the budget: 4 processes x 15 sends sharing a limit of 10 per 5 s: share of the limit used
//    (aim >= 0.97) and 429s seen (aim 0); beside it, the most any client of one process per send
//    could use here: the span is at least the windows plus the time the first 10 arrivals took,
//    measured for bare node:http POST processes in the same loops with no budget at all
// The floors are plain CommonJS scripts (require is the cheapest way to load node:http).
// Wall-clock ratios are the aims; each row also gives the CPU ratio (user + system, GNU time),
// which a machine loaded by other work moves less.
// Knobs: BENCH_RUNS (default 11), BENCH_BATCH_N (1500), BENCH_BATCH_ROUNDS (7; with 3 the batch row's
// median moved by up to 0.1 from run to run on a shared machine), BENCH_NODE24,
// BENCH_ONLY (a comma list of rows to measure: startup, send, batch, budget; default all).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, homedir, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, ROOT, median, runOnce as runOnceLib, startSandbox, table } from "./lib.mjs";

const GNU_TIME = existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined;

/**
 * One run: wall ms and, with GNU time, the CPU ms (user + system) of the process and its
 * children. On a shared, loaded machine the CPU figure moves less than the wall clock: both
 * ratios are printed.
 */
function runOnce(cmd, args, { env = process.env } = {}) {
  if (!GNU_TIME) return runOnceLib(cmd, args, { env });
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(GNU_TIME, ["-f", "__CPU__%U %S", cmd, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      const m = /__CPU__([\d.]+) ([\d.]+)/.exec(stderr);
      resolve({
        ms,
        cpuMs: m ? (Number(m[1]) + Number(m[2])) * 1000 : undefined,
        code,
        stdout,
        stderr: stderr.replace(/.*__CPU__.*\n?/, ""),
      });
    });
  });
}
const cpuMedian = (xs) => (xs.every((x) => x !== undefined) ? median(xs) : undefined);

const RUNS = Number(process.env.BENCH_RUNS ?? 11);
const N = Number(process.env.BENCH_BATCH_N ?? 1500);
const ROUNDS = Number(process.env.BENCH_BATCH_ROUNDS ?? 7);
const C = 32;
const ONLY = process.env.BENCH_ONLY?.split(",").map((s) => s.trim());
const want = (part) => !ONLY || ONLY.includes(part);
const BUDGET = { limit: 10, windowS: 5, processes: 4, messages: 15 };

const FROM = "bench@example.com";
const TO = "someone@example.com";
const HTML = "<p>Hello from the benchmark.</p>";

function node24() {
  if (process.env.BENCH_NODE24) return existsSync(process.env.BENCH_NODE24) ? process.env.BENCH_NODE24 : undefined;
  const dir = join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "mailsend-ci", "node24", "node_modules");
  const platform = `node-${process.platform}-${process.arch}`;
  return [join(dir, "node", "bin", "node"), join(dir, platform, "bin", "node")].find((p) => existsSync(p));
}

const work = mkdtempSync(join(tmpdir(), "mailsend-bench-speed-"));
const loads = [loadavg()[0]];

// The floors: what a script doing only the same work costs.
const nodemailerPath = JSON.stringify(join(ROOT, "node_modules", "nodemailer"));
const FLOOR_POST = join(work, "post.cjs");
writeFileSync(
  FLOOR_POST,
  `const http = require("node:http");
const { randomUUID } = require("node:crypto");
const body = JSON.stringify({ from: ${JSON.stringify(FROM)}, to: ${JSON.stringify(TO)}, subject: process.env.SUBJECT, html: ${JSON.stringify(HTML)} });
const req = http.request(process.env.BASE_URL + "/send", { method: "POST", headers: { authorization: "Bearer " + process.env.KEY, "content-type": "application/json", "content-length": Buffer.byteLength(body), "idempotency-key": randomUUID(), "user-agent": "bench" } }, (res) => {
  let s = "";
  res.setEncoding("utf8");
  res.on("data", (d) => (s += d));
  res.on("end", () => { if (res.statusCode !== 200) { console.error(res.statusCode, s); process.exitCode = 1; } else console.log(JSON.parse(s).id ?? s); });
});
req.on("error", (e) => { console.error(e.message); process.exitCode = 1; });
req.end(body);
`,
);
const FLOOR_SMTP = join(work, "smtp.cjs");
writeFileSync(
  FLOOR_SMTP,
  `const nodemailer = require(${nodemailerPath});
const { randomUUID } = require("node:crypto");
const t = nodemailer.createTransport({ host: process.env.SMTP_HOST, port: Number(process.env.SMTP_PORT), secure: false, requireTLS: true, auth: { user: "mailsend", pass: process.env.KEY, method: "LOGIN" }, tls: { ca: require("node:fs").readFileSync(process.env.CA_FILE, "utf8") } });
t.sendMail({ from: ${JSON.stringify(FROM)}, to: ${JSON.stringify(TO)}, subject: process.env.SUBJECT, text: "ok", headers: { "X-Idempotency-Key": randomUUID() } })
  .then((info) => console.log(info.messageId), (e) => { console.error(e.message); process.exitCode = 1; });
`,
);
const FLOOR_BATCH = join(work, "keepalive.cjs");
writeFileSync(
  FLOOR_BATCH,
  `const http = require("node:http");
const { randomUUID } = require("node:crypto");
const { readFileSync } = require("node:fs");
const rows = readFileSync(process.env.INPUT, "utf8").split("\\n").filter(Boolean).map((l) => JSON.parse(l));
const agent = new http.Agent({ keepAlive: true, maxSockets: ${C} });
const url = new URL(process.env.BASE_URL + "/send");
let next = 0;
let failed = 0;
const one = (row) => new Promise((resolve) => {
  const body = JSON.stringify(row);
  const req = http.request(url, { agent, method: "POST", headers: { authorization: "Bearer " + process.env.KEY, "content-type": "application/json", "content-length": Buffer.byteLength(body), "idempotency-key": randomUUID() } }, (res) => {
    let s = "";
    res.setEncoding("utf8");
    res.on("data", (d) => (s += d));
    res.on("end", () => { if (res.statusCode !== 200) failed++; resolve(); });
  });
  req.on("error", () => { failed++; resolve(); });
  req.end(body);
});
const worker = async () => { while (next < rows.length) await one(rows[next++]); };
Promise.all(Array.from({ length: ${C} }, worker)).then(() => { agent.destroy(); if (failed) { console.error(failed + " failed"); process.exitCode = 1; } });
`,
);

/** Interleaved runs of [ours, floor]; medians of each, in ms. */
async function pair(ours, floor, runs = RUNS) {
  const a = [];
  const b = [];
  const ac = [];
  const bc = [];
  for (let i = -1; i < runs; i++) {
    for (const [c, into, cpu] of [
      [ours, a, ac],
      [floor, b, bc],
    ]) {
      const args = typeof c.args === "function" ? c.args(i) : c.args;
      const env = typeof c.env === "function" ? c.env(i) : c.env;
      const r = await runOnce(c.cmd, args, { env });
      if (r.code !== 0) throw new Error(`${c.cmd} ${args.join(" ")} exited ${r.code}: ${r.stderr.slice(0, 500)}`);
      // Run -1 warms the page cache (and Node 24's compile cache).
      if (i >= 0) {
        into.push(r.ms);
        cpu.push(r.cpuMs);
      }
    }
  }
  return { ours: median(a), floor: median(b), oursCpu: cpuMedian(ac), floorCpu: cpuMedian(bc) };
}

function writeInput(path, n, prefix) {
  const lines = [];
  for (let i = 0; i < n; i++) lines.push(JSON.stringify({ from: FROM, to: TO, subject: `${prefix} ${i}`, html: HTML }));
  writeFileSync(path, `${lines.join("\n")}\n`);
}

async function measure(node, label) {
  const rows = [];
  const row = (what, floorName, m, aim, better) => {
    const ratio = m.ours / m.floor;
    const ok = better === "lower" ? ratio <= aim : ratio >= aim;
    const cpu =
      m.oursCpu !== undefined && m.floorCpu !== undefined
        ? `${(better === "lower" ? m.oursCpu / m.floorCpu : m.floorCpu / m.oursCpu).toFixed(2)} (${Math.round(m.oursCpu)} / ${Math.round(m.floorCpu)} ms)`
        : "-";
    rows.push({
      what,
      ours: m.oursText ?? `${m.ours.toFixed(1)} ms`,
      floor: `${floorName}: ${m.floorText ?? `${m.floor.toFixed(1)} ms`}`,
      ratio: `${ratio.toFixed(2)}${better === "lower" ? "x" : ""}`,
      aim: `${better === "lower" ? "<=" : ">="} ${aim}${better === "lower" ? "x" : ""}`,
      "": ok ? "OK" : "MISSED",
      "CPU ratio (ours / floor)": cpu,
    });
  };
  const sbDir = join(work, `sb-${label}`);
  const sb = startSandbox(sbDir, ["--rate-limit", "100000000"]);
  try {
    const ready = await sb.ready;
    const key = readFileSync(ready.api_key_file, "utf8").trim();
    const env = {
      ...process.env,
      ...ready.env,
      NO_COLOR: "1",
      MAILSEND_STATE_DIR: join(work, `state-${label}`),
      // The budget is on (its lock is part of a send) but never makes anyone wait here.
      MAILSEND_RATE_LIMIT: "1000000",
      MAILSEND_RETRIES: "0",
    };
    // The floors run in the same environment as mailsend: what the sandbox's export lines set
    // is part of the machine, not of mailsend. NODE_EXTRA_CA_CERTS among them makes Node itself
    // start OpenSSL and read the CA at start-up, before any code of ours runs.
    const floorEnv = {
      ...env,
      BASE_URL: ready.base_url,
      KEY: key,
      SMTP_HOST: ready.smtp.host,
      SMTP_PORT: String(ready.smtp.port),
      CA_FILE: ready.ca_file,
    };

    // Start-up.
    if (want("startup")) {
      const dry = ["send", "--dry-run", "-f", FROM, "-t", TO, "-s", "Build passed", "--text", "ok"];
      const floor0 = { cmd: node, args: ["-e", "0"], env };
      row(
        "mailsend --version",
        "node -e 0",
        await pair({ cmd: node, args: [BIN, "--version"], env }, floor0),
        1.15,
        "lower",
      );
      row(
        "mailsend send --dry-run",
        "node -e 0",
        await pair({ cmd: node, args: [BIN, ...dry], env }, floor0),
        1.5,
        "lower",
      );
    }

    // One send each way, against the sandbox.
    if (want("send")) {
      const subject = (i) => `one ${label} ${i}`;
      row(
        "one REST send",
        "bare node:http POST",
        await pair(
          {
            cmd: node,
            args: (i) => [
              BIN,
              "send",
              "--transport",
              "rest",
              "-f",
              FROM,
              "-t",
              TO,
              "-s",
              subject(i),
              "--html",
              HTML,
              "-q",
            ],
            env,
          },
          { cmd: node, args: [FLOOR_POST], env: (i) => ({ ...floorEnv, SUBJECT: `floor ${subject(i)}` }) },
        ),
        1.3,
        "lower",
      );
      row(
        "one SMTP send (STARTTLS, AUTH LOGIN)",
        "bare nodemailer send",
        await pair(
          {
            cmd: node,
            args: (i) => [
              BIN,
              "send",
              "--transport",
              "smtp",
              "-f",
              FROM,
              "-t",
              TO,
              "-s",
              subject(i),
              "--text",
              "ok",
              "-q",
            ],
            env,
          },
          { cmd: node, args: [FLOOR_SMTP], env: (i) => ({ ...floorEnv, SUBJECT: `floor ${subject(i)}` }) },
        ),
        1.1,
        "lower",
      );
    }

    // Batch: fresh subjects every run (the sandbox answers a repeated Idempotency-Key from its cache).
    if (want("batch")) {
      const ours = [];
      const floor = [];
      const oursCpu = [];
      const floorCpu = [];
      for (let r = -1; r < ROUNDS; r++) {
        const a = join(work, `batch-${label}-${r}.jsonl`);
        writeInput(a, N, `batch ${label} ${r}`);
        // The budget off, as in bench/batch.mjs: the floor has none either.
        const x = await runOnce(
          node,
          [
            BIN,
            "batch",
            a,
            "--transport",
            "rest",
            "--concurrency",
            String(C),
            "--journal",
            join(work, `journal-${label}-${r}`),
            "--quiet",
          ],
          { env: { ...env, MAILSEND_RATE_LIMIT: "0" } },
        );
        if (x.code !== 0) throw new Error(`batch exited ${x.code}: ${x.stderr.slice(0, 500)}`);
        const b = join(work, `floor-${label}-${r}.jsonl`);
        writeInput(b, N, `floor batch ${label} ${r}`);
        const y = await runOnce(node, [FLOOR_BATCH], { env: { ...floorEnv, INPUT: b } });
        if (y.code !== 0) throw new Error(`keep-alive client exited ${y.code}: ${y.stderr.slice(0, 500)}`);
        if (r >= 0) {
          ours.push(N / (x.ms / 1000));
          floor.push(N / (y.ms / 1000));
          oursCpu.push(x.cpuMs);
          floorCpu.push(y.cpuMs);
        }
      }
      // For the CPU column the batch's rate ratio reads as floor CPU / ours (the same N): higher is better.
      const rate = {
        ours: median(ours),
        floor: median(floor),
        oursCpu: cpuMedian(oursCpu),
        floorCpu: cpuMedian(floorCpu),
      };
      row(
        `batch REST, ${N} messages, -c ${C} (rate)`,
        `bare keep-alive client, ${C} at a time`,
        { ...rate, oursText: `${Math.round(rate.ours)}/s`, floorText: `${Math.round(rate.floor)}/s` },
        0.85,
        "higher",
      );
    }
  } finally {
    await sb.stop();
  }

  // The budget: P loops of one-process sends sharing a key, against a sandbox with the same limit.
  if (!want("budget")) {
    loads.push(loadavg()[0]);
    return rows;
  }
  const { limit, windowS, processes, messages } = BUDGET;
  const rl = startSandbox(join(work, `sb-rl-${label}`), [
    "--rate-limit",
    String(limit),
    "--rate-window-ms",
    String(windowS * 1000),
  ]);
  try {
    const ready = await rl.ready;
    const env = {
      ...process.env,
      ...ready.env,
      NO_COLOR: "1",
      MAILSEND_STATE_DIR: join(work, `state-rl-${label}`),
      MAILSEND_RATE_LIMIT: String(limit),
      MAILSEND_RATE_WINDOW: String(windowS),
      MAILSEND_RETRIES: "3",
    };
    const stats = async () => (await fetch(`${ready.base_url}/_sandbox/stats`)).json();
    const s0 = await stats();
    const prefix = `rl ${label} `;
    await Promise.all(
      Array.from({ length: processes }, async (_, p) => {
        for (let m = 0; m < messages; m++) {
          const r = await runOnce(
            node,
            [BIN, "send", "-f", FROM, "-t", TO, "-s", `${prefix}p${p} m${m}`, "--text", "x", "-q"],
            { env },
          );
          if (r.code !== 0) throw new Error(`budget send exited ${r.code}: ${r.stderr.slice(0, 500)}`);
        }
      }),
    );
    const s1 = await stats();
    const list = await (await fetch(`${ready.base_url}/api/messages?limit=100000`)).json();
    const times = (Array.isArray(list) ? list : list.messages)
      .filter((m) => m.subject.startsWith(prefix))
      .map((m) => Date.parse(m.receivedAt))
      .sort((a, b) => a - b);
    const n = processes * messages;
    // A sliding log lets `limit` through at once, then `limit` a window: the shortest first-to-last span.
    const ideal = (Math.ceil(n / limit) - 1) * windowS * 1000;
    const span = times[times.length - 1] - times[0];
    const used = ideal / span;
    const refused = s1.rest.rateLimited - s0.rest.rateLimited;
    // The service's log holds arrival k+limit to at least arrival k + window, so no client's span is
    // under the windows plus the time its first `limit` arrivals took: start-up, not the budget.
    // The floor: how long bare node:http POST processes (the send row's floor), in the same loops
    // and with no budget at all, take to make their first `limit` arrivals; the share that leaves
    // to a client with a perfect, free budget is the most this machine allows.
    const firstWindow = times[limit - 1] - times[0];
    const floorWindow = await floorFirstWindow(node, label, limit, processes);
    const most = ideal / (ideal + floorWindow);
    rows.push({
      what: `budget used: ${processes} processes x ${messages} sends, limit ${limit} per ${windowS} s`,
      // Beyond the windows and the first window's spread: what the budget's pace added (bench/budget-share.mjs).
      ours: `${(span / 1000).toFixed(2)} s (first ${limit} in ${(firstWindow / 1000).toFixed(2)} s, then ${((span - ideal - firstWindow) / 1000).toFixed(2)} s late), ${times.length}/${n} stored, ${refused} 429s`,
      floor: `the limit: ${(ideal / 1000).toFixed(2)} s; bare POST processes' first ${limit} in ${(floorWindow / 1000).toFixed(2)} s: at most ${most.toFixed(3)} here`,
      ratio: used.toFixed(3),
      aim: ">= 0.97, 0 429s",
      "": used >= 0.97 && refused === 0 && times.length === n ? "OK" : "MISSED",
      "CPU ratio (ours / floor)": "-",
    });
  } finally {
    await rl.stop();
  }
  loads.push(loadavg()[0]);
  return rows;
}

/**
 * The median time, over a few rounds, from the first to the `limit`-th arrival when `processes`
 * loops each run bare node:http POST processes (FLOOR_POST) one after another, against a sandbox
 * without a limit: the first window of the budget row for a client whose budget costs nothing.
 */
async function floorFirstWindow(node, label, limit, processes) {
  const perLoop = Math.ceil(limit / processes);
  const sb = startSandbox(join(work, `sb-fw-${label}`), ["--rate-limit", "100000000"]);
  try {
    const ready = await sb.ready;
    const key = readFileSync(ready.env.MAILSEND_API_KEY_FILE, "utf8").trim();
    const env = { ...process.env, ...ready.env, BASE_URL: ready.base_url, KEY: key };
    const spans = [];
    for (let round = 0; round < 3; round++) {
      const prefix = `fw ${label} ${round} `;
      await Promise.all(
        Array.from({ length: processes }, async (_, p) => {
          for (let m = 0; m < perLoop; m++) {
            const r = await runOnce(node, [FLOOR_POST], { env: { ...env, SUBJECT: `${prefix}p${p} m${m}` } });
            if (r.code !== 0) throw new Error(`bare POST exited ${r.code}: ${r.stderr.slice(0, 500)}`);
          }
        }),
      );
      const list = await (await fetch(`${ready.base_url}/api/messages?limit=100000`)).json();
      const times = (Array.isArray(list) ? list : list.messages)
        .filter((m) => m.subject.startsWith(prefix))
        .map((m) => Date.parse(m.receivedAt))
        .sort((a, b) => a - b);
      spans.push(times[limit - 1] - times[0]);
    }
    return median(spans);
  } finally {
    await sb.stop();
  }
}

try {
  const nodes = [[process.execPath, `Node ${process.version}`]];
  const n24 = node24();
  if (n24 && !process.version.startsWith("v24.")) {
    const v = (await runOnce(n24, ["--version"])).stdout.trim();
    nodes.unshift([n24, `Node ${v}`]);
  }
  const measured = [];
  for (const [node, name] of nodes) {
    mkdirSync(work, { recursive: true });
    measured.push([name, await measure(node, name.replace(/\W+/g, "-"))]);
  }
  console.log(
    `\nMedians of ${RUNS} interleaved runs (batch: ${ROUNDS} rounds), whole processes, wall clock; ${cpus().length} CPUs, load average ${loads.map((l) => l.toFixed(1)).join(" -> ")}\n`,
  );
  sideBySide(measured);
  if (!n24)
    console.log("\nNode 24: not found (set BENCH_NODE24, or let .ci/run install it): measured under this Node only.");
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** One table, a row per measure, each Node's figures side by side (Node 24 first). */
function sideBySide(measured) {
  const per = ["ours", "floor", "ratio", "", "CPU ratio (ours / floor)"];
  const columns = ["what", "aim", ...measured.flatMap(([name]) => per.map((c) => `${name} ${c}`.trim()))];
  const rows = measured[0][1].map((first, i) => {
    const row = { what: first.what, aim: first.aim };
    for (const [name, rs] of measured) for (const c of per) row[`${name} ${c}`.trim()] = rs[i]?.[c] ?? "-";
    return row;
  });
  table(rows, columns);
}
