// `npm run demo`: the first thing to run after install. Starts a sandbox on
// free ports in a temp dir, sends one message over REST and one over SMTP
// (with an attachment) using the built CLI exactly as a user would, prints
// the inbox, stops the sandbox, removes the temp dir, and says what to run next.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const BIN = fileURLToPath(new URL("../bin/mailsend.js", import.meta.url));
// `npm run demo | head` closes our stdout early: carry on quietly so the sandbox is still stopped.
process.stdout.on("error", () => {});

const dir = mkdtempSync(join(tmpdir(), "mailsend-demo-"));
const dataDir = join(dir, "sandbox");

const bold = process.stdout.isTTY && !process.env.NO_COLOR ? (s) => `\u001b[1m${s}\u001b[0m` : (s) => s;

function say(line) {
  process.stdout.write(`\n${bold(line)}\n`);
}

/** Run the CLI with the sandbox's variables; echo the command and its output. */
function mailsend(args, env) {
  process.stdout.write(`$ mailsend ${args.map((a) => (/^[\w@%+=:,./#<>-]+$/.test(a) ? a : `'${a}'`)).join(" ")}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, NO_COLOR: "1" },
      stdio: ["ignore", "inherit", "inherit"],
    });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`mailsend ${args[0]} exited with ${code}`))));
  });
}

function startSandbox() {
  const child = spawn(
    process.execPath,
    [BIN, "sandbox", "--dir", dataDir, "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0", "--json"],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the sandbox did not start within 20 s")), 20_000);
    createInterface({ input: child.stdout }).once("line", (line) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line));
      } catch (e) {
        reject(e);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the sandbox exited with ${code} before it was ready`));
    });
  });
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve(child.exitCode);
      child.once("exit", (code) => resolve(code));
      child.kill("SIGTERM");
    });
  return { ready, stop };
}

let sandbox;
let failed = false;
try {
  say("1. Start a sandbox (a local copy of the service) on free ports");
  sandbox = startSandbox();
  const ready = await sandbox.ready;
  process.stdout.write(
    `REST ${ready.base_url}/send, SMTP ${ready.smtp.host}:${ready.smtp.port} (STARTTLS) and :${ready.smtps.port} (TLS), inbox ${ready.inbox_url}\n`,
  );
  const env = ready.env;

  say("2. Send a message over REST (POST /send)");
  await mailsend(
    [
      "send",
      "--from",
      "Demo <demo@example.com>",
      "--to",
      "you@example.com",
      "--subject",
      "Hello over REST",
      "--html",
      "<h1>Hello</h1><p>Sent with mailsend over REST.</p>",
    ],
    env,
  );

  say("3. Send a message over SMTP (STARTTLS, AUTH LOGIN) with an attachment");
  const report = join(dir, "report.csv");
  writeFileSync(report, "build,status,tests\n42,passed,311\n");
  await mailsend(
    [
      "send",
      "--transport",
      "smtp",
      "--from",
      "CI <ci@example.com>",
      "--to",
      "you@example.com",
      "--subject",
      "Build #42 passed",
      "--text",
      "All 311 tests passed. Report attached.",
      "--attach",
      report,
    ],
    env,
  );

  say("4. What the sandbox stored");
  await mailsend(["inbox", "--dir", dataDir], {});
} catch (e) {
  failed = true;
  process.stderr.write(`demo failed: ${e instanceof Error ? e.message : e}\n`);
} finally {
  if (sandbox) {
    const code = await sandbox.stop();
    if (!failed) say(`5. Sandbox stopped (exit ${code}); its data dir is removed`);
  }
  rmSync(dir, { recursive: true, force: true });
}
// The sandbox above is gone, so its variables would point at nothing: the next step is one that lasts.
if (!failed) {
  say("Next: your own sandbox");
  process.stdout.write(
    "Put mailsend on your PATH (`npm link`, or `npm install -g .`), then run `mailsend sandbox` in a\n",
  );
  process.stdout.write(
    "terminal of its own: it keeps running and prints the export lines that point mailsend at it.\n",
  );
}
process.exitCode = failed ? 1 : 0;
