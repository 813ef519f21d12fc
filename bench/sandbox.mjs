// Sandbox throughput: REST POST /send of small messages with keys and the
// rate-limit check on (a high limit), driven by autocannon over keep-alive
// connections; then SMTP messages over a pooled nodemailer client (STARTTLS,
// AUTH LOGIN). The sandbox runs as `mailsend sandbox` in its own process;
// every accepted message is counted in its store (fsync'd before the answer).
import autocannon from "autocannon";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import nodemailer from "nodemailer";
import { startSandbox, table } from "./lib.mjs";

const REST_SECONDS = Number(process.env.BENCH_REST_SECONDS ?? 10);
const REST_CONNECTIONS = Number(process.env.BENCH_REST_CONNECTIONS ?? 64);
const SMTP_MESSAGES = Number(process.env.BENCH_SMTP_MESSAGES ?? 2000);
const SMTP_CONNECTIONS = Number(process.env.BENCH_SMTP_CONNECTIONS ?? 8);
const EXTRA = (process.env.BENCH_SANDBOX_ARGS ?? "").split(" ").filter(Boolean);
const TICK_MS = 10; // USER_HZ = 100 on Linux

/** CPU time (user + system, all threads) of a process so far, in ms; undefined off Linux. */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return undefined;
  }
}

async function stats(baseUrl) {
  return (await fetch(`${baseUrl}/_sandbox/stats`)).json();
}

const LOAD = (await import("node:os")).loadavg()[0];
const dir = mkdtempSync(join(tmpdir(), "mailsend-bench-sandbox-"));
const sb = startSandbox(join(dir, "sb"), ["--rate-limit", "100000000", ...EXTRA]);
const rows = [];
try {
  const ready = await sb.ready;
  const key = readFileSync(ready.api_key_file, "utf8").trim();
  const body = JSON.stringify({
    from: "bench@example.com",
    to: "Someone <someone@example.com>",
    subject: "bench",
    html: "<p>Hello from the benchmark.</p>",
  });

  // Warm-up: JIT, the file system's first allocations.
  await autocannon({
    url: `${ready.base_url}/send`,
    method: "POST",
    connections: 8,
    amount: 500,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  const s0 = await stats(ready.base_url);
  const c0 = cpuMs(sb.pid);

  const r = await autocannon({
    url: `${ready.base_url}/send`,
    method: "POST",
    connections: REST_CONNECTIONS,
    duration: REST_SECONDS,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  const s1 = await stats(ready.base_url);
  const c1 = cpuMs(sb.pid);
  const ok = r["2xx"];
  const stored = s1.stored - s0.stored;
  rows.push({
    what: `REST POST /send, ${REST_CONNECTIONS} keep-alive connections, ${REST_SECONDS} s`,
    "messages/s": Math.round(stored / (r.duration || REST_SECONDS)),
    accepted: ok,
    stored,
    errors: r.non2xx + r.errors + r.timeouts,
    "p50 ms": r.latency.p50,
    "p99 ms": r.latency.p99,
    "sandbox CPU µs/msg": c0 === undefined ? "-" : Math.round(((c1 - c0) * 1000) / stored),
  });

  // SMTP: a pooled nodemailer client, STARTTLS + AUTH LOGIN, the sandbox's CA.
  const transport = nodemailer.createTransport({
    pool: true,
    maxConnections: SMTP_CONNECTIONS,
    maxMessages: Infinity,
    host: ready.smtp.host,
    port: ready.smtp.port,
    secure: false,
    requireTLS: true,
    auth: { user: "mailsend", pass: key, method: "LOGIN" },
    tls: { ca: readFileSync(ready.ca_file, "utf8"), servername: "localhost" },
  });
  const mail = (i) => ({
    from: "bench@example.com",
    to: "someone@example.com",
    subject: `bench ${i}`,
    text: "Hello from the benchmark.",
  });
  await Promise.all(Array.from({ length: 50 }, (_, i) => transport.sendMail(mail(i))));
  const m0 = await stats(ready.base_url);
  const mc0 = cpuMs(sb.pid);
  const t0 = performance.now();
  let failed = 0;
  const latencies = [];
  await Promise.all(
    Array.from({ length: SMTP_MESSAGES }, async (_, i) => {
      const s = performance.now();
      try {
        await transport.sendMail(mail(i));
        latencies.push(performance.now() - s);
      } catch {
        failed++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  transport.close();
  const m1 = await stats(ready.base_url);
  const mc1 = cpuMs(sb.pid);
  latencies.sort((a, b) => a - b);
  const smtpStored = m1.stored - m0.stored;
  rows.push({
    what: `SMTP STARTTLS, nodemailer pool of ${SMTP_CONNECTIONS}, ${SMTP_MESSAGES} messages`,
    "messages/s": Math.round(smtpStored / seconds),
    accepted: SMTP_MESSAGES - failed,
    stored: smtpStored,
    errors: failed,
    "p50 ms": Math.round(latencies[Math.floor(latencies.length / 2)] ?? 0),
    "p99 ms": Math.round(latencies[Math.floor(latencies.length * 0.99)] ?? 0),
    "sandbox CPU µs/msg": mc0 === undefined ? "-" : Math.round(((mc1 - mc0) * 1000) / smtpStored),
  });
} finally {
  await sb.stop();
  rmSync(dir, { recursive: true, force: true });
}
const os = await import("node:os");
console.log(
  `Sandbox throughput (every message written and fsync'd before its answer; ${os.cpus().length} CPUs, load average at start ${LOAD.toFixed(2)})`,
);
table(rows, ["what", "messages/s", "accepted", "stored", "errors", "p50 ms", "p99 ms", "sandbox CPU µs/msg"]);
