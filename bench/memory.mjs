// Peak RSS of `mailsend send` with a 50 MB attachment against a small message,
// over REST and SMTP, in one run. Aim: under 64 MB above the
// small-message baseline on each transport (the body is streamed, not built).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { SMTPServer } from "smtp-server";
import { BIN, ROOT, median, runOnce, table } from "./lib.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const SIZE_MB = Number(process.env.BENCH_ATTACHMENT_MB ?? 50);
const KEY = "bench-key-not-secret";
const work = mkdtempSync(join(tmpdir(), "mailsend-mem-"));

// The sandbox's certificate maker, compiled on the fly (it is TypeScript).
const tlsModule = join(ROOT, "node_modules", ".mailsend-bench-tls.mjs");
await build({
  entryPoints: [join(ROOT, "src/sandbox/tls.ts")],
  bundle: true,
  packages: "external",
  format: "esm",
  platform: "node",
  outfile: tlsModule,
  logLevel: "error",
});
const { ensureTls } = await import(tlsModule);
const tls = await ensureTls(join(work, "tls"));

let restBytes = 0;
const rest = http.createServer((req, res) => {
  req.on("data", (c) => (restBytes += c.length));
  req.on("end", () => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ success: true, message_id: `msg_${Date.now()}` }));
  });
});
let smtpBytes = 0;
const smtp = new SMTPServer({
  secure: false,
  key: tls.key,
  cert: tls.cert,
  authMethods: ["LOGIN", "PLAIN"],
  size: 0,
  onAuth: (auth, _s, cb) => (auth.password === KEY ? cb(null, { user: auth.username }) : cb(new Error("bad key"))),
  onData: (stream, _s, cb) => {
    stream.on("data", (c) => (smtpBytes += c.length));
    stream.on("end", () => cb(null, "Ok: queued"));
  },
  logger: false,
});
await new Promise((r) => rest.listen(0, "127.0.0.1", r));
await new Promise((r) => smtp.listen(0, "127.0.0.1", r));

const small = join(work, "small.txt");
const big = join(work, "big.bin");
writeFileSync(small, "hello\n");
writeFileSync(big, randomBytes(SIZE_MB * 1024 * 1024));

const env = {
  ...process.env,
  NO_COLOR: "1",
  MAILSEND_API_KEY: KEY,
  MAILSEND_BASE_URL: `http://127.0.0.1:${rest.address().port}`,
  MAILSEND_SMTP_HOST: "localhost",
  MAILSEND_SMTP_PORT: String(smtp.server.address().port),
  MAILSEND_SMTP_TLS: "starttls",
  NODE_EXTRA_CA_CERTS: tls.caPath,
};
const msg = ["send", "-f", "bench@example.com", "-t", "sink@example.com", "-s", "memory", "--text", "see attachment"];

async function peak(transport, file) {
  const rss = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await runOnce(
      process.execPath,
      [BIN, ...msg, "--transport", transport, "--attach", file, "--timeout", "120"],
      { env },
    );
    if (r.code !== 0) throw new Error(`${transport} send failed (${r.code}): ${r.stderr}`);
    rss.push(r.rssKB / 1024);
  }
  return median(rss);
}

try {
  const rows = [];
  for (const transport of ["rest", "smtp"]) {
    const base = await peak(transport, small);
    const large = await peak(transport, big);
    rows.push({
      transport,
      "small msg peak RSS MB": base.toFixed(1),
      [`${SIZE_MB} MB attachment peak RSS MB`]: large.toFixed(1),
      "difference MB": (large - base).toFixed(1),
      "target < 64 MB": large - base < 64 ? "OK" : "MISSED",
    });
  }
  console.log(`\nPeak RSS of one \`mailsend send\` process, median of ${RUNS} runs\n`);
  table(rows, Object.keys(rows[0]));
  console.log(`\n(bytes received: REST ${(restBytes / 1e6).toFixed(0)} MB, SMTP ${(smtpBytes / 1e6).toFixed(0)} MB)`);
} finally {
  rest.close();
  smtp.close();
  rmSync(tlsModule, { force: true });
  rmSync(work, { recursive: true, force: true });
}
