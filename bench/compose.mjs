// An HTML report with 20 local images (5 MB in all): time and peak RSS of
// `send --dry-run` and of a real SMTP send to the sandbox, embedded as inline
// parts, against the same message with the same files given by --attach.
// Aim: embedding costs at most +50 MB RSS and under 1.5x the time.
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, compare, startSandbox, table } from "./lib.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const IMAGES = 20;
const TOTAL_MB = 5;
const work = mkdtempSync(join(tmpdir(), "mailsend-compose-bench-"));
const dir = join(work, "report");
mkdirSync(dir);

// PNG signature + IHDR start, then random bytes: an image by its first bytes, incompressible like a real chart.
const each = Math.floor((TOTAL_MB * 1024 * 1024) / IMAGES);
const names = [];
for (let i = 0; i < IMAGES; i++) {
  const name = `chart-${String(i).padStart(2, "0")}.png`;
  writeFileSync(
    join(dir, name),
    Buffer.concat([Buffer.from("89504e470d0a1a0a0000000d49484452", "hex"), randomBytes(each - 16)]),
  );
  names.push(name);
}
const rows = names
  .map((n, i) => `<tr><td>suite ${i}</td><td>${100 + i}</td><td><img src="${n}" alt="trend ${i}"></td></tr>`)
  .join("\n");
const page = (body) =>
  `<!DOCTYPE html><html><head><style>td{padding:4px}</style></head><body><h1>Nightly</h1><table>${body}</table></body></html>`;
writeFileSync(join(dir, "embedded.html"), page(rows));
writeFileSync(join(dir, "plain.html"), page(rows.replace(/<img [^>]*>/g, "")));

const sb = startSandbox(join(work, "sb"), ["--rate-limit", "100000000", "--max-size", String(64 * 1024 * 1024)]);
try {
  const ready = await sb.ready;
  const env = {
    ...process.env,
    ...ready.env,
    NO_COLOR: "1",
    MAILSEND_API_KEY: readFileSync(ready.api_key_file, "utf8").trim(),
    MAILSEND_API_KEY_FILE: "",
    MAILSEND_RATE_LIMIT: "0",
    MAILSEND_STATE_DIR: join(work, "state"),
  };
  delete env.MAILSEND_API_KEY_FILE;
  const msg = ["-f", "ci@example.com", "-t", "dev@example.com", "-s", "Nightly report", "--transport", "smtp"];
  const attach = names.flatMap((n) => ["--attach", join(dir, n)]);
  const cases = [
    {
      name: "dry-run, 20 inline images",
      cmd: process.execPath,
      args: [BIN, "send", ...msg, "--html-file", join(dir, "embedded.html"), "--dry-run"],
      env,
    },
    {
      name: "dry-run, 20 --attach",
      cmd: process.execPath,
      args: [BIN, "send", ...msg, "--html-file", join(dir, "plain.html"), ...attach, "--dry-run"],
      env,
    },
    {
      name: "SMTP send, 20 inline images",
      cmd: process.execPath,
      args: [BIN, "send", ...msg, "--html-file", join(dir, "embedded.html")],
      env,
    },
    {
      name: "SMTP send, 20 --attach",
      cmd: process.execPath,
      args: [BIN, "send", ...msg, "--html-file", join(dir, "plain.html"), ...attach],
      env,
    },
  ];
  const res = await compare(cases, RUNS);
  const pair = (a, b) => ({
    what: a.name.split(",")[0],
    "inline ms": a.ms.toFixed(0),
    "attach ms": b.ms.toFixed(0),
    "time x": (a.ms / b.ms).toFixed(2),
    "inline MB": a.rssMB.toFixed(1),
    "attach MB": b.rssMB.toFixed(1),
    "+RSS MB": (a.rssMB - b.rssMB).toFixed(1),
  });
  console.log(
    `${IMAGES} images, ${TOTAL_MB} MB in all; median of ${RUNS} runs, interleaved; aim: time x < 1.5, +RSS <= 50 MB`,
  );
  table(
    [pair(res[0], res[1]), pair(res[2], res[3])],
    ["what", "inline ms", "attach ms", "time x", "inline MB", "attach MB", "+RSS MB"],
  );
} finally {
  await sb.stop();
  rmSync(work, { recursive: true, force: true });
}
