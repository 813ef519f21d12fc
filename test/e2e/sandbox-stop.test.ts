/**
 * The sandbox stopped while an answer is held back by its latency fault: a message it stored is
 * answered as accepted before it closes, over SMTP (not "421 shutting down" after DATA, which
 * tells a client the message was not taken: swaks or PHPMailer would send it again, and it would be
 * stored twice) and over REST (not a connection cut unanswered). The built CLI is the client.
 */
import { execa } from "execa";
import { expect, it } from "vitest";
import { baseEnv, mailsendCommand } from "../helpers/cli.js";
import { inProcessSandbox } from "../helpers/sandbox.js";
import { until } from "../helpers/until.js";

for (const transport of ["smtp", "rest"] as const) {
  it(`${transport}: stopped with the answer held back, the stored message is answered as sent, and stored once`, async () => {
    const t = await inProcessSandbox({ faults: { latencyMs: 4_000 } });
    const subject = `stopped mid-answer over ${transport}`;
    try {
      const child = execa(
        ...mailsendCommand([
          "send",
          "--transport",
          transport,
          "-f",
          "ci@example.com",
          "-t",
          "dev@example.com",
          "-s",
          subject,
          "--text",
          "x",
        ]),
        {
          env: { ...baseEnv(), ...t.env },
          extendEnv: false,
          reject: false,
          timeout: 30_000,
        },
      );
      await until(async () => (await t.sb.store.list({ limit: 10 })).some((m) => m.subject === subject), 15_000);
      await t.stop();
      const r = await child;
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^sent /);
    } finally {
      await t.stop();
    }
    const again = await inProcessSandbox({ dir: t.dir }, t.scratch);
    try {
      expect((await again.sb.store.list({ limit: 10 })).filter((m) => m.subject === subject)).toHaveLength(1);
    } finally {
      await again.stop();
      t.scratch.remove();
    }
  });
}
