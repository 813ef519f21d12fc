/**
 * Bursts through `sendmail` with the service's rate limit in the way: 100
 * messages from 10 concurrent callers against a sandbox that takes 20 per
 * window. Nothing but the callers runs: no `queue run`, no relay, no timer;
 * what the budget does not allow at once is queued, and the runner a caller
 * starts in the background delivers it. Zero refusals reach the callers, zero
 * 429s reach the sandbox, and the sandbox ends with each message exactly once.
 * The window is short (MAILSEND_RATE_WINDOW and the sandbox's own: 8 s) so
 * the budget lets the 100 through in about forty seconds, not five minutes; a
 * busy machine's 100 process starts may take longer than that themselves.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { baseEnv, copyMailsend, mailsendCommand } from "../helpers/cli.js";
import { inProcessSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

const s: Scratch = scratch("mailsend-sendmail-burst-");
const sendmail = join(s.dir, "sendmail");
// A copy for this file's minutes of process starts: `npm run build` swaps dist/ whole, and a caller
// started before a rebuild elsewhere would not find its chunks after.
const build = copyMailsend(join(s.dir, "build"));
symlinkSync(build, sendmail);
let t: TestSandbox | undefined;

afterEach(async () => {
  stopRunners();
  await t?.stop();
  t = undefined;
});
afterAll(() => {
  stopRunners();
  s.remove();
});

/**
 * The background runners the callers started for this test file's outboxes
 * (found by the outbox dir in their environment), stopped if a failed test
 * left one running.
 */
