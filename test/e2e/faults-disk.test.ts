/**
 * Faults of this machine, for real: a budget lock left empty by a crash, a
 * process killed while making the lock, a full file system (a 64 KiB tmpfs)
 * before and after the service accepted the message, a results file on
 * /dev/full. A send the service accepted is reported sent (exit 0, a
 * warning); a fault before it is 73 with the path and the errno in words.
 */
import { execa } from "execa";
import { spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { keyHash } from "../../src/limits/budget.js";
import { baseEnv, mailsendCommand, ROOT, runCli } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "faults-disk-test-key";
const tmp = scratch("mailsend-faults-disk-");
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));

/** A 64 KiB tmpfs, when this runner may mount one (root on Linux). */
const tiny = join(tmp.dir, "tiny");
mkdirSync(tiny);
const mounted =
  process.platform === "linux" &&
  spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", tiny]).status === 0;
if (!mounted)
  console.warn(
    "faults-disk: SKIPPED the full-disk tests: `mount -t tmpfs` is not allowed here (run as root on Linux to run them)",
  );

afterAll(() => {
  if (mounted) spawnSync("umount", [tiny]);
  tmp.remove();
});

/** Fill the file system holding `dir` to the last byte (a real ENOSPC for the next write that needs a block). */
function fill(dir: string): string {
  const path = join(dir, `filler-${Date.now()}`);
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(4096, 1);
  try {
    for (let i = 0; i < 100_000; i++) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
  // A few bytes may still fit in a partly used block: take them too.
  const small = openSync(path, "a");
  try {
    for (let i = 0; i < 4096; i++) writeSync(small, Buffer.alloc(1, 1));
  } catch {}
  closeSync(small);
  return path;
}

function env(stateDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    MAILSEND_API_KEY: KEY,
    MAILSEND_BASE_URL: rec.url,
    MAILSEND_STATE_DIR: stateDir,
    MAILSEND_RATE_LIMIT: "10",
    ...extra,
  };
}

const send = (stateDir: string, extra: string[] = [], more: Record<string, string> = {}) =>
  runCli(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "faults", "--text", "hi", ...extra], {
    env: env(stateDir, more),
  });

