/**
 * `mailsend run` end to end: the built binary runs real jobs (sh), its alerts go through the
 * outbox to a real sandbox, and its signals and timeouts reach the job's whole process group.
 */
import { execa } from "execa";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, ROOT, runCli, stdoutJson, mailsendCommand } from "../helpers/cli.js";
import { startRedis } from "../helpers/redis.js";
import { inProcessSandbox, parseEml, type TestSandbox } from "../helpers/sandbox.js";
import { lacks, redisServer } from "../helpers/tools.js";

let sb: TestSandbox;
beforeAll(async () => {
  sb = await inProcessSandbox();
});
afterAll(async () => {
  await sb.stop();
  sb.scratch.remove();
});

let n = 0;
/** A state dir (and so an outbox and job states) of its own, a recipient of its own, no background runner. */
function fresh(): { env: Record<string, string>; to: string; dir: string } {
  const dir = join(sb.scratch.dir, `run-${n}`);
  const to = `ops${n++}@example.com`;
  return {
    dir,
    to,
    env: { ...sb.env, MAILSEND_STATE_DIR: dir, MAILSEND_QUEUE_AUTORUN: "0", MAILSEND_FROM: "Cron <cron@example.com>" },
  };
}

async function deliver(env: Record<string, string>): Promise<void> {
  const r = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
  expect(r.exitCode, r.stderr).toBe(0);
}

async function mailsTo(to: string) {
  const list = (await sb.sb.store.list()).filter((m) => m.to.includes(to)).reverse();
  return Promise.all(list.map(async (m) => ({ meta: m, email: await parseEml((await sb.sb.store.raw(m.id))!) })));
}

async function queued(env: Record<string, string>): Promise<Array<{ subject: string; source: string }>> {
  return stdoutJson(await runCli(["queue", "--json"], { env }));
}

