/**
 * The outbox and its runner, end to end: the built binary's `queue` commands
 * deliver what the outbox holds to a real sandbox, exactly once, through a
 * kill -9 at any moment, and put what cannot be delivered in failed/.
 */
import { execa } from "execa";
import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { newOutboxId, Outbox } from "../../src/outbox/store.js";
import { baseEnv, ROOT, runCli, runInProcess, stdoutJson, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { until } from "../helpers/until.js";

let sb: TestSandbox;
useSandbox((v) => (sb = v));

let n = 0;
function fresh(): { dir: string; env: Record<string, string> } {
  const dir = join(sb.scratch.dir, `outbox-${n++}`);
  return { dir, env: { ...sb.env, MAILSEND_OUTBOX_DIR: dir, MAILSEND_QUEUE_AUTORUN: "0" } };
}

function raw(subject: string, to = "dev@example.com"): Buffer {
  return Buffer.from(
    `From: Cron <cron@example.com>\r\nTo: ${to}\r\nSubject: ${subject}\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\nMessage-ID: <${subject.replace(/\W/g, "")}@example.com>\r\n\r\n<p>${subject}</p>\r\n`,
  );
}

async function seed(dir: string, subjects: string[]): Promise<string[]> {
  const box = new Outbox(dir);
  const ids: string[] = [];
  for (const s of subjects)
    ids.push(
      await box.add({
        raw: raw(s),
        envelope: { from: "cron@example.com", to: ["dev@example.com"] },
        idempotencyKey: `key-${s}`,
        source: "sendmail",
        subject: s,
      }),
    );
  return ids;
}

async function stored(subjectPrefix: string) {
  return (await sb.sb.store.list()).filter((m) => m.subject.startsWith(subjectPrefix));
}

/**
 * A `queue run --drain` whose first attempt at `id` met a fault of this machine (exit 73: the
 * budget's state cannot be written while a file, `blocker`, stands where its directory goes).
 */
async function drainAfterLocalFault(dir: string, env: Record<string, string>, id: string) {
  const blocker = join(dir, "blocker");
  writeFileSync(blocker, "");
  const drain = execa(...mailsendCommand(["queue", "run", "--drain", "--json"]), {
    env: { ...baseEnv(), ...env, MAILSEND_STATE_DIR: join(blocker, "state"), MAILSEND_RATE_LIMIT: "1000" },
    extendEnv: false,
    reject: false,
    cwd: ROOT,
    timeout: 60_000,
  });
  const box = new Outbox(dir);
  await until(async () => (await box.state(id)).attempts > 0, {
    what: "the drain's first attempt",
    timeoutMs: 10_000,
    everyMs: 100,
  });
  expect((await box.state(id)).lastError?.exit).toBe(73);
  return { drain, blocker };
}

describe("mailsend queue", () => {
  it("lists the outbox and delivers what is due, then it is empty", async () => {
    const { dir, env } = fresh();
    await seed(dir, ["ls-1", "ls-2", "ls-3"]);
    const ls = await runInProcess(["queue", "--json"], { env });
    expect(ls.exitCode).toBe(0);
    const rows = stdoutJson(ls);
    expect(rows.map((r: { subject: string }) => r.subject)).toEqual(["ls-1", "ls-2", "ls-3"]);
    expect(rows[0]).toMatchObject({
      status: "queued",
      attempts: 0,
      recipients: ["dev@example.com"],
      from: "cron@example.com",
    });
    const human = await runInProcess(["queue"], { env });
    expect(human.stdout).toContain("ls-2");
    expect(human.stdout).toContain("3 messages");

    const run = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(events.filter((e) => e.event === "sent")).toHaveLength(3);
    expect(events.at(-1)).toEqual({ summary: { sent: 3, deferred: 0, failed: 0, left: 0 } });
    expect((await stored("ls-")).length).toBe(3);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
    expect((await runInProcess(["queue"], { env })).stdout).toContain("the outbox is empty");
  });

  it("survives kill -9 of the runner at several moments: each message is delivered exactly once", async () => {
    const { dir, env } = fresh();
    const subjects = Array.from({ length: 12 }, (_, i) => `crash-${i}`);
    await seed(dir, subjects);
    // Slow answers, so that the kills land in the middle of deliveries.
    sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 150 };
    try {
      for (const delay of [300, 500, 700, 900]) {
        const child = execa(...mailsendCommand(["queue", "run", "--concurrency", "2"]), {
          env: { ...baseEnv(), ...env },
          extendEnv: false,
          cwd: ROOT,
          reject: false,
          stdin: "ignore",
        });
        await new Promise((r) => setTimeout(r, delay));
        child.kill("SIGKILL");
        await child;
        // A runner killed with -9 leaves its lock; it is stale within seconds and the next runner takes over.
      }
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 0 };
    }
    let left = 1;
    for (let round = 0; round < 10 && left > 0; round++) {
      const r = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
      const summary = JSON.parse(r.stdout.trim().split("\n").at(-1) || "{}").summary;
      if (!summary) {
        // Still the dead runner's lock: it goes stale 10 s after its last refresh.
        await new Promise((res) => setTimeout(res, 2000));
        continue;
      }
      left = summary.left;
    }
    expect(left).toBe(0);
    const got = await stored("crash-");
    expect(got.map((m) => m.subject).sort()).toEqual([...subjects].sort());
    expect(new Set(got.map((m) => m.idempotencyKey)).size).toBe(12);
  }, 120_000);

  it("defers a temporary failure with its reason, and delivers it on retry", async () => {
    const { dir, env } = fresh();
    const [id] = await seed(dir, ["tmp-1"]);
    sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 1, failStatus: 503 };
    try {
      const r = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toMatch(/deferred .* next attempt in/);
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 0 };
    }
    const row = stdoutJson(await runInProcess(["queue", "--json"], { env }))[0];
    expect(row).toMatchObject({
      id,
      attempts: 1,
      last_error: { code: expect.stringMatching(/service_error|temporary_failure/) },
    });
    expect(Date.parse(row.next_attempt_at)).toBeGreaterThan(Date.now());
    // Not due yet: a run leaves it alone.
    expect(JSON.parse((await runCli(["queue", "run", "--json"], { env })).stdout.trim()).summary).toMatchObject({
      sent: 0,
      left: 1,
    });
    expect((await runInProcess(["queue", "retry", id!], { env })).exitCode).toBe(0);
    const r2 = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
    expect(JSON.parse(r2.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 1, left: 0 });
    expect(await stored("tmp-1")).toHaveLength(1);
  }, 60_000);

  it("sendmail -q flushes as Postfix's does: deferred mail goes now; queue run keeps its retry time", async () => {
    const { dir, env } = fresh();
    await seed(dir, ["flush-1"]);
    sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 1, failStatus: 503 };
    try {
      expect((await runCli(["queue", "run"], { env, timeoutMs: 60_000 })).exitCode).toBe(0);
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 0 };
    }
    // The service is back. queue run leaves it for its retry time (15-30 s away)...
    expect(JSON.parse((await runCli(["queue", "run", "--json"], { env })).stdout.trim()).summary).toMatchObject({
      sent: 0,
      left: 1,
    });
    expect(await stored("flush-1")).toHaveLength(0);
    // ...sendmail -q sends it now.
    const q = await runCli(["sendmail", "-q", "-v"], { env, timeoutMs: 60_000 });
    expect(q.exitCode, q.stderr).toBe(0);
    expect(q.stderr).toContain("1 deferred message due now");
    expect(await stored("flush-1")).toHaveLength(1);
    expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
  }, 60_000);

  it("moves a permanent refusal to failed/ at once, with the reason; retry and purge", async () => {
    const { dir, env } = fresh();
    // failed/ alone: the notice to the sender (refused too here) is test/e2e/outbox-notices.test.ts's.
    env.MAILSEND_NOTICES = "off";
    const [id] = await seed(dir, ["perm-1"]);
    // The service refuses the message itself (400): nothing a later try could change. (A refused
    // key is a setting to fix: that waits in the outbox, test/e2e/outbox-local-refusal.test.ts.)
    const refuse = () =>
      (sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 1, failStatus: 400, failSmtpCode: 554 });
    const accept = () =>
      (sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 0, failStatus: 500, failSmtpCode: 451 });
    try {
      refuse();
      const r = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
      expect(r.stdout).toMatch(/failed .*moved to failed/);
      expect(stdoutJson(await runInProcess(["queue", "--json"], { env }))).toEqual([]);
      const failed = stdoutJson(await runInProcess(["queue", "--failed", "--json"], { env }));
      expect(failed).toHaveLength(1);
      expect(failed[0], JSON.stringify(failed[0])).toMatchObject({ id, status: "failed", last_error: { exit: 65 } });
      // Whatever was refused: retry brings it back, and it goes out.
      accept();
      expect((await runInProcess(["queue", "retry", "--all"], { env })).exitCode).toBe(0);
      const r2 = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
      expect(JSON.parse(r2.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 1, failed: 0, left: 0 });
      // purge removes failed/ only, and says so.
      await seed(dir, ["perm-2"]);
      refuse();
      await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
    } finally {
      accept();
    }
    const purge = await runInProcess(["queue", "purge", "--failed"], { env });
    expect(purge.stderr).toContain("removed 1 failed message");
    expect((await runInProcess(["queue", "purge"], { env })).exitCode).toBe(64);
    expect((await runInProcess(["queue", "rm", "not-an-id"], { env })).exitCode).toBe(64);
  }, 60_000);

  it("a damaged file (cut, empty, not ours) is listed as such, never sent cut, and moved to failed/ with the reason", async () => {
    const { dir, env } = fresh();
    const [good, cut, empty, junk] = await seed(dir, ["damaged-ok", "damaged-cut", "damaged-empty", "damaged-junk"]);
    const q = (id: string) => join(dir, "queue", `${id}.msg`);
    truncateSync(q(cut!), statSync(q(cut!)).size - 6);
    writeFileSync(q(empty!), "");
    writeFileSync(q(junk!), "garbage\n");
    const list = await runInProcess(["queue"], { env });
    expect(list.exitCode).toBe(0);
    for (const id of [cut, empty, junk]) expect(list.stderr).toContain(`warning: the outbox file ${q(id!)} is damaged`);
    expect(list.stderr).toMatch(/is damaged \(its message is \d+ bytes, \d+ were queued\)\. /);
    expect(list.stdout).toContain(good!);
    expect(list.stdout).toMatch(/^-- 1 message, .* \(and 3 damaged files, named above\) in /m);
    const run = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).toMatch(
      new RegExp(`failed ${cut}: the outbox file .* is damaged \\(its message is \\d+ bytes, \\d+ were queued\\)`),
    );
    expect(
      (await stored("damaged-")).map((m) => m.subject),
      run.stdout + run.stderr,
    ).toEqual(["damaged-ok"]);
    expect(
      readdirSync(join(dir, "failed"))
        .filter((f) => f.endsWith(".msg"))
        .sort(),
    ).toEqual([cut, empty, junk].map((id) => `${id}.msg`).sort());
  });

  it("a file that is JSON but not a message, a link, a FIFO: listed as damaged beside the rest (exit 0, valid JSON), moved to failed/ unread", async () => {
    const { dir, env } = fresh();
    const [good] = await seed(dir, ["schema-ok"]);
    const q = (id: string) => join(dir, "queue", `${id}.msg`);
    const [noEnvelope, nul, link, fifo, otherId] = [1, 2, 3, 4, 5].map((i) => newOutboxId(Date.now() + i));
    writeFileSync(q(noEnvelope!), '{"v":1,"id":"x","size":5}\nhello');
    writeFileSync(q(nul!), "null\n");
    const secret = join(dir, "secret.txt");
    writeFileSync(secret, "TOPSECRET-first-bytes of another file\n");
    symlinkSync(secret, q(link!));
    execFileSync("mkfifo", [q(fifo!)]);
    writeFileSync(q(otherId!), readFileSync(q(good!)));
    const damaged = [noEnvelope, nul, link, fifo, otherId] as string[];
    const sendmailBp = await runCli(["sendmail", "-bp"], { env });
    for (const list of [await runCli(["queue"], { env }), sendmailBp]) {
      expect(list.exitCode, list.stderr).toBe(0);
      expect(list.stdout).toContain(good!);
      for (const id of damaged) expect(list.stdout).toMatch(new RegExp(`^${id}  damaged: `, "m"));
      expect(list.stdout + list.stderr).not.toContain("TOPSECRET");
    }
    expect(sendmailBp.stdout).toMatch(/^-- \d+ Kbytes in 1 Request\.$/m);
    const json = await runCli(["queue", "--json"], { env });
    expect(json.exitCode, json.stderr).toBe(0);
    const rows = stdoutJson(json) as { id: string; status: string; reason?: string }[];
    expect(rows.map((r) => r.id)).toEqual([good, ...damaged]);
    expect(Object.fromEntries(rows.slice(1).map((r) => [r.id, r.reason]))).toEqual({
      [noEnvelope!]: "its metadata has no createdAt",
      [nul!]: "its first line is not a JSON object",
      [link!]: "it is a symbolic link, not a message file",
      [fifo!]: "it is not a plain file",
      [otherId!]: "its metadata names another message",
    });
    const run = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).not.toContain("TOPSECRET");
    expect((await stored("schema-")).map((m) => m.subject)).toEqual(["schema-ok"]);
    expect(
      readdirSync(join(dir, "failed"))
        .filter((f) => f.endsWith(".msg"))
        .sort(),
    ).toEqual(damaged.map((id) => `${id}.msg`).sort());
    // Moved as it was: the link itself, its target untouched and never copied into a state file.
    expect(lstatSync(join(dir, "failed", `${link}.msg`)).isSymbolicLink()).toBe(true);
    expect(readFileSync(secret, "utf8")).toMatch(/^TOPSECRET/);
    for (const f of readdirSync(join(dir, "failed")))
      if (f.endsWith(".state")) expect(readFileSync(join(dir, "failed", f), "utf8")).not.toContain("TOPSECRET");
    const failed = await runCli(["queue", "--failed", "--json"], { env });
    expect(failed.exitCode, failed.stderr).toBe(0);
    expect((stdoutJson(failed) as { status: string }[]).map((r) => r.status)).toEqual(damaged.map(() => "damaged"));
    expect((await runCli(["queue", "--failed"], { env })).exitCode).toBe(0);
  }, 90_000);

  it("a message its sender held (queued, trying it itself) and then made due sooner is delivered then, not when the hold ends", async () => {
    const { dir, env } = fresh();
    const box = new Outbox(dir);
    // As send --queue auto and sendmail do: held two minutes while they try it, then deferred by them to a near time.
    const id = await box.add({
      raw: raw("held-then-due"),
      envelope: { from: "cron@example.com", to: ["dev@example.com"] },
      idempotencyKey: "key-held-then-due",
      source: "sendmail",
      subject: "held-then-due",
      holdUntil: Date.now() + 120_000,
    });
    const runner = execa(...mailsendCommand(["queue", "run", "--watch"]), {
      env: { ...baseEnv(), ...env },
      extendEnv: false,
      reject: false,
      cwd: ROOT,
      timeout: 60_000,
    });
    try {
      // The runner has listed the held message (its pid file says it runs; a scan follows at once).
      for (let i = 0; i < 100 && !existsSync(join(dir, "runner.pid")); i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 1500));
      expect(await stored("held-then-due")).toHaveLength(0);
      await box.setState(id, { attempts: 1, nextAttemptAt: Date.now() });
      await until(async () => (await stored("held-then-due")).length > 0, {
        what: "the message made due to be delivered",
        timeoutMs: 10_000,
        everyMs: 100,
      });
      expect(await stored("held-then-due")).toHaveLength(1);
    } finally {
      runner.kill("SIGTERM");
      await runner;
    }
  }, 60_000);

  it("queue retry reaches a runner that is delivering: the deferred message goes within seconds, not at the runner's own time", async () => {
    const { dir, env } = fresh();
    const [id] = await seed(dir, ["retry-live"]);
    sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 1, failStatus: 503 };
    const runner = execa(...mailsendCommand(["queue", "run", "--watch", "--json"]), {
      env: { ...baseEnv(), ...env },
      extendEnv: false,
      reject: false,
      cwd: ROOT,
      timeout: 60_000,
    });
    try {
      // Deferred by the runner (its next attempt 15-30 s away).
      const box = new Outbox(dir);
      await until(async () => (await box.state(id!)).attempts > 0, {
        what: "the runner's first attempt",
        timeoutMs: 10_000,
        everyMs: 100,
      });
      expect((await box.state(id!)).nextAttemptAt).toBeGreaterThan(Date.now() + 10_000);
      sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 0 };
      const retry = await runInProcess(["queue", "retry", "--all"], { env });
      expect(retry.exitCode).toBe(0);
      expect(retry.stderr).toContain(`1 message due now; the runner delivering from ${dir} takes it within seconds`);
      const asked = Date.now();
      await until(async () => (await stored("retry-live")).length > 0, {
        what: "the retried message to be delivered",
        timeoutMs: 8_000,
        everyMs: 100,
      });
      expect(await stored("retry-live")).toHaveLength(1);
      expect(Date.now() - asked).toBeLessThan(8_000);
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, failRate: 0 };
      runner.kill("SIGTERM");
      await runner;
    }
    expect(JSON.parse((await runInProcess(["queue", "retry", "--all", "--json"], { env })).stdout)).toEqual({
      retried: 0,
      runner: false,
    });
  }, 60_000);

  it("a drain that delivers everything after this machine's fault cleared exits 0, not with the fault's code", async () => {
    const { dir, env } = fresh();
    const [id] = await seed(dir, ["fault-cleared"]);
    const { drain, blocker } = await drainAfterLocalFault(dir, env, id!);
    try {
      rmSync(blocker);
      expect((await runInProcess(["queue", "retry", "--all"], { env })).exitCode).toBe(0);
      const r = await drain;
      expect(r.exitCode, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 1, left: 0 });
      expect(await stored("fault-cleared")).toHaveLength(1);
    } finally {
      drain.kill("SIGTERM");
      await drain;
    }
  }, 60_000);

  it("a drain whose faulted message was removed (queue rm) exits 0: the fault keeps nothing waiting", async () => {
    const { dir, env } = fresh();
    const [id] = await seed(dir, ["fault-removed"]);
    const { drain } = await drainAfterLocalFault(dir, env, id!);
    try {
      expect((await runInProcess(["queue", "rm", id!], { env })).exitCode).toBe(0);
      const r = await drain;
      expect(r.exitCode, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 0, left: 0 });
    } finally {
      drain.kill("SIGTERM");
      await drain;
    }
  }, 60_000);

  it("a state file it cannot read (another user's in life; a directory here) does not stop the runner: the rest is delivered", async () => {
    const { dir, env } = fresh();
    const [bad] = await seed(dir, ["unreadable-state", "readable-1", "readable-2"]);
    mkdirSync(join(dir, "queue", `${bad}.state`));
    const r = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    expect((await stored("readable-")).length).toBe(2);
    expect(r.stdout + r.stderr).toMatch(/outbox state file/);
    expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 2, left: 1 });
  }, 60_000);

  it("lets one runner deliver at a time", async () => {
    const { dir, env } = fresh();
    await seed(dir, ["lock-1", "lock-2", "lock-3", "lock-4"]);
    sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 400 };
    try {
      const [a, b] = await Promise.all([
        runCli(["queue", "run", "--concurrency", "1", "-v"], { env, timeoutMs: 60_000 }),
        new Promise((r) => setTimeout(r, 250)).then(() =>
          runCli(["queue", "run", "--concurrency", "1", "-v"], { env, timeoutMs: 60_000 }),
        ),
      ]);
      expect(a.exitCode).toBe(0);
      expect(b.exitCode).toBe(0);
      // Whichever took the outbox first delivered; the other said so (-v) and left it alone.
      expect([a, b].filter((r) => r.stderr.includes("another runner is delivering"))).toHaveLength(1);
      expect(
        [a, b].filter((r) => /^mailsend: sent 4, deferred 0, failed 0; 0 left in the outbox$/m.test(r.stderr)),
      ).toHaveLength(1);
      // Off a terminal, a run with nothing to do says nothing (cron would mail it every minute).
      const idle = await runCli(["queue", "run"], { env, timeoutMs: 60_000 });
      expect(idle).toMatchObject({ exitCode: 0, stderr: "" });
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 0 };
    }
    expect((await stored("lock-")).length).toBe(4);
  }, 60_000);
});