describe("the budget lock never wedges", () => {
  test("an empty lock (a crash between its create and its write) older than the stale age is broken: the next send goes through", async () => {
    const state = join(tmp.dir, "empty-lock");
    const dir = join(state, "ratelimit");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const lock = join(dir, `${keyHash(KEY)}.json.lock`);
    writeFileSync(lock, "");
    const old = new Date(Date.now() - 60_000);
    utimesSync(lock, old, old);
    const r = await send(state, ["--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests).toHaveLength(1);
    expect(existsSync(lock)).toBe(false);
  });

  test("a send killed -9 while making the lock leaves nothing that blocks the next one", async () => {
    const state = join(tmp.dir, "killed-lock");
    const child = execa(
      ...mailsendCommand(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "killed", "--text", "hi"]),
      {
        env: { ...baseEnv(), ...env(state), MAILSEND_TEST_PAUSE: "lock-write" },
        extendEnv: false,
        cwd: ROOT,
        stdin: "ignore",
        reject: false,
        timeout: 30_000,
        encoding: "utf8",
      },
    );
    // Bounded: the child says where it paused, or the test fails.
    let said = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the child never paused: ${said}`)), 20_000);
      child.stderr!.on("data", (d: Buffer) => {
        said += d.toString();
        if (said.includes("paused at lock-write")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    child.kill("SIGKILL");
    const killed = await child;
    expect(killed.signal).toBe("SIGKILL");
    expect(rec.requests).toHaveLength(0);
    const r = await send(state, ["--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests).toHaveLength(1);
    // No lock is left, and no temp file of the killed process either once a send has looked.
    expect(readdirSync(join(state, "ratelimit")).filter((f) => f.includes(".lock"))).toEqual([]);
  });
});

describe.skipIf(!mounted)("a full disk (64 KiB tmpfs)", () => {
  test("full before the send: 73 with the path and 'no space left on device', and nothing is sent", async () => {
    const state = join(tiny, "before");
    mkdirSync(state, { mode: 0o700 });
    const filler = fill(tiny);
    try {
      const r = await send(state);
      expect(r.exitCode, r.stderr).toBe(73);
      expect(r.stderr).toMatch(/no space left on device/);
      expect(r.stderr).toContain(join(state, "ratelimit"));
      expect(r.stderr).toMatch(/hint: Free space/);
      expect(r.stderr).not.toMatch(/internal error|bug/);
      expect(rec.requests).toHaveLength(0);
    } finally {
      rmSync(filler);
    }
    // Space again: the next send is not wedged by anything the failed one left.
    const again = await send(state);
    expect(again.exitCode, again.stderr).toBe(0);
  });

  test("full after the service accepted it: exit 0, sent, the budget's failure a warning (and 'warnings' in --json)", async () => {
    const state = join(tiny, "after");
    mkdirSync(state, { mode: 0o700 });
    let filler = "";
    rec.script(() => {
      filler = fill(tiny);
      return {};
    });
    try {
      const r = await send(state, ["--json"]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(rec.requests).toHaveLength(1);
      const out = JSON.parse(r.stdout);
      expect(out.ok).toBe(true);
      expect(out.warnings).toHaveLength(1);
      expect(out.warnings[0]).toMatch(
        /the message was sent, but recording it in the rate-limit budget failed: .*no space left on device/,
      );
      expect(r.stderr).toMatch(/"warning":"the message was sent/);
      // Human mode says it on stderr too.
    } finally {
      if (filler) rmSync(filler);
    }
    rec.script(() => {
      filler = fill(tiny);
      return {};
    });
    try {
      const r = await send(state);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^sent /);
      expect(r.stderr).toMatch(/warning: the message was sent, but recording it .*no space left on device/);
    } finally {
      if (filler) rmSync(filler);
    }
  });

  test("batch: the journal cannot record a sent item: it is still 'sent' (exit 0, a warning), and no torn line is left", async () => {
    const state = join(tmp.dir, "batch-state");
    const jdir = join(tiny, "journal");
    mkdirSync(jdir, { mode: 0o700 });
    const journal = join(jdir, "j.journal");
    // Rows whose keys make the journal end a few bytes short of its first page when the
    // last row's "intended" line is written: its "done" line needs a new page, which the
    // full tmpfs refuses (after taking the few bytes that fit).
    const id = "m-00000001";
    const line = (i: number, state: object) => JSON.stringify({ i, ...state }).length + 1;
    const header =
      JSON.stringify({
        mailsend_journal: 1,
        batch: "x".repeat(36),
        input: "x".repeat(32),
        created: new Date().toISOString(),
      }).length + 1;
    let keys: string[] | undefined;
    let last = 5;
    for (; last <= 9 && !keys; last++)
      for (let first = 1; first <= 255 && !keys; first++) {
        for (let lastLen = 20; lastLen <= 255 && !keys; lastLen++) {
          const ks = Array.from({ length: last + 1 }, (_, i) =>
            `${i}`.padEnd(i === 0 ? first : i === last ? lastLen : 250, "k"),
          );
          let size = header;
          for (let i = 0; i < last; i++)
            size += line(i, { s: "intended", k: ks[i] }) + line(i, { s: "done", k: ks[i], id });
          size += line(last, { s: "intended", k: ks[last] });
          if (size >= 4096 - 30 && size <= 4096 - 5) keys = ks;
        }
      }
    last--;
    expect(keys).toBeDefined();
    const input = tmp.file(
      "page.jsonl",
      `${keys!.map((k, i) => JSON.stringify({ to: `r${i}@example.com`, subject: `p${i}`, text: "x", idempotency_key: k })).join("\n")}\n`,
    );
    let filler = "";
    rec.script((_req, index) => {
      if (index === last) filler = fill(tiny);
      return { body: { success: true, message_id: id } };
    });
    try {
      const r = await runCli(
        ["batch", input, "-f", "ci@example.com", "--journal", journal, "--concurrency", "1", "--json"],
        { env: env(state, { MAILSEND_RATE_LIMIT: "0" }) },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      expect(rec.requests).toHaveLength(last + 1);
      const items = r.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(items.map((x) => x.status)).toEqual(Array(last + 1).fill("sent"));
      expect(items[last].warnings[0]).toMatch(
        /the journal could not record it: cannot write the journal .*no space left on device/,
      );
      expect(r.stderr).toContain(`"warning":"item ${last + 1} (line ${last + 1}): sent`);
      // The part of the line that fit was cut back: the journal ends on a whole line.
      const text = readFileSync(journal, "utf8");
      expect(text.endsWith("\n")).toBe(true);
      for (const l of text.trim().split("\n")) JSON.parse(l);
    } finally {
      if (filler) rmSync(filler);
    }
  });

  test("batch: the journal cannot be created: 73 with its path, nothing sent", async () => {
    const filler = fill(tiny);
    try {
      const input = tmp.file("one.jsonl", `${JSON.stringify({ to: "a@example.com", subject: "j", text: "x" })}\n`);
      const r = await runCli(["batch", input, "-f", "ci@example.com", "--journal", join(tiny, "new.journal")], {
        env: env(join(tmp.dir, "b2"), { MAILSEND_RATE_LIMIT: "0" }),
      });
      expect(r.exitCode, r.stderr).toBe(73);
      // The run's lock beside the journal is the first file it writes.
      expect(r.stderr).toMatch(/cannot write the journal (lock )?.*new\.journal(\.lock)?: no space left on device/);
      expect(rec.requests).toHaveLength(0);
    } finally {
      rmSync(filler);
    }
  });
});

