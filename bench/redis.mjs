// What the shared budget in Redis costs against the per-machine file budget, in one run,
// against a `mailsend sandbox` child whose own limit is out of the way and a redis-server
// on a free port (no persistence):
//  - a one-shot `mailsend send` (whole process, median of interleaved runs): the Redis
//    budget loads its client (ioredis, a chunk of its own) and connects; aim: <= 15 ms more;
//  - `mailsend batch` of N messages (messages per second, whole process, best of rounds
//    interleaved): every message takes and records its slot in Redis; aim: <= 5% slower.
// On a loaded machine wall time says little (a one-shot send's time grows with the load), so the
// processes' CPU time (user + sys, from GNU time, mean of the runs) is shown beside it: what
// Redis adds in CPU is what it adds in wall time on an idle machine, plus a few local round trips.
// Knobs: BENCH_RUNS (one-shot runs, default 15), BENCH_REDIS_N (batch size, default 1000),
// BENCH_REDIS_ROUNDS (default 3), BENCH_REDIS_C (batch --concurrency, default 16).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, compare, median, runOnce, startSandbox, table } from "./lib.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const N = Number(process.env.BENCH_REDIS_N ?? 1000);
const ROUNDS = Number(process.env.BENCH_REDIS_ROUNDS ?? 3);
const C = Number(process.env.BENCH_REDIS_C ?? 16);

/** CPU milliseconds (user + sys) of one run of the CLI, from GNU time; undefined without it. */
function cpuOnce(args, env) {
  if (!existsSync("/usr/bin/time")) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/time", ["-f", "__CPU__%U %S", process.execPath, BIN, ...args], {
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => {
      const m = /__CPU__([\d.]+) ([\d.]+)/.exec(err);
      if (code !== 0 || !m) return reject(new Error(`exited ${code}: ${err.slice(0, 500)}`));
      resolve((Number(m[1]) + Number(m[2])) * 1000);
    });
  });
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

const REDIS_SERVER = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find((p) => existsSync(p));
if (!REDIS_SERVER) {
  console.log("redis-server is not installed (.ci/run installs it): the Redis budget is not measured.");
  process.exit(0);
}

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