describe("a message queued while a runner delivers", () => {
  it("is delivered by that runner: it lists the outbox again after releasing it (the writer saw it held and started none)", async () => {
    const { dir, env } = fresh();
    await seed(dir, ["late-1"]);
    sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 1000 };
    try {
      // A one-shot run lists the outbox once, at its start; the second message comes after that.
      const run = runCli(["queue", "run", "--json", "--concurrency", "1"], { env, timeoutMs: 90_000 });
      for (let i = 0; i < 400 && !existsSync(join(dir, "runner.pid")); i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 300));
      await seed(dir, ["late-2"]);
      const r = await run;
      expect(r.exitCode, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!).summary).toMatchObject({ sent: 2, failed: 0, left: 0 });
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 0 };
    }
    expect((await stored("late-")).length).toBe(2);
    expect(existsSync(join(dir, "runner.pid"))).toBe(false);
  }, 120_000);
});

describe("a background runner killed with -9", () => {
  it("does not leave queued mail waiting: the next queued message starts a runner, which takes the dead one's lock once stale and delivers both, once each", async () => {
    const { dir, env: quiet } = fresh();
    // The runners start by themselves here, as they do for cron and PHP.
    const env: Record<string, string | undefined> = { ...quiet, MAILSEND_QUEUE_AUTORUN: undefined };
    const send = (subject: string) =>
      runCli(
        [
          "send",
          "-q",
          "--queue",
          "always",
          "-f",
          "cron@example.com",
          "-t",
          "ops@example.com",
          "-s",
          subject,
          "--text",
          "disk 91% full",
        ],
        { env, timeoutMs: 60_000 },
      );
    const pidFile = join(dir, "runner.pid");
    const pidNow = () => (existsSync(pidFile) ? Number.parseInt(readFileSync(pidFile, "utf8"), 10) : undefined);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const killed: number[] = [];
    // Slow answers: the first runner is in the middle of its delivery when it is killed.
    sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 5000 };
    try {
      expect((await send("dead-1")).exitCode).toBe(0);
      let first: number | undefined;
      for (let i = 0; i < 200 && !(first = pidNow()); i++) await sleep(50);
      expect(first, "the first send started a runner").toBeGreaterThan(0);
      process.kill(first!, "SIGKILL");
      killed.push(first!);
      // Its lock stays fresh for up to 10 s: the next message is queued well inside that.
      const second = await send("dead-2");
      expect(second.exitCode, second.stderr).toBe(0);
      expect(
        Math.trunc(statSync(join(dir, "runner.lock")).mtimeMs),
        "queued while the dead runner's lock was still fresh",
      ).toBeGreaterThanOrEqual(Date.now() - 10_000);
    } finally {
      sb.sb.faults.config = { ...sb.sb.faults.config, latencyMs: 0 };
    }
    // Nobody runs the queue by hand: both go out (bounded wait), each once.
    const got = async () => (await stored("dead-")).map((m) => m.subject).sort();
    for (let i = 0; i < 240 && (await got()).length < 2; i++) await sleep(250);
    try {
      expect(await got()).toEqual(["dead-1", "dead-2"]);
      for (let i = 0; i < 80 && existsSync(pidFile); i++) await sleep(250);
      expect(existsSync(pidFile), "the new runner exits once the outbox is empty").toBe(false);
      expect(stdoutJson(await runInProcess(["queue", "--json"], { env: quiet }))).toEqual([]);
      expect(await got()).toEqual(["dead-1", "dead-2"]);
    } finally {
      const left = pidNow();
      if (left && !killed.includes(left)) process.kill(left, "SIGKILL");
    }
  }, 120_000);
});

