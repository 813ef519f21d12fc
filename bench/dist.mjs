// The single executable (`npm run dist`'s dist-bin/mailsend-linux-x64) against the Node 24 it is
// made of running `-e 0`, and against that Node running bin/mailsend.js: --version and
// send --dry-run, and the executable's size. Target: send --dry-run within 1.6x `node -e 0`.
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { BIN, ROOT, compare, table } from "./lib.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const EXE = join(ROOT, "dist-bin", "mailsend-linux-x64");
if (!existsSync(EXE)) {
  console.log("bench/dist.mjs: no dist-bin/mailsend-linux-x64 (npm run dist builds it); skipped");
  process.exit(0);
}
const node =
  process.env.MAILSEND_NODE24 || execFileSync(join(ROOT, ".ci", "node24"), ["--find"], { encoding: "utf8" }).trim();

const dry = [
  "send",
  "--dry-run",
  "-f",
  "ci@example.com",
  "-t",
  "dev@example.com",
  "-s",
  "Build passed",
  "--text",
  "ok",
];
const env = { ...process.env, MAILSEND_BASE_URL: "https://api.example.com", MAILSEND_API_KEY: "bench", NO_COLOR: "1" };
const rows = await compare(
  [
    { name: "node -e 0 (Node 24)", cmd: node, args: ["-e", "0"], env },
    { name: "executable --version", cmd: EXE, args: ["--version"], env },
    { name: "executable send --dry-run", cmd: EXE, args: dry, env },
    { name: "node bin/mailsend.js send --dry-run", cmd: node, args: [BIN, ...dry], env },
  ],
  RUNS,
);
const base = rows[0].ms;
console.log(`\nThe single executable, median of ${RUNS} interleaved runs (wall clock, whole process)\n`);
table(
  rows.map((r) => ({
    command: r.name,
    ms: r.ms.toFixed(1),
    "x node -e 0": (r.ms / base).toFixed(2),
    "peak RSS MB": r.rssMB.toFixed(1),
  })),
  ["command", "ms", "x node -e 0", "peak RSS MB"],
);
const d = rows[2].ms / base;
console.log(`\nsize: ${(statSync(EXE).size / 1024 / 1024).toFixed(1)} MiB (limit 120 MiB)`);
console.log(`executable send --dry-run: ${d.toFixed(2)}x node -e 0 (target <= 1.6x) ${d <= 1.6 ? "OK" : "MISSED"}`);
