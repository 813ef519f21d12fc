/**
 * The one lock (src/core/lock.ts) that the batch journal, the sandbox's data dir and the rate-limit
 * state use, one property per test. Where a property is about another process (a dead pid, a pid
 * now another program's or given to a later process, a holder that exits), a real one is started.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildSync } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { exitCodeFor, type MailsendError } from "../../src/core/errors.js";
import { holderFileRuns, holderLine, tryLock, type Attempt } from "../../src/core/lock.js";
import { processHolds, processStartTime } from "../../src/core/pid.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-lock-");
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
  tmp.remove();
});

let n = 0;
const lockPath = () => join(tmp.dir, `l${n++}.lock`);
const opts = { what: "test lock" };
const released = (a: Attempt) => {
  expect(a).toHaveProperty("release");
  (a as { release: () => void }).release();
};

/** A pid that was a process and is no more (a child that exited and was reaped). */
function deadPid(): number {
  return Number(
    execFileSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }),
  );
}

async function live(cmd: string, args: string[]): Promise<number> {
  const c = spawn(cmd, args, { stdio: "ignore" });
  children.push(c);
  await new Promise((r) => c.once("spawn", r));
  return c.pid!;
}

const startOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]!.split(" ")[19]!;

/** Left `ms` ago. */
function aged(path: string, text: string, ms: number): void {
  writeFileSync(path, text);
  const t = new Date(Date.now() - ms);
  utimesSync(path, t, t);
}