describe.skipIf(!mounted)("a journal cut short by a full disk", () => {
  test("its header could not be written: 73, no file left that blocks the next run; with space again the same command sends, once", async () => {
    // One page free: the run's lock takes it, the journal's header then finds none.
    const spare = join(tiny, "spare");
    writeFileSync(spare, Buffer.alloc(4096, 1));
    const filler = fill(tiny);
    rmSync(spare);
    const journal = join(tiny, "cut.journal");
    const input = tmp.file("cut.jsonl", `${JSON.stringify({ to: "a@example.com", subject: "cut", text: "x" })}\n`);
    const args = ["batch", input, "-f", "ci@example.com", "--journal", journal];
    try {
      const r = await runCli(args, { env: env(join(tmp.dir, "b-cut"), { MAILSEND_RATE_LIMIT: "0" }) });
      expect(r.exitCode, r.stderr).toBe(73);
      expect(r.stderr).toMatch(/cut\.journal.*no space left on device/);
      expect(rec.requests).toHaveLength(0);
      expect(existsSync(journal)).toBe(false);
    } finally {
      rmSync(filler);
    }
    // A header torn by a crash (as kill -9 would leave it) does not stand in the way either.
    writeFileSync(journal, '{"mailsend_jou');
    const again = await runCli(args, { env: env(join(tmp.dir, "b-cut"), { MAILSEND_RATE_LIMIT: "0" }) });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(rec.requests).toHaveLength(1);
  });
});

describe.skipIf(!mounted)("a read-only state dir", () => {
  test("batch says read-only file system (73), not 'no such file or directory'", async () => {
    const ro = join(tmp.dir, "ro");
    mkdirSync(ro);
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", ro]).status).toBe(0);
    try {
      const input = join(tmp.dir, "ro-rows.jsonl");
      writeFileSync(
        input,
        `${JSON.stringify({ from: "ci@example.com", to: "dev@example.com", subject: "ro", text: "x" })}\n`,
      );
      const r = await runCli(["batch", input], { env: env(join(ro, "state")) });
      expect(r.exitCode, r.stderr).toBe(73);
      expect(r.stderr).toMatch(/read-only file system/);
      expect(r.stderr).not.toMatch(/no such file or directory/);
      expect(rec.requests).toHaveLength(0);
    } finally {
      spawnSync("umount", [ro]);
    }
  });
});

describe.skipIf(!mounted)("queue run on a full state disk", () => {
  test("says why nothing went (the budget's lock cannot be written) and exits 73; with space again all go once", async () => {
    const state = join(tiny, "queue");
    mkdirSync(state, { mode: 0o700 });
    const e = { ...env(state), MAILSEND_QUEUE_AUTORUN: "0" };
    for (const i of [1, 2]) {
      const q = await runCli(
        [
          "send",
          "-f",
          "ci@example.com",
          "-t",
          "dev@example.com",
          "-s",
          `queued ${i}`,
          "--html",
          "<p>x</p>",
          "--queue",
          "always",
        ],
        { env: e },
      );
      expect(q.exitCode, q.stderr).toBe(0);
    }
    const filler = fill(tiny);
    try {
      const r = await runCli(["queue", "run"], { env: e });
      expect(r.exitCode, r.stderr).toBe(73);
      expect(r.stderr).toMatch(/not delivered \(cannot write the rate-limit lock .*no space left on device\)/);
      expect(r.stderr).toMatch(/^mailsend: sent 0, deferred 2, failed 0; 2 left in the outbox$/m);
      expect(r.stderr).toMatch(/^error: cannot write the rate-limit lock .*: no space left on device$/m);
      expect(rec.requests).toHaveLength(0);
    } finally {
      rmSync(filler);
    }
    const again = await runCli(["queue", "run"], { env: e });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(rec.requests).toHaveLength(2);
  });
});