async function startRedis() {
  const port = await freePort();
  const child = spawn(
    REDIS_SERVER,
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  await new Promise((resolve, reject) => {
    let out = "";
    const t = setTimeout(() => reject(new Error("redis-server did not start within 10 s")), 10_000);
    child.stdout.on("data", (d) => {
      out += d;
      if (/Ready to accept connections/.test(out)) {
        clearTimeout(t);
        child.stdout.resume();
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`redis-server exited ${code}`)));
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () => new Promise((r) => (child.exitCode !== null ? r() : (child.once("exit", r), child.kill("SIGTERM")))),
  };
}

const work = mkdtempSync(join(tmpdir(), "mailsend-bench-redis-"));
const sb = startSandbox(join(work, "sb"), ["--rate-limit", "100000000"]);
const redis = await startRedis();
try {
  const ready = await sb.ready;
  const base = {
    ...process.env,
    ...ready.env,
    NO_COLOR: "1",
    MAILSEND_API_KEY: readFileSync(ready.api_key_file, "utf8").trim(),
    // The budget is on and never full: what is measured is taking and recording slots.
    MAILSEND_RATE_LIMIT: "100000000",
    MAILSEND_RETRIES: "0",
  };
  delete base.MAILSEND_API_KEY_FILE;
  const fileEnv = { ...base, MAILSEND_STATE_DIR: join(work, "state-file") };
  const redisEnv = { ...base, MAILSEND_STATE_DIR: join(work, "state-redis"), MAILSEND_RATE_LIMIT_URL: redis.url };

  // 1. One message per process.
  const send = ["send", "-f", "bench@example.com", "-t", "sink@example.com", "-s", "one", "--text", "x", "-q"];
  const [file, viaRedis] = await compare(
    [
      { name: "file", cmd: process.execPath, args: [BIN, ...send], env: fileEnv },
      { name: "redis", cmd: process.execPath, args: [BIN, ...send], env: redisEnv },
    ],
    RUNS,
  );
  const added = viaRedis.ms - file.ms;
  const cpu = { file: [], redis: [] };
  for (let r = 0; r < RUNS && existsSync("/usr/bin/time"); r++) {
    cpu.file.push(await cpuOnce(send, fileEnv));
    cpu.redis.push(await cpuOnce(send, redisEnv));
  }
  const cpuFile = cpu.file.length ? mean(cpu.file) : NaN;
  const cpuRedis = cpu.redis.length ? mean(cpu.redis) : NaN;

  // 2. A batch of N.
  const lines = [];
  for (let i = 0; i < N; i++)
    lines.push(
      JSON.stringify({ from: "bench@example.com", to: "sink@example.com", subject: `b ${i}`, html: "<p>hi</p>" }),
    );
  const input = join(work, "in.jsonl");
  writeFileSync(input, `${lines.join("\n")}\n`);
  let run = 0;
  const batch = async (env) => {
    const r = await runOnce(
      process.execPath,
      [BIN, "batch", input, "--concurrency", String(C), "--journal", join(work, `journal-${run++}`), "--quiet"],
      { env },
    );
    if (r.code !== 0) throw new Error(`batch exited ${r.code}: ${r.stderr.slice(0, 500)}`);
    return N / (r.ms / 1000);
  };
  const fileRates = [];
  const redisRates = [];
  for (let round = 0; round < ROUNDS; round++) {
    fileRates.push(await batch(fileEnv));
    redisRates.push(await batch(redisEnv));
  }
  const fileRate = median(fileRates);
  const redisRate = median(redisRates);
  const slower = 1 - redisRate / fileRate;

  console.log(
    `\nThe Redis budget against the file budget (median of ${RUNS} one-shot sends, ${ROUNDS} batches of ${N} at --concurrency ${C})\n`,
  );
  table(
    [
      { what: "one-shot send, file budget", value: `${file.ms.toFixed(1)} ms`, ratio: "1.00", aim: "", ok: "" },
      {
        what: "one-shot send, Redis budget",
        value: `${viaRedis.ms.toFixed(1)} ms`,
        ratio: (viaRedis.ms / file.ms).toFixed(2),
        aim: "",
        ok: "",
      },
      {
        what: "one-shot: Redis adds",
        value: `${added.toFixed(1)} ms`,
        ratio: "",
        aim: "<= 15 ms",
        ok: added <= 15 ? "OK" : "MISSED",
      },
      { what: "one-shot CPU, file budget", value: `${cpuFile.toFixed(1)} ms`, ratio: "1.00", aim: "", ok: "" },
      {
        what: "one-shot CPU, Redis budget",
        value: `${cpuRedis.toFixed(1)} ms`,
        ratio: (cpuRedis / cpuFile).toFixed(2),
        aim: "",
        ok: "",
      },
      {
        what: "one-shot CPU: Redis adds",
        value: `${(cpuRedis - cpuFile).toFixed(1)} ms`,
        ratio: "",
        aim: "<= 15 ms",
        ok: cpuRedis - cpuFile <= 15 ? "OK" : "MISSED",
      },
      { what: "batch, file budget", value: `${fileRate.toFixed(0)} msg/s`, ratio: "1.00", aim: "", ok: "" },
      {
        what: "batch, Redis budget",
        value: `${redisRate.toFixed(0)} msg/s`,
        ratio: (redisRate / fileRate).toFixed(2),
        aim: "",
        ok: "",
      },
      {
        what: "batch: Redis slower by",
        value: `${(slower * 100).toFixed(1)}%`,
        ratio: "",
        aim: "<= 5%",
        ok: slower <= 0.05 ? "OK" : "MISSED",
      },
    ],
    ["what", "value", "ratio", "aim", "ok"],
  );
} finally {
  await sb.stop();
  await redis.stop();
  rmSync(work, { recursive: true, force: true });
}