/** Whether a process runs (a zombie does not). */
function runs(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]!);
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("mailsend run", () => {
  it("passes a failing job's status and output through, and mails once with its output", async () => {
    const { env: fileKey, to } = fresh();
    // The key in the environment, as the job may print it.
    const { MAILSEND_API_KEY_FILE: _file, ...rest } = fileKey;
    const env = { ...rest, MAILSEND_API_KEY: sb.key };
    const r = await runCli(
      ["run", "--to", to, "--", "sh", "-c", 'echo line one; echo "oops <b> $MAILSEND_API_KEY" >&2; exit 3'],
      { env },
    );
    expect(r.exitCode).toBe(3);
    expect(r.stdout).toBe("line one\n");
    expect(r.stderr).toBe(`oops <b> ${sb.key}\n`);
    expect(await queued(env)).toMatchObject([{ source: "run" }]);
    await deliver(env);
    const mails = await mailsTo(to);
    expect(mails).toHaveLength(1);
    const { email } = mails[0]!;
    expect(email.subject).toMatch(/^\[.+\] sh failed \(exit 3\)$/);
    // The job's own log has what it printed; the mail, read by others, not the key.
    expect(email.html).toContain("line one\noops &lt;b&gt; [redacted]");
    expect(email.html).not.toContain(sb.key);
    expect(email.html).toContain("Exit status");
    expect(email.headers.find((h) => h.key === "auto-submitted")?.value).toBe("auto-generated");
  });

  it("mails nothing for a job that succeeds", async () => {
    const { env, to } = fresh();
    const r = await runCli(["run", "--to", to, "--", "sh", "-c", "echo fine"], { env });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("fine\n");
    expect(await queued(env)).toEqual([]);
  });

  it("mails five failures in a row once; the mail after the quiet window counts them", async () => {
    const { env, to } = fresh();
    for (let i = 0; i < 5; i++)
      expect((await runCli(["run", "--id", "flaky", "--to", to, "--", "sh", "-c", "exit 1"], { env })).exitCode).toBe(
        1,
      );
    expect(await queued(env)).toHaveLength(1);
    // With no quiet window left, the next failure mails, saying what it stands for.
    expect(
      (await runCli(["run", "--id", "flaky", "--quiet-for", "0s", "--to", to, "--", "sh", "-c", "exit 1"], { env }))
        .exitCode,
    ).toBe(1);
    await deliver(env);
    const mails = await mailsTo(to);
    expect(mails).toHaveLength(2);
    for (const m of mails) expect(m.email.subject).toMatch(/\] flaky failed \(exit 1\)$/);
    const second = mails.find((m) => m.email.html?.includes("6 failed runs in a row"));
    expect(second?.email.html).toMatch(/stands for 5 failures since/);
  });

  it("--on change: fail, fail, succeed mails twice, the second says recovered", async () => {
    const { env, to } = fresh();
    const job = (code: number) =>
      runCli(["run", "--on", "change", "--id", "sync", "--to", to, "--", "sh", "-c", `exit ${code}`], { env });
    expect((await job(2)).exitCode).toBe(2);
    expect((await job(2)).exitCode).toBe(2);
    expect((await job(0)).exitCode).toBe(0);
    expect((await job(0)).exitCode).toBe(0);
    await deliver(env);
    // The runner delivers several at once: sorted, "failed" before "recovered".
    const subjects = (await mailsTo(to)).map((m) => m.email.subject ?? "").sort();
    expect(subjects).toHaveLength(2);
    expect(subjects[0]).toMatch(/\] sync failed \(exit 2\)$/);
    expect(subjects[1]).toMatch(/\] sync recovered$/);
  });

  it("concurrent failing runs of one job mail once", async () => {
    const { env, to } = fresh();
    const runs3 = await Promise.all(
      [0, 1, 2].map(() =>
        runCli(["run", "--id", "together", "--to", to, "--", "sh", "-c", "sleep 0.2; exit 4"], { env }),
      ),
    );
    expect(runs3.map((r) => r.exitCode)).toEqual([4, 4, 4]);
    expect(await queued(env)).toHaveLength(1);
  });

  it("SIGTERM to run reaches the job's process group and leaves no child behind", async () => {
    const { env, to, dir } = fresh();
    const pidFile = join(sb.scratch.dir, `pid-${n}`);
    // The grandchild ignores SIGTERM: only the group's SIGKILL after the job ends stops it.
    const script = `(trap '' TERM; exec sleep 300) & echo $! > '${pidFile}'; echo started; wait`;
    const child = execa(...mailsendCommand(["run", "--to", to, "--", "sh", "-c", script]), {
      env: { ...baseEnv(), ...env },
      extendEnv: false,
      cwd: ROOT,
      reject: false,
      timeout: 30_000,
    });
    await until("the job to start", () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "");
    const grandchild = Number(readFileSync(pidFile, "utf8"));
    expect(runs(grandchild)).toBe(true);
    child.kill("SIGTERM");
    const r = await child;
    expect(r.exitCode).toBe(143);
    await until("the grandchild to be gone", () => !runs(grandchild), 5_000);
    expect(await queued({ ...env, MAILSEND_STATE_DIR: dir })).toHaveLength(1);
  });

  it("--timeout stops a job that hangs (SIGKILL after the grace) and says so", async () => {
    const { env, to } = fresh();
    const started = Date.now();
    const r = await runCli(
      [
        "run",
        "--timeout",
        "1s",
        "--kill-after",
        "1s",
        "--to",
        to,
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo waiting; sleep 30",
      ],
      { env, timeoutMs: 20_000 },
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(r.exitCode).toBe(137);
    await deliver(env);
    const [mail] = await mailsTo(to);
    expect(mail!.email.subject).toMatch(/\] sh failed \(timed out after 1s, killed\)$/);
    expect(mail!.email.html).toContain("stopped after 1s with SIGTERM, then SIGKILL");
    expect(mail!.email.html).toContain("waiting");
  });

  it("with the service down the job exits at once with its code, and the alert waits in the outbox", async () => {
    const { env, to } = fresh();
    const down = {
      ...env,
      MAILSEND_BASE_URL: "http://127.0.0.1:9",
      MAILSEND_SMTP_HOST: "127.0.0.1",
      MAILSEND_SMTP_PORT: "9",
    };
    const started = Date.now();
    const r = await runCli(["run", "--to", to, "--", "sh", "-c", "exit 5"], { env: down });
    expect(r.exitCode).toBe(5);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await queued(down)).toMatchObject([{ subject: expect.stringMatching(/sh failed \(exit 5\)$/) }]);
    // The service back: it goes out.
    await deliver(env);
    expect(await mailsTo(to)).toHaveLength(1);
  });

  it("keeps the end of a large output: its tail in the body, the end attached with a note", async () => {
    const { env, to } = fresh();
    const r = await runCli(
      ["run", "--tail", "5", "--attach-limit", "64k", "--to", to, "--", "sh", "-c", "seq 1 50000; exit 1"],
      { env, timeoutMs: 30_000 },
    );
    expect(r.exitCode).toBe(1);
    expect(r.stdout.endsWith("49999\n50000\n")).toBe(true);
    await deliver(env);
    const [mail] = await mailsTo(to);
    expect(mail!.email.html).toContain("49996\n49997\n49998\n49999\n50000</pre>");
    expect(mail!.email.html).toContain("the last 5 of 50000 lines");
    const att = mail!.email.attachments[0]!;
    expect(att.filename).toBe("output.txt");
    const text = Buffer.from(att.content as ArrayBuffer).toString("utf8");
    expect(text).toMatch(/^\[mailsend: the first .* were cut; what follows is the end\]\n\d+\n/);
    expect(text.endsWith("50000\n")).toBe(true);
    expect(text.length).toBeLessThan(70 * 1024);
  });

  it("refuses a missing --to or sender before the job runs", async () => {
    const { env, dir } = fresh();
    const marker = join(dir, "ran");
    const noTo = await runCli(["run", "--", "sh", "-c", `touch '${marker}'`], { env });
    expect(noTo.exitCode).toBe(64);
    const noFrom = await runCli(["run", "--to", "a@example.com", "--", "sh", "-c", `touch '${marker}'`], {
      env: { ...env, MAILSEND_FROM: undefined },
    });
    expect(noFrom.exitCode).toBe(78);
    expect(existsSync(marker)).toBe(false);
  });

  it("--template makes the body from a file, filled with the run's exit status and output", async () => {
    const { env, to } = fresh();
    const template = join(sb.scratch.dir, `template-${n}.txt`);
    writeFileSync(
      template,
      "{{status}} on {{host}}: {{command}} ({{outcome}}), exit {{exit}}, signal {{signal|none}}\n" +
        "failures: {{failures}} since {{failures_since|?}}; CI {{ci_url|-}}\n---\n{{output|(no output)}}",
    );
    const r = await runCli(
      ["run", "--template", template, "--to", to, "--", "sh", "-c", "echo first; echo 'last <b>' >&2; exit 4"],
      { env },
    );
    expect(r.exitCode, r.stderr).toBe(4);
    await deliver(env);
    const mails = await mailsTo(to);
    expect(mails).toHaveLength(1);
    const { email } = mails[0]!;
    expect(email.subject).toMatch(/^\[.+\] sh failed \(exit 4\)$/);
    expect(email.html).toBeFalsy();
    expect(email.text).toMatch(
      /^failed on .+: sh -c .+ \(exit 4\), exit 4, signal none\nfailures: 1 since \d{4}-\d\d-\d\dT.+Z; CI -\n---\nfirst\nlast <b>\s*$/,
    );
  });

  it("refuses a --template with an unknown placeholder (65) or unreadable (66) before the job runs", async () => {
    const { env, dir } = fresh();
    const marker = join(dir, "ran");
    const template = join(sb.scratch.dir, `template-${n}.txt`);
    writeFileSync(template, "{{comand}} failed: {{exit}}\n");
    const typo = await runCli(
      ["run", "--template", template, "--to", "a@example.com", "--", "sh", "-c", `touch '${marker}'`],
      {
        env,
      },
    );
    expect(typo.exitCode).toBe(65);
    expect(typo.stderr).toContain("{{comand}}");
    const missing = await runCli(
      ["run", "--template", `${template}.gone`, "--to", "a@example.com", "--", "sh", "-c", `touch '${marker}'`],
      { env },
    );
    expect(missing.exitCode).toBe(66);
    const stdin = await runCli(
      ["run", "--template", "-", "--to", "a@example.com", "--", "sh", "-c", `touch '${marker}'`],
      {
        env,
      },
    );
    expect(stdin.exitCode).toBe(64);
    expect(existsSync(marker)).toBe(false);
    expect(await queued(env)).toEqual([]);
  });

  it("a command that does not exist exits 127 and is mailed", async () => {
    const { env } = fresh();
    const r = await runCli(["run", "--to", "x@example.com", "--", "/nonexistent/job.sh"], { env });
    expect(r.exitCode).toBe(127);
    expect(r.stderr).toContain("command not found");
    expect(await queued(env)).toMatchObject([
      { subject: expect.stringMatching(/job\.sh failed \(command not found\)$/) },
    ]);
  });
});

