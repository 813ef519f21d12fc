// Start-up cost of the CLI against a bare `node -e 0`, measured in one run.
// Aims: --version within 1.15x, send --dry-run within 1.5x. bench/speed.mjs measures the same two under Node 20 and 24.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { BIN, ROOT, compare, table } from "./lib.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
try {
  // What eager loading would cost: every heavy dependency imported up front.
  const eager = join(ROOT, "node_modules", ".mailsend-bench-eager.mjs");
  writeFileSync(eager, ["commander", "zod", "ora", "nodemailer"].map((m) => `import "${m}";`).join("\n"));

  // The same sources without bundling: one file per module, packages from node_modules
  // (so it lives inside node_modules to resolve them).
  const unbundledInRoot = join(ROOT, "node_modules", ".mailsend-bench-unbundled");
  rmSync(unbundledInRoot, { recursive: true, force: true });
  await build({
    entryPoints: [join(ROOT, "src/**/*.ts")],
    outdir: unbundledInRoot,
    outbase: join(ROOT, "src"),
    format: "esm",
    platform: "node",
    target: "node20.18",
    define: { __MAILSEND_VERSION__: '"bench"' },
    logLevel: "error",
  });
  const ub = join(unbundledInRoot, "cli/main.js");
  const ubRunner = join(ROOT, "node_modules", ".mailsend-bench-unbundled-bin.mjs");
  writeFileSync(ubRunner, `import { main } from ${JSON.stringify(ub)}; await main();`);

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
  const env = { ...process.env, MAILSEND_BASE_URL: "https://api.example.com", NO_COLOR: "1" };
  const rows = await compare(
    [
      { name: "node -e 0", cmd: process.execPath, args: ["-e", "0"] },
      { name: "import all heavy deps eagerly", cmd: process.execPath, args: [eager] },
      { name: "mailsend --version", cmd: process.execPath, args: [BIN, "--version"] },
      { name: "mailsend --help", cmd: process.execPath, args: [BIN, "--help"] },
      { name: "mailsend send --dry-run (bundled)", cmd: process.execPath, args: [BIN, ...dry], env },
      { name: "mailsend send --dry-run (unbundled)", cmd: process.execPath, args: [ubRunner, ...dry], env },
    ],
    RUNS,
  );
  const base = rows[0].ms;
  console.log(`\nStart-up, median of ${RUNS} interleaved runs (wall clock, whole process)\n`);
  table(
    rows.map((r) => ({
      command: r.name,
      ms: r.ms.toFixed(1),
      "x node -e 0": (r.ms / base).toFixed(2),
      "peak RSS MB": r.rssMB.toFixed(1),
    })),
    ["command", "ms", "x node -e 0", "peak RSS MB"],
  );
  const v = rows[2].ms / base;
  const d = rows[4].ms / base;
  console.log(`\n--version: ${v.toFixed(2)}x (target <= 1.15x) ${v <= 1.15 ? "OK" : "MISSED"}`);
  console.log(`send --dry-run: ${d.toFixed(2)}x (target <= 1.5x) ${d <= 1.5 ? "OK" : "MISSED"}`);
} finally {
  for (const f of [".mailsend-bench-unbundled", ".mailsend-bench-unbundled-bin.mjs", ".mailsend-bench-eager.mjs"]) {
    rmSync(join(ROOT, "node_modules", f), { recursive: true, force: true });
  }
}
