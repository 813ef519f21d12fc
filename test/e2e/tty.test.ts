/**
 * mailsend on a terminal, for real: the built binary run under script(1),
 * which gives it a pseudo-terminal. script's terminal reports a width of 0
 * (as `docker run -t` without a size does); the countdown of a rate-limit
 * wait must not loop on that, and the send must go out once the slot frees.
 */
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { baseEnv, mailsendShell } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, script } from "../helpers/tools.js";

const state = scratch("mailsend-tty-");
let t: TestSandbox;

useSandbox((sb) => (t = sb));
afterAll(async () => {
  state.remove();
});

describe.skipIf(lacks(script))("on a terminal (script(1))", () => {
  it("a rate-limit wait on a terminal with no width: one line, no runaway redraw, and the send goes out", async () => {
    const env = {
      ...baseEnv(),
      ...t.env,
      MAILSEND_STATE_DIR: state.dir,
      MAILSEND_RATE_LIMIT: "1",
      MAILSEND_RATE_WINDOW: "8",
    };
    const send = (subject: string) =>
      mailsendShell(["send", "-f", "a@example.com", "-t", "b@example.com", "-s", subject, "--text", "x"]);
    // The first send takes the only slot; the second waits for it (up to 8 s: longer than a
    // loaded machine takes to start the second process), on the terminal.
    const r = await execa(script.path!, ["-qfec", `${send("tty 1")} && ${send("tty 2")}`, "/dev/null"], {
      env,
      extendEnv: false,
      reject: false,
      timeout: 30_000,
      stdin: "ignore",
    });
    expect(r.timedOut).toBe(false);
    expect(r.exitCode, String(r.stdout)).toBe(0);
    const out = String(r.stdout);
    expect(out.length).toBeLessThan(10_000);
    expect(out).toMatch(/rate limit for this key reached; waiting \d+ s/);
    expect((await t.sb.store.list()).map((m) => m.subject).sort()).toEqual(["tty 1", "tty 2"]);
  }, 60_000);
});
