// `npm run bench`: every benchmark in turn. Each prints its own table and exits 0.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const scripts = [
  "startup.mjs",
  "memory.mjs",
  "sandbox.mjs",
  "ratelimit.mjs",
  "budget-classes.mjs",
  "redis.mjs",
  "batch.mjs",
  "relay.mjs",
  "outbox.mjs",
  "compose.mjs",
  "speed.mjs",
  "dist.mjs",
];
for (const s of scripts) {
  const path = new URL(s, import.meta.url).pathname;
  if (!existsSync(path)) continue;
  console.log(`\n=== bench/${s} ===`);
  const r = spawnSync(process.execPath, [path], { stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`bench/${s} failed with exit ${r.status}`);
    process.exitCode = 1;
  }
}