describe("core/lock", () => {
  it("holds this process's pid and (Linux) its start time, and is removed when given back", () => {
    const path = lockPath();
    const a = tryLock(path, opts);
    const start = processStartTime();
    expect(readFileSync(path, "utf8")).toBe(`${process.pid}${start !== undefined ? ` ${start}` : ""}\n`);
    expect(holderLine()).toBe(readFileSync(path, "utf8"));
    if (process.platform === "linux") expect(start).toMatch(/^\d+$/);
    released(a);
    expect(existsSync(path)).toBe(false);
  });

  it("a second lock on the same path in this process is refused while the first holds it", () => {
    const path = lockPath();
    const a = tryLock(path, opts);
    expect(tryLock(path, opts)).toEqual({ holder: { pid: process.pid, here: true } });
    released(a);
    released(tryLock(path, opts));
  });

  it("a lock with this process's pid that it did not take (a container's pid 1 of an earlier run) is a dead one's: broken, then taken", () => {
    const path = lockPath();
    writeFileSync(path, `${process.pid}\n`);
    expect(tryLock(path, opts)).toEqual({ retry: "broken" });
    released(tryLock(path, opts));
  });

  it('a lock whose process is gone is broken (also an earlier version\'s rate-limit lock, "<pid> <ms>")', () => {
    const dead = deadPid();
    for (const text of [`${dead} 12345\n`, `${dead}\n`, `${dead} ${Date.now()}`]) {
      const path = lockPath();
      writeFileSync(path, text);
      expect(tryLock(path, { ...opts, staleMs: 60_000 })).toEqual({ retry: "broken" });
      expect(existsSync(path)).toBe(false);
    }
  });

  describe.runIf(process.platform === "linux")("a live pid (Linux: its start time tells the process)", () => {
    it("a pid now another process's (another start time) is not its holder", async () => {
      const pid = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
      const path = lockPath();
      writeFileSync(path, `${pid} ${Number(startOf(pid)) + 1}\n`);
      expect(tryLock(path, opts)).toEqual({ retry: "broken" });
    });

    it("the process that took it (its pid and start time) holds it, however old the lock", async () => {
      const pid = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
      const path = lockPath();
      aged(path, `${pid} ${startOf(pid)}\n`, 2 * 86400_000);
      expect(tryLock(path, opts)).toEqual({ holder: { pid, here: false } });
      expect(readFileSync(path, "utf8")).toBe(`${pid} ${startOf(pid)}\n`);
    });

    it("an older version's lock (pid only) holds while its pid is a node process, not once it is another program's", async () => {
      const node = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
      const sleep = await live("sleep", ["300"]);
      const held = lockPath();
      writeFileSync(held, `${node}\n`);
      expect(tryLock(held, opts)).toEqual({ holder: { pid: node, here: false } });
      const reused = lockPath();
      writeFileSync(reused, `${sleep}\n`);
      expect(tryLock(reused, opts)).toEqual({ retry: "broken" });
    });
  });

  it("an empty or torn lock is being written while young (judged by its mtime), stale once older than writingMs", () => {
    for (const text of ["", "12"]) {
      const path = lockPath();
      writeFileSync(path, text);
      expect(tryLock(path, opts)).toEqual({ holder: { here: false } });
      aged(path, text, 11_000);
      expect(tryLock(path, opts)).toEqual({ retry: "broken" });
      const short = lockPath();
      aged(short, text, 3_000);
      expect(tryLock(short, { ...opts, writingMs: 2_000 })).toEqual({ retry: "broken" });
    }
  });

  it("with staleMs, a lock older than that is broken even though its holder runs", () => {
    const path = lockPath();
    aged(path, `${process.ppid}\n`, 3_000);
    expect(tryLock(path, { ...opts, staleMs: 60_000 })).toHaveProperty("holder");
    expect(tryLock(path, { ...opts, staleMs: 2_000 })).toEqual({ retry: "broken" });
    // The rate-limit lock of earlier versions records when it was taken: that is its age.
    writeFileSync(path, `${process.ppid} ${Date.now() - 3_000}`);
    expect(tryLock(path, { ...opts, staleMs: 2_000 })).toEqual({ retry: "broken" });
  });

  it("a lock that cannot be written is a local write error naming it (73), and leaves no temp file", () => {
    const file = tmp.file(`not-a-dir-${n++}`, "");
    let err: MailsendError | undefined;
    try {
      tryLock(join(file, "x.lock"), opts);
    } catch (e) {
      err = e as MailsendError;
    }
    expect(err?.message).toMatch(/^cannot write the test lock .*x\.lock: /);
    expect(exitCodeFor(err!.code)).toBe(73);
  });

  it("with releaseOnExit it is given back as its process exits; a holder killed with -9 leaves it, and it is taken over", async () => {
    // The module as a process of its own would load it: bundled for a plain node child.
    const mod = join(tmp.dir, "lock.mjs");
    buildSync({
      entryPoints: [join(import.meta.dirname, "../../src/core/lock.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      outfile: mod,
      logLevel: "silent",
    });
    const take = (path: string, wait: boolean) =>
      `import { tryLock } from ${JSON.stringify(mod)}; const a = tryLock(${JSON.stringify(path)}, { what: "test lock", releaseOnExit: true }); if (!a.release) process.exit(3); process.stdout.write("held\\n"); ${wait ? "setTimeout(() => {}, 300000);" : "process.exitCode = 0;"}`;
    const exits = lockPath();
    execFileSync(process.execPath, ["--input-type=module", "-e", take(exits, false)]);
    expect(existsSync(exits)).toBe(false);

    const killed = lockPath();
    const c = spawn(process.execPath, ["--input-type=module", "-e", take(killed, true)], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    children.push(c);
    await new Promise<void>((r) => c.stdout!.once("data", () => r()));
    // Held by a live process of its own.
    expect(tryLock(killed, opts)).toEqual({ holder: { pid: c.pid, here: false } });
    c.kill("SIGKILL");
    await new Promise((r) => c.once("exit", r));
    expect(existsSync(killed)).toBe(true);
    expect(tryLock(killed, opts)).toEqual({ retry: "broken" });
    released(tryLock(killed, opts));
  }, 20_000);

  it("a holder file (the runner's runner.pid): none readable, this process, a dead pid, another program's pid", async () => {
    const path = tmp.file(`holder-${n++}`, "");
    expect(holderFileRuns(path)).toBeUndefined();
    expect(holderFileRuns(join(tmp.dir, "missing"))).toBeUndefined();
    writeFileSync(path, `${process.pid}\n`);
    expect(holderFileRuns(path)).toBe(true);
    writeFileSync(path, `${deadPid()}\n`);
    expect(holderFileRuns(path)).toBe(false);
    if (process.platform === "linux") {
      writeFileSync(path, `${await live("sleep", ["300"])}\n`);
      expect(holderFileRuns(path)).toBe(false);
    }
  });

  it.runIf(process.platform === "linux")(
    "a pid-only holder running this program's executable holds whatever it was called (the single executable as sendmail)",
    async () => {
      // A command line that names neither node nor mailsend: the executable file alone decides.
      const nameless = /^$/;
      const same = await live(process.execPath, ["-e", "setTimeout(() => {}, 300000)"]);
      expect(processHolds(same, undefined, nameless)).toBe(true);
      const other = await live("sleep", ["300"]);
      expect(processHolds(other, undefined, nameless)).toBe(false);
    },
  );

  it("a holder that is a zombie (killed, never reaped: signal 0 still reaches it) is dead", async (ctx) => {
    if (process.platform !== "linux") return ctx.skip();
    // sh starts a runner-like child and becomes `sleep`, which never reaps it. The child is killed
    // only once sh has become `sleep`: before that, sh itself may reap it (it did, once, in CI).
    const parent = spawn("sh", ["-c", "sleep 60 & exec sleep 61"], { stdio: "ignore" });
    try {
      const ppid = parent.pid!;
      const stat = (pid: number): string | undefined => {
        try {
          return readFileSync(`/proc/${pid}/stat`, "latin1");
        } catch {
          return undefined;
        }
      };
      const childOf = (): number | undefined => {
        for (const name of readdirSync("/proc")) {
          if (!/^\d+$/.test(name)) continue;
          const s = stat(Number(name));
          // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing parenthesis.
          if (s && Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[1]) === ppid) return Number(name);
        }
        return undefined;
      };
      let pid: number | undefined;
      for (
        let i = 0;
        i < 250 && !(readFileSync(`/proc/${ppid}/cmdline`, "latin1") === "sleep\u000061\u0000" && (pid = childOf()));
        i++
      ) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(pid, "sh started its child and became sleep").toBeGreaterThan(0);
      process.kill(pid!, "SIGKILL");
      for (let i = 0; i < 250 && !stat(pid!)?.includes(") Z "); i++) await new Promise((r) => setTimeout(r, 20));
      expect(stat(pid!), "the killed child is a zombie").toContain(") Z ");
      expect(() => process.kill(pid!, 0)).not.toThrow();
      // Its own start time: only its state tells it is dead.
      const path = tmp.file(`zombie-${n++}`, `${pid} ${startOf(pid!)}\n`);
      expect(holderFileRuns(path)).toBe(false);
      expect(tryLock(path, opts)).toEqual({ retry: "broken" });
    } finally {
      parent.kill("SIGKILL");
    }
  });
});
