/**
 * Time as a user meets it: --deadline bounds the attempts and the
 * waits between them (a hung endpoint cannot hold a CI step for
 * 4 x --timeout); a wait under a second is not "waiting 1 s"; -q still says a
 * long wait for the budget, once. The built binary against local servers.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, runInProcess, stderrJson, type RunOptions, mailsendCommand } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_waits_Vb3Nx8";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
/** Accepts TCP connections and never says a byte: a TLS handshake to it hangs. */
let silent: Server;
const sockets = new Set<Socket>();

beforeAll(async () => {
  silent = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  tmp.remove();
});

const MSG = ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--text", "x"];

function send(args: string[], opts: RunOptions = {}) {
  return runInProcess([...MSG, ...args], {
    ...opts,
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...opts.env },
  });
}

describe("--deadline", () => {
  it("a hung endpoint: given up at the deadline, not after 4 x --timeout; nothing sent, 75", async () => {
    const started = Date.now();
    const r = await send(["--timeout", "30", "--deadline", "2", "--json"], {
      env: { MAILSEND_BASE_URL: `https://127.0.0.1:${(silent.address() as AddressInfo).port}`, MAILSEND_RETRIES: "3" },
      timeoutMs: 30_000,
    });
    const took = Date.now() - started;
    expect(r.timedOut).toBe(false);
    expect(r.exitCode, r.stderr).toBe(75);
    expect(stderrJson(r).error).toMatchObject({ code: "timeout", exit: 75 });
    expect(stderrJson(r).error.message).toMatch(/no delivery within the 2 s deadline/);
    expect(stderrJson(r).error.hint).toMatch(/^Nothing was sent/);
    expect(took).toBeLessThan(15_000);
  });

  it("an answer held back after the message was handed over: stopped at the deadline as outcome unknown (76)", async () => {
    rec.script({ delayMs: 20_000 });
    const r = await send(["--deadline", "1", "--json"], { timeoutMs: 15_000 });
    expect(r.exitCode, r.stderr).toBe(76);
    expect(stderrJson(r).error.message).toMatch(/stopped at the 1 s deadline/);
    expect(rec.requests).toHaveLength(1);
  });

  it("no retry starts without room to finish before the deadline (-v says so)", async () => {
    rec.script({ status: 503, body: { success: false, error: { code: "unavailable", message: "down" } } });
    const r = await send(["--deadline", "1", "-v"], { env: { MAILSEND_RETRIES: "20" }, timeoutMs: 15_000 });
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/^\* no retry: it could not finish before the 1 s deadline$/m);
    expect(rec.requests.length).toBeLessThan(20);
  });

  it("--help prints the worst case, and says which statuses are retried", async () => {
    const r = await runInProcess(["send", "--help"]);
    expect(r.stdout).toMatch(/Worst case with the defaults: 60 s \+ 300 s = 6 min/);
    expect(r.stdout).toMatch(/--deadline <seconds>/);
    expect(r.stdout.replace(/\s+/g, " ")).toMatch(/HTTP 408, 429 and every 5xx \(500 too\)/);
  });
});

describe("the service's 429", () => {
  it("--no-wait: exit 75 at once, not a wait for Retry-After", async () => {
    rec.script({ status: 429, headers: { "Retry-After": "58" }, body: "slow down" }, { status: 200 });
    const r = await send(["--no-wait"], {
      env: { MAILSEND_RATE_LIMIT: "0", MAILSEND_RETRIES: "1" },
      timeoutMs: 20_000,
    });
    expect(r.exitCode, r.stderr).toBe(75);
    expect(r.stderr).toMatch(/429/);
    expect(rec.requests).toHaveLength(1);
  });

  it("without it, the wait is bounded by --max-wait, not by --deadline", async () => {
    rec.script({ status: 429, headers: { "Retry-After": "2" }, body: "slow down" }, { status: 200 });
    const r = await send(["--deadline", "1", "--json"], {
      env: { MAILSEND_RATE_LIMIT: "0", MAILSEND_RETRIES: "1" },
      timeoutMs: 20_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests).toHaveLength(2);
    expect(JSON.parse(r.stdout).attempts).toBe(2);
  });
});

describe("waits as they are said", () => {
  it("a retry after less than a second is not 'waiting 1 s'", async () => {
    rec.script({ status: 503, body: "busy" }, { status: 200 });
    const r = await send([], { env: { MAILSEND_RETRIES: "1" } });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/retry 1; waiting 0\.\d s$/m);
    expect(r.stderr).not.toMatch(/waiting 1 s/);
  });

  it("--json: a short wait's seconds are a fraction, not 1", async () => {
    rec.script({ status: 503, body: "busy" }, { status: 200 });
    const r = await send(["--json"], { env: { MAILSEND_RETRIES: "1" } });
    expect(r.exitCode, r.stderr).toBe(0);
    const wait = r.stderr
      .split("\n")
      .filter((l) => l.startsWith('{"wait"'))
      .map((l) => JSON.parse(l).wait)[0];
    expect(wait).toMatchObject({ reason: "retry", attempt: 2 });
    expect(wait.seconds).toBeGreaterThan(0);
    expect(wait.seconds).toBeLessThan(1);
  });

  it("-q says nothing for a short wait for the budget", async () => {
    const state = scratch("mailsend-waits-short-");
    const env = { MAILSEND_STATE_DIR: state.dir, MAILSEND_RATE_LIMIT: "1", MAILSEND_RATE_WINDOW: "2" };
    expect((await send(["-q"], { env })).exitCode).toBe(0);
    const r = await send(["-q"], { env });
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("");
    state.remove();
  });

  it("-q still prints one line when the wait for the budget is longer than 10 s", async () => {
    const state = scratch("mailsend-waits-long-");
    const env = { MAILSEND_STATE_DIR: state.dir, MAILSEND_RATE_LIMIT: "1", MAILSEND_RATE_WINDOW: "60" };
    expect((await send(["-q"], { env })).exitCode).toBe(0);
    const child = execa(...mailsendCommand([...MSG, "-q"]), {
      reject: false,
      extendEnv: false,
      env: { ...baseEnv(), MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...env },
      stdin: "ignore",
      timeout: 30_000,
    });
    let err = "";
    await new Promise<void>((resolve) => {
      child.stderr!.on("data", (d: Buffer) => {
        err += d.toString();
        if (err.includes("\n")) resolve();
      });
      void child.then(() => resolve());
    });
    child.kill("SIGTERM");
    expect((await child).exitCode).toBe(143);
    // The one wait line, then (an error, said under -q too) that the stop left nothing sent.
    expect(err).toMatch(
      /^mailsend: rate limit for this key reached; waiting (\d+) s\nerror: interrupted \(SIGTERM\) before the message was sent\nhint: Nothing was sent; it is safe to try again\.\n$/,
    );
    expect(Number(/waiting (\d+) s/.exec(err)![1])).toBeGreaterThan(10);
    expect(rec.requests).toHaveLength(1);
    state.remove();
  });
});