describe.skipIf(lacks(redisServer))("mailsend run with the budget in Redis", () => {
  it("a job failing on two machines that share the Redis mails once; its recovery once", async () => {
    const redis = await startRedis();
    try {
      const a = fresh();
      const b = fresh();
      const on = (m: { env: Record<string, string> }, code: number) =>
        runCli(["run", "--on", "change", "--id", "shared-job", "--to", a.to, "--", "sh", "-c", `exit ${code}`], {
          env: { ...m.env, MAILSEND_RATE_LIMIT_URL: redis.url },
        });
      const failed = await Promise.all([on(a, 1), on(b, 1)]);
      expect(failed.map((r) => r.exitCode)).toEqual([1, 1]);
      expect((await queued(a.env)).length + (await queued(b.env)).length).toBe(1);
      expect((await on(b, 0)).exitCode).toBe(0);
      expect((await on(a, 0)).exitCode).toBe(0);
      const all = [...(await queued(a.env)), ...(await queued(b.env))].map((m) => m.subject).sort();
      expect(all).toHaveLength(2);
      expect(all[1]).toMatch(/shared-job recovered$/);
      // Nothing of it in the state dirs: the state is Redis's.
      expect(existsSync(join(a.dir, "run"))).toBe(false);
    } finally {
      await redis.stop();
    }
  });
});

