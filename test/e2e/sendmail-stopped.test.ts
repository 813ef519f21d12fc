/**
 * A sendmail stopped during its at-once attempt never leaves its message in the outbox with
 * nobody to deliver it: the built CLI, started as `sendmail`, against an in-process sandbox that
 * answers slowly.
 *  - SIGTERM (a cron job's timeout, systemd stopping a unit): the attempt ends, the message stays
 *    queued, the caller hears "queued as" and exit 0, and it is delivered once.
 *  - kill -9: nothing in the process can act; once its hold has run out, the next sendmail that
 *    sends (and so queues nothing of its own) starts a runner for it.
 */
import { execa } from "execa";
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { baseEnv, BIN, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
let s: Scratch;
let sendmail: string;
let seq = 0;

useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-sendmail-stopped-");
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  symlinkSync(BIN, sendmail);
});
afterEach(() => {
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
});
afterAll(async () => {
  s?.remove();
});

function env(state: string, extra: Record<string, string | undefined> = {}): Record<string, string> {
  const e: Record<string, string | undefined> = {
    ...baseEnv(),
    ...t.env,
    MAILSEND_STATE_DIR: state,
    MAILSEND_TRANSPORT: "rest",
    ...extra,
  };
  return Object.fromEntries(Object.entries(e).filter((kv): kv is [string, string] => kv[1] !== undefined));
}

const message = (subject: string) =>
  `From: cron@example.com\nTo: ops@example.com\nSubject: ${subject}\nContent-Type: text/html\n\n<p>${subject}</p>\n`;
const queued = (state: string) => readdirSync(join(state, "outbox", "queue")).filter((f) => f.endsWith(".msg"));
const stored = async (subject: string) =>
  (await t.sb.store.list({ limit: 1000 })).filter((m) => m.subject === subject).length;

/**
 * The sandbox answers at once again; the stopped attempt's message, due now, is delivered by a
 * queue run, and stored once: the service drops the repeat of a request it may have taken.
 */
async function deliveredOnce(state: string, e: Record<string, string>, subject: string) {
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
  expect(
    (await execa(...mailsendCommand(["queue", "retry", "--all"]), { env: e, extendEnv: false, reject: false }))
      .exitCode,
  ).toBe(0);
  const run = await execa(...mailsendCommand(["queue", "run"]), {
    env: e,
    extendEnv: false,
    reject: false,
    timeout: 30_000,
  });
  expect(run.exitCode, run.stderr).toBe(0);
  expect(queued(state)).toHaveLength(0);
  await new Promise((r) => setTimeout(r, 2_500)); // the first request's slow answer has come and gone
  expect(await stored(subject)).toBe(1);
}

/** Until the message is in the outbox and its at-once attempt's request has gone out. */
async function attemptUnderWay(state: string) {
  await until(() => {
    try {
      return queued(state).length === 1;
    } catch {
      return false;
    }
  }, 20_000);
  await new Promise((r) => setTimeout(r, 700));
}

/** A sendmail whose at-once attempt is under way (its message in the outbox, the request sent). */
async function inFlight(state: string, subject: string, e: Record<string, string>) {
  mkdirSync(state, { recursive: true });
  const child = execa(sendmail, ["-t"], {
    env: e,
    extendEnv: false,
    input: message(subject),
    reject: false,
    timeout: 30_000,
  });
  await attemptUnderWay(state);
  // Wrapped: an async function returning the (thenable) child would wait for it to end.
  return { child };
}

it("SIGTERM during the attempt: 'queued as', exit 0; the message waits in the outbox and is delivered once", async () => {
  const state = join(s.dir, `state-${++seq}`);
  const e = env(state, { MAILSEND_QUEUE_AUTORUN: "0" });
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 2_000 };
  const { child } = await inFlight(state, "stopped by SIGTERM", e);
  child.kill("SIGTERM");
  const r = await child;
  expect(r.exitCode, r.stderr).toBe(0);
  expect(r.stderr).toMatch(/^mailsend: queued as \w+ \(.*interrupted.*\)/);
  expect(queued(state)).toHaveLength(1);
  await deliveredOnce(state, e, "stopped by SIGTERM");
});

it("kill -9 during the attempt: once its hold has run out, the next sendmail that sends starts a runner, which delivers it once", async () => {
  const state = join(s.dir, `state-${++seq}`);
  const e = env(state, { MAILSEND_QUEUE_AUTORUN: undefined });
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 2_000 };
  const { child } = await inFlight(state, "stranded by kill -9", e);
  child.kill("SIGKILL");
  await child;
  const [msg] = queued(state);
  const id = msg!.replace(/\.msg$/, "");
  // Two minutes later, as far as the outbox can tell: the hold of the killed attempt has run out.
  const statePath = join(state, "outbox", "queue", `${id}.state`);
  const held = JSON.parse(readFileSync(statePath, "utf8")) as { attempts: number; nextAttemptAt: number };
  expect(held.nextAttemptAt).toBeGreaterThan(Date.now());
  writeFileSync(statePath, JSON.stringify({ ...held, nextAttemptAt: Date.now() - 1_000 }));
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
  const next = await execa(sendmail, ["-t"], {
    env: e,
    extendEnv: false,
    input: message("the next one"),
    reject: false,
    timeout: 30_000,
  });
  expect(next.exitCode, next.stderr).toBe(0);
  expect(next.stderr).toBe("");
  await until(() => queued(state).length === 0, 30_000);
  await new Promise((r) => setTimeout(r, 2_500));
  expect(await stored("stranded by kill -9")).toBe(1);
  expect(await stored("the next one")).toBe(1);
  expect(readFileSync(join(state, "outbox", "runner.log"), "utf8")).toContain(id);
});

it("sendmail -bs: SIGTERM during a message's attempt answers it 250 as queued, ends the session, exit 0; delivered once", async () => {
  const state = join(s.dir, `state-${++seq}`);
  mkdirSync(state, { recursive: true });
  const e = env(state, { MAILSEND_QUEUE_AUTORUN: "0" });
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 2_000 };
  const subject = "bs stopped by SIGTERM";
  // The caller keeps stdin open after the message (a PHP mailer between messages, or waiting for the reply).
  const child = execa(sendmail, ["-bs"], { env: e, extendEnv: false, stdin: "pipe", reject: false, timeout: 30_000 });
  child.stdin!.write(
    `EHLO app.example\r\nMAIL FROM:<cron@example.com>\r\nRCPT TO:<ops@example.com>\r\nDATA\r\n${message(subject).replace(/\n/g, "\r\n")}.\r\n`,
  );
  await attemptUnderWay(state);
  child.kill("SIGTERM");
  const r = await child;
  expect(r.exitCode, `${r.stderr} (signal ${r.signal})`).toBe(0);
  expect(String(r.stdout)).toMatch(/\r\n250 2\.0\.0 Ok: queued as \w+\s*$/);
  expect(queued(state)).toHaveLength(1);
  await deliveredOnce(state, e, subject);
});