function runnerPids(): number[] {
  const pids: number[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const environ = readFileSync(`/proc/${p}/environ`, "latin1");
      if (
        environ.includes(`MAILSEND_OUTBOX_DIR=${s.dir}`) &&
        readFileSync(`/proc/${p}/cmdline`, "latin1").includes("queue")
      )
        pids.push(Number(p));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}
function stopRunners(): void {
  for (const pid of runnerPids()) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

function callerEnv(
  stateDir: string,
  windowS: number,
  limit: number,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    ...baseEnv(),
    ...t!.env,
    MAILSEND_STATE_DIR: stateDir,
    MAILSEND_RATE_LIMIT: String(limit),
    MAILSEND_RATE_WINDOW: String(windowS),
    MAILSEND_RETRIES: "3",
    MAILSEND_FROM: "burst@example.com",
    ...extra,
  };
}

interface CallerRun {
  exitCode: number;
  stderr: string;
}

async function caller(env: Record<string, string>, subjects: string[]): Promise<CallerRun[]> {
  const out: CallerRun[] = [];
  for (const subject of subjects) {
    const r = await execa(sendmail, ["-t", "-i"], {
      reject: false,
      extendEnv: false,
      env,
      input: `To: rcpt@example.com\nSubject: ${subject}\n\nburst message ${subject}\n`,
      timeout: 60_000,
      encoding: "utf8",
    });
    out.push({ exitCode: r.exitCode ?? -1, stderr: String(r.stderr ?? "") });
  }
  return out;
}

async function storedSubjects(prefix: string): Promise<string[]> {
  return (await t!.sb.store.list({ limit: 100_000 })).map((m) => m.subject).filter((x) => x.startsWith(prefix));
}

function queuedFiles(outboxDir: string): string[] {
  const q = join(outboxDir, "queue");
  return existsSync(q) ? readdirSync(q).filter((f) => f.endsWith(".msg")) : [];
}

/** Wait (bounded) until the sandbox holds `n` messages of the burst and the outbox is empty. */
async function drained(prefix: string, n: number, outboxDir: string, limitMs: number): Promise<void> {
  const until = Date.now() + limitMs;
  while (Date.now() < until) {
    if ((await storedSubjects(prefix)).length >= n && queuedFiles(outboxDir).length === 0) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

function refusals(): number {
  const st = t!.sb.stats.toJSON();
  return st.rest.rateLimited + st.smtp.rateLimited;
}

describe("bursts through sendmail", () => {
  it("100 messages from 10 concurrent callers, a limit of 20 per window: none refused, zero 429s, each delivered exactly once", {
    timeout: 900_000,
  }, async () => {
    const WINDOW_S = 8;
    t = await inProcessSandbox({ rateLimit: 20, rateWindowMs: WINDOW_S * 1000 });
    const state = join(s.dir, "state-100");
    mkdirSync(state);
    const outbox = join(s.dir, "outbox-100");
    const env = callerEnv(state, WINDOW_S, 20, { MAILSEND_OUTBOX_DIR: outbox });
    // The window's 20 are used up first (one batch, fast), so the callers meet a spent budget
    // however fast or slow this machine starts their processes: the outbox must take part.
    const rows = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({ to: "rcpt@example.com", subject: `prefill ${i}`, text: "x" }),
    ).join("\n");
    const prefill = await execa(
      ...mailsendCommand(["batch", "-", "-f", "burst@example.com", "--concurrency", "8", "-q"], build),
      {
        reject: false,
        extendEnv: false,
        env,
        input: `${rows}\n`,
        timeout: 120_000,
      },
    );
    expect(prefill.exitCode, String(prefill.stderr)).toBe(0);
    expect(await storedSubjects("prefill ")).toHaveLength(20);
    const runs = await Promise.all(
      Array.from({ length: 10 }, (_, c) =>
        caller(
          env,
          Array.from({ length: 10 }, (_, m) => `burst100 c${c} m${m}`),
        ),
      ),
    );
    const all = runs.flat();
    // Zero refusals reach the callers: every one exits 0, saying nothing or that it queued.
    const bad = all.filter(
      (r) => r.exitCode !== 0 || (r.stderr !== "" && !/^mailsend: queued as \S+ .*mailsend queue\n?$/.test(r.stderr)),
    );
    expect(bad.slice(0, 3)).toEqual([]);
    const queued = all.filter((r) => r.stderr.includes("queued as")).length;

    await drained("burst100 ", 100, outbox, 300_000);
    const got = await storedSubjects("burst100 ");
    const counts = new Map<string, number>();
    for (const x of got) counts.set(x, (counts.get(x) ?? 0) + 1);
    expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
    expect(counts.size).toBe(100);
    expect(refusals()).toBe(0);
    expect(queuedFiles(outbox)).toEqual([]);
    expect(queued).toBeGreaterThan(0);
    console.log(
      `sendmail burst: 100 messages, ${queued} queued by the callers and delivered by the background runner, ${100 - queued} sent at once`,
    );
  });

  it("nothing but the callers: a burst queued through sendmail drains by itself (no queue run, no relay, no timer)", {
    timeout: 180_000,
  }, async () => {
    const WINDOW_S = 3;
    t = await inProcessSandbox({ rateLimit: 10, rateWindowMs: WINDOW_S * 1000 });
    const state = join(s.dir, "state-drain");
    mkdirSync(state);
    const outbox = join(s.dir, "outbox-drain");
    const env = callerEnv(state, WINDOW_S, 10, { MAILSEND_OUTBOX_DIR: outbox, MAILSEND_QUEUE: "always" });
    const runs = await Promise.all(
      Array.from({ length: 4 }, (_, c) =>
        caller(
          env,
          Array.from({ length: 6 }, (_, m) => `drain c${c} m${m}`),
        ),
      ),
    );
    for (const r of runs.flat()) {
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/^mailsend: queued as \S+ /);
    }
    await drained("drain ", 24, outbox, 120_000);
    const got = await storedSubjects("drain ");
    expect(got.length).toBe(24);
    expect(new Set(got).size).toBe(24);
    expect(refusals()).toBe(0);
    expect(queuedFiles(outbox)).toEqual([]);
    // The runner a caller started logs beside the outbox, and exits once it is empty.
    expect(existsSync(join(outbox, "runner.log"))).toBe(true);
    await until(() => runnerPids().length === 0, { what: "the runners to exit", timeoutMs: 30_000, everyMs: 200 });
    expect(runnerPids()).toEqual([]);
  });
});
