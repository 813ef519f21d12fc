/**
 * One batch at a time per journal: two runs started together (overlapping cron jobs) must not both
 * decide "the input changed, this is a new batch" and send every row twice, with their own keys.
 * The built binary, two processes at once, against the sandbox on 127.0.0.1.
 */
import { execa } from "execa";
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, existsSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { baseEnv, mailsendCommand, runCli } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let t: TestSandbox;
useSandbox((sb) => (t = sb), { rateLimit: 1_000_000 });

const count = async (prefix: string) =>
  (await t.sb.store.list({ limit: 100_000 })).filter((m) => m.subject.startsWith(prefix)).length;

function rows(file: string, prefix: string, from: number, n: number): void {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({ from: "ci@example.com", to: "dev@example.com", subject: `${prefix} ${from + i}`, text: "x" }),
  );
  (from === 0 ? writeFileSync : appendFileSync)(file, `${lines.join("\n")}\n`);
}

describe("the journal's lock", () => {
  it("two runs at once after the input changed: one sends, the other is refused (75) and sends nothing", async () => {
    const file = join(t.scratch.dir, "nightly.jsonl");
    const journal = join(t.scratch.dir, "nightly.journal");
    rows(file, "lock twice", 0, 120);
    const first = await runCli(["batch", file, "--journal", journal, "-q"], { env: t.env });
    expect(first.exitCode, first.stderr).toBe(0);
    expect(await count("lock twice ")).toBe(120);
    rows(file, "lock twice", 120, 1);
    const run = () =>
      execa(...mailsendCommand(["batch", file, "--journal", journal, "-q"]), {
        env: { ...baseEnv(), ...t.env },
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
    const [a, b] = await Promise.all([run(), run()]);
    const codes = [a.exitCode, b.exitCode].sort();
    expect(codes).toEqual([0, 75]);
    const loser = a.exitCode === 75 ? a : b;
    expect(String(loser.stderr)).toMatch(
      /^error: another batch \(pid \d+\) is running with the journal .*nightly\.journal; nothing was sent by this one$/m,
    );
    // The first run's 120, and the winner's new batch of 121 (a changed input is a new batch): no third copy.
    expect(await count("lock twice ")).toBe(241);
    expect(existsSync(`${journal}.lock`)).toBe(false);
  });

  it("a lock left by a run killed with -9 (its process gone) is taken over", async () => {
    const file = join(t.scratch.dir, "after-crash.jsonl");
    const journal = join(t.scratch.dir, "after-crash.journal");
    rows(file, "lock stale", 0, 5);
    // A pid that is no process here.
    let dead = 4_000_000;
    while (dead > 1000) {
      try {
        process.kill(dead, 0);
        dead--;
      } catch {
        break;
      }
    }
    writeFileSync(`${journal}.lock`, `${dead}\n`);
    const r = await runCli(["batch", file, "--journal", journal, "-q"], { env: t.env });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(await count("lock stale ")).toBe(5);
    expect(existsSync(`${journal}.lock`)).toBe(false);
  });

  describe.runIf(process.platform === "linux")(
    "a live pid in the lock (Linux: its start time tells the process)",
    () => {
      const started: ChildProcess[] = [];
      afterAll(() => {
        for (const c of started) c.kill("SIGKILL");
      });
      const live = async (cmd: string, args: string[]): Promise<number> => {
        const c = spawn(cmd, args, { stdio: "ignore" });
        started.push(c);
        await new Promise((r) => c.once("spawn", r));
        return c.pid!;
      };
      const startOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]!.split(" ")[19]!;
      const run = async (name: string, lockText: string, n = 3) => {
        const file = join(t.scratch.dir, `${name}.jsonl`);
        const journal = join(t.scratch.dir, `${name}.journal`);
        rows(file, `lock ${name}`, 0, n);
        writeFileSync(`${journal}.lock`, lockText);
        const old = new Date(Date.now() - 2 * 86400_000);
        utimesSync(`${journal}.lock`, old, old);
        const r = await runCli(["batch", file, "--journal", journal, "-q"], { env: t.env });
        return { r, journal, sent: await count(`lock ${name} `) };
      };

      it("an older version's lock (pid only) whose pid is now another program's (not node) is taken over", async () => {
        const pid = await live("sleep", ["300"]);
        const { r, journal, sent } = await run("reused-sleep", `${pid}\n`);
        expect(r.exitCode, r.stderr).toBe(0);
        expect(sent).toBe(3);
        expect(existsSync(`${journal}.lock`)).toBe(false);
      });

      it("a lock whose pid now belongs to another node process (another start time) is taken over", async () => {
        const pid = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
        const { r, sent } = await run("reused-node", `${pid} ${Number(startOf(pid)) + 1}\n`);
        expect(r.exitCode, r.stderr).toBe(0);
        expect(sent).toBe(3);
      });

      it("the lock of a batch that runs (its pid and start time) is honoured: exit 75, nothing sent", async () => {
        const pid = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
        const { r, journal, sent } = await run("live-holder", `${pid} ${startOf(pid)}\n`);
        expect(r.exitCode).toBe(75);
        expect(r.stderr).toMatch(new RegExp(`another batch \\(pid ${pid}\\) is running`));
        expect(sent).toBe(0);
        expect(readFileSync(`${journal}.lock`, "utf8")).toBe(`${pid} ${startOf(pid)}\n`);
      });

      it("an older version's lock (pid only) of a live node process is honoured", async () => {
        const pid = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
        const { r, sent } = await run("live-old", `${pid}\n`);
        expect(r.exitCode).toBe(75);
        expect(sent).toBe(0);
      });
    },
  );
});
