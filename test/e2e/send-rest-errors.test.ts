/**
 * The REST service's own errors, and the network's: each maps to its exit
 * code (sysexits) with a one-line explanation and a hint.
 * (Retries are off in the test environment: one answer, one outcome.)
 */
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { ensureTls } from "../../src/sandbox/tls.js";
import { runCli, runInProcess, stderrJson } from "../helpers/cli.js";
import { startTlsFront } from "../helpers/proxy.js";
import { startRestRecorder, useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_resterr_Yb6Nc1Xs";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
afterAll(() => tmp.remove());

const MB = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--html", "<p>x</p>"];

function send(extra: string[] = [], env: Record<string, string | undefined> = {}) {
  // NODE_EXTRA_CA_CERTS is read when Node starts: with it, the CLI runs as a process.
  return (env.NODE_EXTRA_CA_CERTS ? runCli : runInProcess)(["send", ...MB, ...extra], {
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...env },
  });
}

const sandboxError = (code: string, message: string) => ({ success: false, error: { code, message } });

describe("HTTP status -> exit code", () => {
  it.each([
    [
      400,
      65,
      sandboxError("invalid_request", "to: not a valid address"),
      /rejected the message as invalid \(HTTP 400\).*not a valid address/,
    ],
    [401, 77, sandboxError("unauthorized", "missing or wrong API key"), /refused the API key \(HTTP 401\)/],
    [403, 77, sandboxError("forbidden", "API key revoked"), /not allowed to send \(HTTP 403\)/],
    [413, 65, sandboxError("too_large", "request body too large"), /too large.*HTTP 413/],
    [429, 75, sandboxError("rate_limited", "60 per minute"), /rate limit exceeded \(HTTP 429\)/],
    [500, 69, "Internal Server Error", /service failed \(HTTP 500\).*Internal Server Error/],
    [502, 69, "<html>Bad Gateway</html>", /HTTP 502/],
    [503, 69, sandboxError("unavailable", "maintenance"), /HTTP 503/],
    [404, 78, "Not Found", /no send endpoint.*HTTP 404/],
    [415, 76, sandboxError("unsupported_media_type", "not JSON"), /unexpected answer.*HTTP 415/],
  ] as const)("%i -> %i", async (status, exit, body, says) => {
    rec.script({ status, body });
    const r = await send();
    expect(r.exitCode).toBe(exit);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(says);
    expect(r.stderr).toMatch(/\nhint: |^error: [^\n]+\n$/);
    expect(r.stderr.split("\n")[0]!.length).toBeLessThan(500);
    expect(rec.requests).toHaveLength(1);
  });

  it("429 says how long the service asked to wait", async () => {
    rec.script({ status: 429, body: sandboxError("rate_limited", "slow down"), headers: { "Retry-After": "42" } });
    const r = await send(["--json"]);
    expect(r.exitCode).toBe(75);
    const e = stderrJson(r).error;
    expect(e).toMatchObject({ code: "rate_limited", exit: 75, status: 429 });
    expect(e.message).toMatch(/42 s/);
  });

  it("--json errors carry the HTTP status", async () => {
    rec.script({ status: 401, body: sandboxError("unauthorized", "nope") });
    const r = await send(["--json"]);
    expect(r.exitCode).toBe(77);
    expect(r.stdout).toBe("");
    expect(stderrJson(r).error).toMatchObject({ code: "auth_failed", exit: 77, status: 401 });
  });
});

describe("answers that are not what the service sends", () => {
  it("200 with success:false -> 69", async () => {
    rec.script({ status: 200, body: { success: false } });
    const r = await send();
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/success: false/);
  });

  it("200 with a body that is not JSON -> 76, may have been sent", async () => {
    rec.script({ status: 200, body: "<html>OK</html>" });
    const r = await send();
    expect(r.exitCode).toBe(76);
    expect(r.stderr).toMatch(/without success and message_id/);
    expect(r.stderr).toMatch(/hint:.*may have been sent/);
  });

  it("200 without message_id -> 76", async () => {
    rec.script({ status: 200, body: { success: true } });
    expect((await send()).exitCode).toBe(76);
  });

  it("an error body longer than a screen is cut to an excerpt", async () => {
    rec.script({ status: 500, body: `<html>${"x".repeat(20_000)}</html>` });
    const r = await send();
    expect(r.exitCode).toBe(69);
    expect(r.stderr.length).toBeLessThan(1000);
  });
});

describe("network failures", () => {
  it("connection refused (a closed port) -> 69, nothing sent", async () => {
    const closed = await startRestRecorder();
    const url = closed.url;
    await closed.close();
    const r = await send([], { MAILSEND_BASE_URL: url });
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/connection refused/);
    expect(r.stderr).toMatch(/hint:.*Nothing was sent/);
  });

  it("an unknown host -> 69", async () => {
    const r = await send([], { MAILSEND_BASE_URL: "http://mailsend-test.invalid" });
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/host not found/);
  });

  it("--timeout 1 against a server that does not answer -> 76, and the hint names the idempotency key", async () => {
    // The server would answer only after 20 s: a client that ignored --timeout would be far slower
    // (the bound is loose on purpose: a shared machine is slow at times).
    rec.script({ delayMs: 20_000 });
    const t0 = Date.now();
    const r = await send(["--timeout", "1", "--idempotency-key", "retry-me-7"]);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(r.exitCode).toBe(76);
    expect(r.stderr).toMatch(/no answer .* within 1 s/);
    expect(r.stderr).toMatch(/hint:.*--idempotency-key retry-me-7/);
    expect(rec.requests).toHaveLength(1);
  });

  it("MAILSEND_TIMEOUT works like --timeout", async () => {
    rec.script({ delayMs: 4000 });
    const r = await send([], { MAILSEND_TIMEOUT: "1" });
    expect(r.exitCode).toBe(76);
  });

  it("the server hangs up after reading the request -> 76", async () => {
    rec.script({ destroy: "after-body" });
    const r = await send();
    expect(r.exitCode).toBe(76);
    expect(r.stderr).toMatch(/may have been sent/);
  });

  it("the server hangs up before reading a large body -> 69, nothing was sent", async () => {
    const big = tmp.file("big.bin", randomBytes(8 * 1024 * 1024));
    rec.script({ destroy: "before-body" });
    const r = await send(["-a", big]);
    expect(r.exitCode).toBe(69);
    expect(r.stderr).toMatch(/before the message was sent/);
    expect(rec.requests).toHaveLength(0);
  });
});

describe("a certificate for another host name", () => {
  it("78, and the hint names the certificate's names and the setting, not a CA to trust", async () => {
    // The service's certificate: a trusted CA, issued to its host name only; the base URL has its address.
    const named = await ensureTls(join(tmp.dir, "altname-tls"), ["api.example.test"]);
    const front = await startTlsFront(Number(new URL(rec.url).port), named);
    try {
      rec.script({ status: 200, body: { success: true, message_id: "m1" } });
      const r = await send(["--json"], { MAILSEND_BASE_URL: front.url, NODE_EXTRA_CA_CERTS: named.caPath });
      expect(r.exitCode).toBe(78);
      const e = stderrJson(r).error;
      expect(e.code).toBe("tls_untrusted");
      expect(e.hint).toContain(
        "The certificate is for DNS:api.example.test, not for 127.0.0.1: use a name it lists in --base-url / MAILSEND_BASE_URL, not its IP address.",
      );
      expect(rec.requests).toHaveLength(0);
    } finally {
      await front.stop();
    }
  });
});
