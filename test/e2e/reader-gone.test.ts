/**
 * A reader that went away (`mailsend send -v 2>&1 | head`, `mailsend batch rows.csv | head`): a
 * command that sends goes on without its output and exits as its work went, so a closed pipe
 * never stops a send half way nor ends a batch with exit 0 after its first rows. A command that
 * only shows things still ends there. The built binary, its output pipes closed before it
 * writes anything (so every write of it meets EPIPE), against the sandbox on 127.0.0.1.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { baseEnv, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let t: TestSandbox;
useSandbox((sb) => (t = sb), { rateLimit: 1_000_000 });

/** Runs the CLI with stdout and stderr on pipes whose reading ends are closed at once. */
function runReaderGone(args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(...mailsendCommand([...args]), {
      env: { ...baseEnv(), ...t.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy();
    child.stderr.destroy();
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

const subjects = async (prefix: string) =>
  (await t.sb.store.list()).map((m) => m.subject).filter((s) => s.startsWith(prefix));

describe("a reader that went away", () => {
  it("send -v: the message is sent and the exit code is the send's", async () => {
    const r = await runReaderGone([
      "send",
      "-f",
      "ci@example.com",
      "-t",
      "dev@example.com",
      "-s",
      "gone send",
      "--text",
      "x",
      "-v",
    ]);
    expect(r).toEqual({ code: 0, signal: null });
    expect(await subjects("gone send")).toEqual(["gone send"]);
  });

  it("a failed send still says so by its exit code", async () => {
    const r = await runReaderGone([
      "send",
      "-f",
      "ci@example.com",
      "-t",
      "not an address",
      "-s",
      "gone bad",
      "--text",
      "x",
      "-v",
    ]);
    expect(r.code).toBe(65);
    expect(await subjects("gone bad")).toEqual([]);
  });

  it("batch --json: every row is sent, not only those before the first result line", async () => {
    const file = join(t.scratch.dir, "rows.jsonl");
    const rows = Array.from({ length: 200 }, (_, i) =>
      JSON.stringify({ from: "ci@example.com", to: "dev@example.com", subject: `gone batch ${i}`, text: "x" }),
    );
    writeFileSync(file, `${rows.join("\n")}\n`);
    const r = await runReaderGone([
      "batch",
      file,
      "--journal",
      join(t.scratch.dir, "journal"),
      "--concurrency",
      "4",
      "--json",
    ]);
    expect(r).toEqual({ code: 0, signal: null });
    expect((await subjects("gone batch ")).length).toBe(200);
  });

  it.skipIf(!existsSync("/dev/full"))(
    "output to a full disk (/dev/full): a send that went is 0, a bad one its own code; a command that only shows things is 74",
    async () => {
      const full = () => openSync("/dev/full", "w");
      const run = (args: string[], out: "stdout" | "stderr" | "both") =>
        new Promise<number | null>((resolve, reject) => {
          const fd = full();
          const child = spawn(...mailsendCommand([...args]), {
            env: { ...baseEnv(), ...t.env },
            stdio: ["ignore", out === "stderr" ? "ignore" : fd, out === "stdout" ? "ignore" : fd],
          });
          closeSync(fd);
          child.once("error", reject);
          child.once("exit", (code) => resolve(code));
        });
      expect(
        await run(
          ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "gone full 1", "--text", "x"],
          "stdout",
        ),
      ).toBe(0);
      expect(
        await run(
          ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "gone full 2", "--text", "x", "-v", "--json"],
          "both",
        ),
      ).toBe(0);
      expect(
        await run(
          ["send", "-f", "not an address", "-t", "dev@example.com", "-s", "gone full 3", "--text", "x"],
          "stderr",
        ),
      ).toBe(65);
      expect((await subjects("gone full")).sort()).toEqual(["gone full 1", "gone full 2"]);
      expect(await run(["send", "--help"], "stdout")).toBe(74);
      // A value that reads "-h" is not a request for help: the message goes.
      expect(
        await run(
          ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "-h", "--text", "-h", "-v"],
          "stderr",
        ),
      ).toBe(0);
      expect((await subjects("-h")).length).toBe(1);
      // Show-only modes of sending commands say so: 74.
      expect(
        await run(
          ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "gone dry", "--text", "x", "--dry-run"],
          "stdout",
        ),
      ).toBe(74);
      expect(await run(["sendmail", "-bp"], "stdout")).toBe(74);
    },
  );

  it("a command that only shows things ends (exit 0), as `git log | head` does", async () => {
    const r = await runReaderGone(["send", "--help"]);
    expect(r).toEqual({ code: 0, signal: null });
  });
});
