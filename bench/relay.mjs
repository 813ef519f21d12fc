// Relay intake: messages accepted per second by `mailsend relay` (each one
// validated and fsynced into the outbox before its 250), from 8 concurrent
// SMTP clients (nodemailer, one pooled connection each), against the floor: a
// bare smtp-server in its own process that writes and fsyncs the same files
// the same way (temp file, fsync, rename, fsync of the directory) and does
// nothing else. The relay runs with --no-deliver: this measures taking mail,
// not delivering it. Rounds alternate (floor, relay, ...) and the medians are
// compared: aim >= 0.8 of the floor.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import nodemailer from "nodemailer";
import { BIN, median, ROOT, table } from "./lib.mjs";

const MESSAGES = Number(process.env.BENCH_RELAY_MESSAGES ?? 1500);
const CLIENTS = Number(process.env.BENCH_RELAY_CLIENTS ?? 8);
const ROUNDS = Number(process.env.BENCH_RELAY_ROUNDS ?? 3);

// The floor: smtp-server, and per message exactly the outbox's writes.
const FLOOR = `
import { SMTPServer } from "smtp-server";
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { join } from "node:path";
const dir = process.argv[1];
const q = join(dir, "queue"), tmp = join(dir, "tmp");
mkdirSync(q, { recursive: true }); mkdirSync(tmp, { recursive: true });
async function store(raw, envelope) {
  const id = Date.now().toString(36) + randomBytes(6).toString("hex");
  const t = join(tmp, id + ".tmp");
  const fh = await open(t, "wx", 0o600);
  await fh.write(Buffer.from(JSON.stringify({ v: 1, id, envelope, size: raw.length }) + "\\n"));
  await fh.write(raw);
  await fh.sync();
  await fh.close();
  await rename(t, join(q, id + ".msg"));
  const d = await open(q, "r"); await d.sync(); await d.close();
  return id;
}
const server = new SMTPServer({
  authOptional: true, disabledCommands: ["AUTH", "STARTTLS"], size: 25 * 1024 * 1024, logger: false, disableReverseLookup: true,
  onData(stream, session, cb) {
    const chunks = [];
    stream.on("data", (c) => chunks.push(c));
    stream.on("end", () => {
      const envelope = { from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", to: session.envelope.rcptTo.map((r) => r.address) };
      store(Buffer.concat(chunks), envelope).then((id) => cb(null, "2.0.0 queued as " + id), (e) => cb(Object.assign(new Error("4.3.1 " + e.message), { responseCode: 452 })));
    });
  },
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ ready: true, port: server.server.address().port })));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`;

function startChild(args, env) {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const ready = new Promise((resolve, reject) => {
    lines.once("line", (l) => resolve(JSON.parse(l)));
    child.once("exit", (code) => reject(new Error(`exited ${code} before it was ready`)));
  });
  return {
    ready,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

function message(i) {
  return {
    from: "App <app@example.com>",
    to: "dev@example.com",
    subject: `relay bench ${i}`,
    html: `<p>Build ${i} passed.</p><p>${"All tests passed. ".repeat(20)}</p>`,
  };
}

/** MESSAGES messages over CLIENTS connections at once; resolves to accepted per second. */
async function drive(port) {
  const clients = Array.from({ length: CLIENTS }, () =>
    nodemailer.createTransport({
      host: "127.0.0.1",
      port,
      secure: false,
      ignoreTLS: true,
      pool: true,
      maxConnections: 1,
      maxMessages: Infinity,
    }),
  );
  // Warm-up: the connections, the JIT, the file system's first allocations.
  await Promise.all(clients.map((c, k) => c.sendMail(message(`warm ${k}`))));
  let next = 0;
  let accepted = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    clients.map(async (c) => {
      while (next < MESSAGES) {
        const i = next++;
        const info = await c.sendMail(message(i));
        if (/^250 /.test(info.response)) accepted++;
      }
    }),
  );
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  for (const c of clients) c.close();
  if (accepted !== MESSAGES) throw new Error(`only ${accepted} of ${MESSAGES} accepted`);
  return MESSAGES / s;
}

const work = mkdtempSync(join(tmpdir(), "mailsend-bench-relay-"));
const rates = { floor: [], relay: [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const which of ["floor", "relay"]) {
      const dir = join(work, `${which}-${r}`);
      const env = {
        ...process.env,
        NO_COLOR: "1",
        MAILSEND_STATE_DIR: join(dir, "state"),
        MAILSEND_OUTBOX_DIR: join(dir, "outbox"),
        MAILSEND_CONFIG: join(dir, "none.json"),
      };
      const child =
        which === "floor"
          ? startChild(["--input-type=module", "-e", FLOOR, join(dir, "outbox")], env)
          : startChild(
              [BIN, "relay", "--listen", "127.0.0.1:0", "--json", "--no-deliver", "--max-clients", String(CLIENTS + 2)],
              env,
            );
      try {
        const { port } = await child.ready;
        rates[which].push(await drive(port));
      } finally {
        await child.stop();
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const floor = median(rates.floor);
const relay = median(rates.relay);
console.log(
  `${MESSAGES} messages per round, ${CLIENTS} concurrent SMTP clients, ${ROUNDS} rounds, load ${loadavg()[0].toFixed(2)} (medians)`,
);
table(
  [
    {
      server: "bare smtp-server + fsync (floor)",
      "msg/s": floor.toFixed(0),
      rounds: rates.floor.map((x) => x.toFixed(0)).join(" "),
      ratio: "1.00",
    },
    {
      server: "mailsend relay (validate + outbox)",
      "msg/s": relay.toFixed(0),
      rounds: rates.relay.map((x) => x.toFixed(0)).join(" "),
      ratio: (relay / floor).toFixed(2),
    },
  ],
  ["server", "msg/s", "rounds", "ratio"],
);
console.log(`ratio ${(relay / floor).toFixed(2)} (aim >= 0.8)`);