describe("the outbox on a full disk", () => {
  it("refuses with a temporary failure and leaves nothing half-written", async (ctx) => {
    const mnt = join(sb.scratch.dir, "tiny");
    mkdirSync(mnt, { recursive: true });
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], { stdio: "ignore" });
    } catch {
      ctx.skip(true, "cannot mount a tmpfs here (not root?): the full-disk case is not run");
      return;
    }
    try {
      const box = new Outbox(join(mnt, "outbox"));
      await box.add({
        raw: raw("fits"),
        envelope: { from: "a@example.com", to: ["b@example.com"] },
        idempotencyKey: "k1",
        source: "sendmail",
      });
      const big = Buffer.concat([raw("too big"), Buffer.alloc(200 * 1024, 0x61)]);
      const err = await box
        .add({
          raw: big,
          envelope: { from: "a@example.com", to: ["b@example.com"] },
          idempotencyKey: "k2",
          source: "sendmail",
        })
        .catch((e) => e);
      expect(err.code).toBe("temporary_failure");
      expect(err.exitCode).toBe(75);
      expect(err.message).toMatch(/no space left on device/);
      expect(err.message).toContain("NOT queued");
      expect((await box.ids()).length).toBe(1);
      expect(readdirSync(box.tmpDir)).toEqual([]);
      expect(readdirSync(box.queueDir).filter((f) => !f.endsWith(".msg") && !f.endsWith(".state"))).toEqual([]);
    } finally {
      execFileSync("umount", [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    }
  });
});
