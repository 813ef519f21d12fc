// Shared by the bench scripts: run a command N times, take medians, read peak RSS.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, readFileSync } from "node:fs";

export const ROOT = new URL("..", import.meta.url).pathname;
export const BIN = `${ROOT}bin/mailsend.js`;

const GNU_TIME = existsSync("/usr/bin/time") ? "/usr/bin/time" : undefined;

/** Run once; resolves {ms, rssKB, code, stdout, stderr}. Peak RSS from GNU time, else /proc polling. */
export function runOnce(cmd, args, { env = process.env, input } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const argv = GNU_TIME ? ["-f", "__RSS__%M", cmd, ...args] : args;
    const child = spawn(GNU_TIME ?? cmd, argv, { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let hwm = 0;
    const poll = GNU_TIME
      ? undefined
      : setInterval(() => {
          try {
            const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
            if (m) hwm = Math.max(hwm, Number(m[1]));
          } catch {}
        }, 10);
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      if (poll) clearInterval(poll);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      const m = /__RSS__(\d+)/.exec(stderr);
      if (m) {
        hwm = Number(m[1]);
        stderr = stderr.replace(/.*__RSS__\d+\n?/, "");
      }
      resolve({ ms, rssKB: hwm, code, stdout, stderr });
    });
    child.stdin.end(input ?? "");
  });
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Interleave the commands (so machine noise hits all alike) and take each one's median. */
export async function compare(cases, runs) {
  const times = cases.map(() => []);
  const rss = cases.map(() => []);
  for (let r = 0; r < runs; r++) {
    for (const [i, c] of cases.entries()) {
      const res = await runOnce(c.cmd, c.args, c);
      if (res.code !== 0) throw new Error(`${c.name} exited ${res.code}: ${res.stderr.slice(0, 500)}`);
      times[i].push(res.ms);
      rss[i].push(res.rssKB);
    }
  }
  return cases.map((c, i) => ({ name: c.name, ms: median(times[i]), rssMB: median(rss[i]) / 1024 }));
}

export function table(rows, columns) {
  const widths = columns.map((col) => Math.max(col.length, ...rows.map((r) => String(r[col]).length)));
  const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join("  ");
  console.log(line(columns));
  console.log(line(widths.map((w) => "-".repeat(w))));
  for (const r of rows) console.log(line(columns.map((c) => r[c])));
}

/**
 * `mailsend sandbox --json` in its own process on free ports; `ready` resolves
 * to its ready line (base_url, api_key_file, env, ...), `stop()` ends it.
 */
/**
 * A sandbox that keeps `limit` requests per `windowS` seconds, with `body` given its ready line and
 * the environment of a mailsend that shares that budget (its own state dir); stopped after.
 */
export async function withBudgetSandbox({ dir, stateDir, limit, windowS }, body) {
  const sb = startSandbox(dir, ["--rate-limit", String(limit), "--rate-window-ms", String(windowS * 1000)]);
  try {
    const ready = await sb.ready;
    const env = {
      ...process.env,
      ...ready.env,
      NO_COLOR: "1",
      MAILSEND_STATE_DIR: stateDir,
      MAILSEND_RATE_LIMIT: String(limit),
      MAILSEND_RATE_WINDOW: String(windowS),
    };
    return await body({ ready, env });
  } finally {
    await sb.stop();
  }
}

export function startSandbox(dir, args = []) {
  const child = spawn(
    process.execPath,
    [BIN, "sandbox", "--dir", dir, "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0", "--json", ...args],
    // Without the machine's own NODE_EXTRA_CA_CERTS: its ready env then names the sandbox's CA
    // alone, not a bundle with the machine's CAs, which every process measured would load.
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "NODE_EXTRA_CA_CERTS")),
    },
  );
  const ready = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", (l) => resolve(JSON.parse(l)));
    child.once("exit", (code) => reject(new Error(`sandbox exited ${code}`)));
  });
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  return { ready, stop, pid: child.pid };
}
