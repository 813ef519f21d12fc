// `mailsend run`'s memory with a job that prints a lot: peak RSS of the whole `mailsend run`
// process for a job printing 1 line, 300,000 lines and 3,000,000 lines (then failing, so the
// alert with its tail and attachment is composed and queued). The output kept is bounded
// (--attach-limit, 1 MiB by default), so the peak should not grow with the output.
// No service is needed: the alert is only queued (MAILSEND_QUEUE_AUTORUN=0).
// Knob: BENCH_RUN_LINES (comma list of line counts).
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, runOnce, table } from "./lib.mjs";

const LINES = (process.env.BENCH_RUN_LINES ?? "1,300000,3000000").split(",").map(Number);
// seq is small, so a peak measured over the process tree is mailsend's own; node where there is no seq.
const SEQ = existsSync("/usr/bin/seq") ? "/usr/bin/seq" : undefined;

function job(lines) {
  const script = SEQ
    ? `${SEQ} 1 ${lines}; exit 1`
    : `"${process.execPath}" -e 'for (let i = 1; i <= ${lines}; i++) process.stdout.write(i + "\\n")'; exit 1`;
  return ["sh", "-c", script];
}

const dir = mkdtempSync(join(tmpdir(), "mailsend-bench-run-"));
const rows = [];
try {
  for (const lines of LINES) {
    const state = join(dir, `state-${lines}`);
    const env = {
      ...process.env,
      MAILSEND_STATE_DIR: state,
      MAILSEND_QUEUE_AUTORUN: "0",
      MAILSEND_FROM: "bench@example.com",
      MAILSEND_BASE_URL: "http://127.0.0.1:9",
      MAILSEND_API_KEY: "bench-key-not-used",
    };
    const r = await runOnce(process.execPath, [BIN, "run", "--to", "ops@example.com", "--", ...job(lines)], { env });
    const queued = existsSync(join(state, "outbox", "queue"))
      ? readdirSync(join(state, "outbox", "queue")).filter((f) => f.endsWith(".msg")).length
      : 0;
    rows.push({
      lines: lines.toLocaleString("en"),
      output: `${(Buffer.byteLength(r.stdout) / 1024 / 1024).toFixed(1)} MiB`,
      exit: r.code,
      "mail queued": queued,
      wall: `${Math.round(r.ms)} ms`,
      "peak RSS": `${(r.rssKB / 1024).toFixed(1)} MB`,
    });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log("mailsend run: peak RSS by the job's output size (the output kept for the mail is at most 1 MiB)\n");
table(rows, ["lines", "output", "exit", "mail queued", "wall", "peak RSS"]);