describe("mailsend queue check", () => {
  it("exits 0, 1 and 2 by the oldest message's age and the count queued", async () => {
    const { env, to } = fresh();
    const check = async (...args: string[]) => {
      const r = await runCli(["queue", "check", ...args], { env });
      return { code: r.exitCode, line: r.stdout };
    };
    const empty = await check();
    expect(empty.code).toBe(0);
    expect(empty.line).toMatch(
      /^QUEUE OK - 0 queued, 0 failed, oldest - \| queued=0;;;0 failed=0;;;0 oldest=0s;3600;14400;0\n$/,
    );
    for (let i = 0; i < 3; i++)
      await runCli(["run", "--id", `check-${i}`, "--to", to, "--", "sh", "-c", "exit 1"], { env });
    expect((await check()).code).toBe(0);
    expect((await check("--warning-count", "3")).code).toBe(1);
    expect((await check("--warning-count", "2", "--critical-count", "3")).line).toMatch(
      /^QUEUE CRITICAL - 3 queued, 0 failed, oldest \d+s \(3 queued >= 3\) \| queued=3;2;3;0 /,
    );
    expect((await check("--warning-count", "2", "--critical-count", "3")).code).toBe(2);
    expect((await check("--warning-age", "0s")).code).toBe(1);
    expect((await check("--warning-age", "0s", "--critical-age", "0s")).code).toBe(2);
    const json = await runCli(["queue", "check", "--json", "--warning-age", "0s"], { env });
    expect(json.exitCode).toBe(1);
    expect(stdoutJson(json)).toMatchObject({ status: "WARNING", exit: 1, queued: 3, failed: 0 });
    // queue --json keeps its shape: an array of messages.
    expect(Array.isArray(await queued(env))).toBe(true);
    expect((await check("--warning-age", "2h", "--critical-age", "1h")).code).toBe(3);
  });
});