describe.skipIf(!mounted)("the library: a full disk after acceptance", () => {
  test("send() resolves (the message was sent) with warnings, and onWarning hears them; sendBatch's item stays sent", async () => {
    const { send, sendBatch } = await import("../../src/index.js");
    const stateDir = join(tiny, "lib");
    mkdirSync(stateDir, { mode: 0o700 });
    let filler = "";
    rec.script(() => {
      filler = fill(tiny);
      return {};
    });
    const heard: string[] = [];
    try {
      const r = await send(
        { from: "ci@example.com", to: "dev@example.com", subject: "lib", text: "hi" },
        { baseUrl: rec.url, apiKey: KEY, stateDir, rateLimit: 10, retries: 0, onWarning: (t) => heard.push(t) },
      );
      expect(r.messageId).toBeTruthy();
      expect(r.warnings).toHaveLength(1);
      expect(r.warnings![0]).toMatch(
        /the message was sent, but recording it in the rate-limit budget failed: .*no space left on device/,
      );
      expect(heard).toEqual(r.warnings);
    } finally {
      if (filler) rmSync(filler);
    }
    rec.script(() => {
      filler = fill(tiny);
      return {};
    });
    try {
      const b = await sendBatch([{ from: "ci@example.com", to: "dev@example.com", subject: "lib b", text: "hi" }], {
        baseUrl: rec.url,
        apiKey: KEY,
        stateDir,
        rateLimit: 10,
        retries: 0,
      });
      expect(b.summary.exitCode).toBe(0);
      expect(b.results[0]!.status).toBe("sent");
      expect(b.results[0]!.warnings?.[0]).toMatch(/no space left on device/);
    } finally {
      if (filler) rmSync(filler);
    }
  });
});

describe.skipIf(!mounted)("a full disk under the sandbox", () => {
  test("`mailsend sandbox` on a full data dir: 73 naming the dir and 'no space left on device' (not 70), no empty lock left behind", async () => {
    const dir = join(tiny, "sandbox");
    const filler = fill(tiny);
    try {
      const r = await runCli(["sandbox", "--dir", dir, "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0"], {
        timeoutMs: 30_000,
      });
      expect(r.exitCode, r.stderr).toBe(73);
      expect(r.stderr).toMatch(/no space left on device/);
      expect(r.stderr).toContain(dir);
      expect(r.stderr).not.toMatch(/internal error|a bug/);
      expect(existsSync(join(dir, "sandbox.lock"))).toBe(false);
    } finally {
      rmSync(filler);
    }
  });
});

describe("results file", () => {
  test("on /dev/full: every item is sent and reported so (exit 0), the results file's failure is a warning", async () => {
    const input = tmp.file(
      "two.jsonl",
      `${["a", "b"].map((x) => JSON.stringify({ to: `${x}@example.com`, subject: x, text: x })).join("\n")}\n`,
    );
    const r = await runCli(
      [
        "batch",
        input,
        "-f",
        "ci@example.com",
        "--results",
        "/dev/full",
        "--journal",
        join(tmp.dir, "devfull.journal"),
        "--json",
      ],
      {
        env: env(join(tmp.dir, "b3"), { MAILSEND_RATE_LIMIT: "0" }),
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests).toHaveLength(2);
    expect(
      r.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).status),
    ).toEqual(["sent", "sent"]);
    expect(r.stderr).toMatch(/cannot write the results file \/dev\/full: no space left on device/);
  });

  test("is created 0600, like the journal; a state dir open to others gets a warning", async () => {
    const input = tmp.file("mode.jsonl", `${JSON.stringify({ to: "a@example.com", subject: "m", text: "x" })}\n`);
    const results = join(tmp.dir, "results.jsonl");
    const r = await runCli(["batch", input, "-f", "ci@example.com", "--results", results], {
      env: env(join(tmp.dir, "b4"), { MAILSEND_RATE_LIMIT: "0" }),
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(statSync(results).mode & 0o777).toBe(0o600);

    const open = join(tmp.dir, "open-state");
    mkdirSync(open, { mode: 0o755 });
    spawnSync("chmod", ["755", open]);
    const w = await runCli(["batch", input, "-f", "ci@example.com"], { env: env(open, { MAILSEND_RATE_LIMIT: "0" }) });
    expect(w.exitCode, w.stderr).toBe(0);
    expect(w.stderr).toMatch(
      /warning: the state directory .*open-state can be read by other users \(mode 0755\).*chmod 700/,
    );
    // One it made itself is private.
    expect(statSync(join(open, "batches")).mode & 0o777).toBe(0o700);
  });
});
