/**
 * `send` stopped by Ctrl-C or a SIGTERM (a CI step's timeout): it ends the attempt or the wait at
 * once and says what became of the message, then exits as a shell reports the signal (130, 143).
 * Stopped after the request went out, the message may have been sent: it says so, with the key that
 * makes a resend safe (dying silently, it would leave a script to resend under a new key). Stopped
 * while waiting for a rate-limit slot, nothing was sent, and it says that. The built CLI against
 * the sandbox.
 */
import { execa } from "execa";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { expect, it } from "vitest";
import { baseEnv, ROOT, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
// Stopping answers the held-back answers first (Faults.hurry).
useSandbox((sb) => (t = sb));

const stored = async (subject: string) => (await t.sb.store.list({ limit: 50 })).filter((m) => m.subject === subject);

function send(subject: string, extra: string[], env: Record<string, string> = {}) {
  return execa(
    ...mailsendCommand([
      "send",
      "-f",
      "ci@example.com",
      "-t",
      "dev@example.com",
      "-s",
      subject,
      "--text",
      "x",
      ...extra,
    ]),
    {
      env: { ...baseEnv(), ...t.env, ...env },
      extendEnv: false,
      reject: false,
      cwd: ROOT,
      timeout: 30_000,
    },
  );
}

for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const) {
  for (const transport of ["rest", "smtp"] as const) {
    it(`${transport}: ${signal} while the answer is awaited: ${code}, the message may have been sent, with the key`, async () => {
      t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 20_000 };
      const subject = `interrupted ${transport} ${signal}`;
      try {
        const child = send(subject, [
          "--transport",
          transport,
          "--idempotency-key",
          `int-${transport}-${signal}`,
          "--json",
        ]);
        await until(async () => (await stored(subject)).length > 0, 15_000);
        child.kill(signal);
        const r = await child;
        expect(r.exitCode, r.stderr).toBe(code);
        const error = JSON.parse(r.stderr.trim().split("\n").at(-1)!).error;
        expect(error.code).toBe("outcome_unknown");
        // The exit the process gave, not the code's own (76).
        expect(error.exit).toBe(code);
        expect(error.message).toMatch(/interrupted|gave no answer/);
        expect(error.hint).toContain(`int-${transport}-${signal}`);
        expect(error.hint).not.toMatch(/Nothing was sent/);
        expect(r.stdout).toBe("");
      } finally {
        t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
      }
      expect(await stored(subject)).toHaveLength(1);
    });
  }
}

it("SIGTERM while waiting for a rate-limit slot: 143, nothing was sent, and it says so", async () => {
  const env = {
    MAILSEND_STATE_DIR: join(t.scratch.dir, "state-wait"),
    MAILSEND_RATE_LIMIT: "1",
    MAILSEND_RATE_WINDOW: "60",
  };
  const first = await send("slot taker", ["-q"], env);
  expect(first.exitCode, first.stderr).toBe(0);
  const child = send("slot waiter", [], env);
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  await until(async () => /waiting/.test(err), 15_000);
  child.kill("SIGTERM");
  const r = await child;
  expect(r.exitCode, r.stderr).toBe(143);
  expect(r.stderr).toMatch(/error: interrupted \(SIGTERM\) before the message was sent/);
  expect(r.stderr).toMatch(/hint: Nothing was sent; it is safe to try again\./);
  expect(await stored("slot waiter")).toHaveLength(0);
});

it("Ctrl-C before the request went out (a TLS handshake that never ends) gives the rate-limit slot back", async () => {
  const sockets = new Set<Socket>();
  const silent = createServer((sock) => sockets.add(sock));
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const env = {
    MAILSEND_STATE_DIR: join(t.scratch.dir, "state-slot"),
    MAILSEND_RATE_LIMIT: "1",
    MAILSEND_RATE_WINDOW: "60",
  };
  try {
    const child = send("never handed over", ["--transport", "rest"], {
      ...env,
      MAILSEND_BASE_URL: `https://127.0.0.1:${(silent.address() as AddressInfo).port}`,
    });
    await until(() => sockets.size > 0, 15_000);
    await new Promise((r) => setTimeout(r, 300));
    child.kill("SIGINT");
    const r = await child;
    expect(r.exitCode, r.stderr).toBe(130);
    expect(r.stderr).toMatch(/Nothing was sent/);
  } finally {
    for (const sock of sockets) sock.destroy();
    await new Promise<void>((r) => silent.close(() => r()));
  }
  // The one slot of the minute is free again: the next send goes at once.
  const next = await send("after the interrupted one", ["--no-wait", "-q"], env);
  expect(next.exitCode, next.stderr).toBe(0);
});
