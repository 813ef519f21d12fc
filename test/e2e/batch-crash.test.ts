/**
 * Crash safety of `mailsend batch`, end to end: a batch of 200 against the
 * sandbox (slowed down with latency, so it takes a few seconds) is killed
 * partway, then the same command is run again. Whatever the kill cut short
 * (sent, in doubt, not started), the sandbox must end up holding each of the
 * 200 exactly once, and the re-run must say what it skipped.
 */
import { execa, type ResultPromise } from "execa";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import type { StoredMessage } from "../../src/sandbox/types.js";
import { baseEnv, defaultJournal, mailsendCommand, ROOT, runCli } from "../helpers/cli.js";
import { overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

const N = 200;
const LATENCY_MS = 50;

let t: TestSandbox;
let tmp: Scratch;
const running: ResultPromise[] = [];
useSandbox((sb) => (t = overRest(sb)), { rateLimit: 1_000_000 });
beforeAll(async () => {
  tmp = scratch("mailsend-batch-crash-");
});
afterEach(async () => {
  // A failed assertion must not leave a batch running.
  for (const c of running.splice(0)) {
    c.kill("SIGKILL");
    await c.catch(() => {});
  }
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
});
afterAll(async () => {
  tmp?.remove();
});

interface Result {
  index: number;
  status: string;
  error?: { code: string; message: string; exit: number; class: string };
  message_id?: string;
  idempotency_key?: string;
}

function resultLines(path: string): Result[] {
  if (!existsSync(path)) return [];
  // The last line may be cut short by the kill.
  return readFileSync(path, "utf8")
    .split("\n")
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Result];
      } catch {
        return [];
      }
    });
}

function journalOf(path: string): { batch: string; states: Map<number, string> } {
  const [head, ...lines] = readFileSync(path, "utf8").split("\n");
  const states = new Map<number, string>();
  for (const l of lines) {
    try {
      const j = JSON.parse(l) as { i: number; s: string };
      states.set(j.i, j.s);
    } catch {
      // a torn last line
    }
  }
  return { batch: (JSON.parse(head!) as { batch: string }).batch, states };
}

async function stored(prefix: string): Promise<StoredMessage[]> {
  return (await t.sb.store.list()).filter((m) => m.subject.startsWith(prefix));
}

function input(prefix: string, n: number): string {
  const rows = Array.from({ length: n }, (_, i) =>
    JSON.stringify({ to: `user${i}@example.com`, subject: `${prefix} ${i}`, text: `message ${i}` }),
  );
  return tmp.file(`${prefix.replace(/\W+/g, "-")}.jsonl`, `${rows.join("\n")}\n`);
}

/** The batch as a child we can signal (async: the sandbox answers from this process). */
function start(args: string[], env: Record<string, string>): ResultPromise {
  const child = execa(...mailsendCommand(["batch", ...args]), {
    env: { ...baseEnv(), ...t.env, ...env },
    extendEnv: false,
    cwd: ROOT,
    stdin: "ignore",
    reject: false,
    timeout: 60_000,
    encoding: "utf8",
  });
  running.push(child);
  return child;
}

/** Each of the n subjects exactly once, each with the batch's own key for its index. */
async function expectEachOnce(prefix: string, n: number, batchId: string): Promise<void> {
  const got = await stored(`${prefix} `);
  const counts = new Map<string, number>();
  for (const m of got) counts.set(m.subject, (counts.get(m.subject) ?? 0) + 1);
  const twice = [...counts].filter(([, c]) => c > 1).map(([s]) => s);
  expect(twice, "sent more than once").toEqual([]);
  const missing = Array.from({ length: n }, (_, i) => `${prefix} ${i}`).filter((s) => !counts.has(s));
  expect(missing, "never sent").toEqual([]);
  expect(got).toHaveLength(n);
  for (const m of got) expect(m.idempotencyKey).toBe(`${batchId}-${m.subject.slice(prefix.length + 1)}`);
}

describe.each(["rest", "smtp"] as const)("over %s", (transport) => {
  test(`a batch of ${N} killed with SIGKILL partway, then run again: each stored exactly once; the re-run skips what was sent`, async () => {
    const prefix = `kill9 ${transport}`;
    const file = input(prefix, N);
    const results = join(tmp.dir, `${transport}-kill-results.jsonl`);
    const args = [
      file,
      "-f",
      "crash@example.com",
      "--transport",
      transport,
      "--results",
      results,
      "--concurrency",
      "4",
    ];
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: LATENCY_MS };
    const before = t.sb.stats.toJSON()[transport];

    const child = start(args, {});
    await until(() => resultLines(results).length >= 40, 20_000);
    // Hold the answers back, and kill once the sandbox has stored a message the journal does not
    // have as done: a crash between the hand-over and the answer, the case that must not double.
    // Only a message stored after the switch is surely held (the sandbox waits after storing): one
    // stored just before it could have its answer, and its "done", land between the look and the kill.
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 2000 };
    const held = new Set((await stored(`${prefix} `)).map((m) => m.subject));
    await until(async () => {
      const done = new Set([...journalOf(defaultJournal(file)).states].filter(([, s]) => s === "done").map(([i]) => i));
      return (await stored(`${prefix} `)).some(
        (m) => !held.has(m.subject) && !done.has(Number(m.subject.slice(prefix.length + 1))),
      );
    }, 10_000);
    child.kill("SIGKILL");
    const killed = await child;
    expect(killed.signal).toBe("SIGKILL");

    const sentBefore = resultLines(results).filter((r) => r.status === "sent");
    const journal = journalOf(defaultJournal(file));
    const inDoubt = [...journal.states].filter(([, s]) => s === "intended").map(([i]) => i);
    const storedAtKill = new Set((await stored(`${prefix} `)).map((m) => Number(m.subject.slice(prefix.length + 1))));
    expect(storedAtKill.size).toBeGreaterThanOrEqual(sentBefore.length);
    expect(storedAtKill.size, "the kill came too late to test anything").toBeLessThan(N);
    // Every message the sandbox answered for, the journal may or may not have marked done;
    // the ones it marked only "intended" and that were stored are the ones a careless resend would double.
    const doubtButStored = inDoubt.filter((i) => storedAtKill.has(i));
    expect(
      doubtButStored.length,
      `no item was in doubt at the kill (in doubt ${inDoubt.join(",")}; stored ${storedAtKill.size})`,
    ).toBeGreaterThan(0);

    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
    const again = await runCli(["batch", ...args, "--json"], { env: { ...t.env }, timeoutMs: 60_000 });
    expect(again.exitCode, again.stderr).toBe(0);
    const out = again.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Result);
    expect(out).toHaveLength(N);
    const skipped = out.filter((r) => r.status === "skipped");
    const sentNow = out.filter((r) => r.status === "sent");
    expect(skipped.length + sentNow.length).toBe(N);
    // What the killed run reported as sent, the re-run reports as already sent, with the same id.
    const skippedIds = new Map(skipped.map((r) => [r.index, r.message_id]));
    for (const r of sentBefore) expect(skippedIds.get(r.index)).toBe(r.message_id);
    expect(again.stderr).toMatch(new RegExp(`"skipped":${skipped.length}`));

    await expectEachOnce(prefix, N, journal.batch);
    const after = t.sb.stats.toJSON()[transport];
    expect(after.accepted - before.accepted).toBe(N);
    // The in-doubt ones were sent again with their keys and recognised as duplicates.
    expect(after.duplicates - before.duplicates).toBeGreaterThanOrEqual(doubtButStored.length);
    // A resent in-doubt item reports the id of the message the sandbox holds.
    const byIndex = new Map(
      (await stored(`${prefix} `)).map((m) => [Number(m.subject.slice(prefix.length + 1)), m.messageId]),
    );
    for (const r of out) expect(r.message_id, `item ${r.index}`).toBe(byIndex.get(r.index));
    expect(readFileSync(defaultJournal(file), "utf8")).not.toContain(t.key);
  });
});

describe("interrupted", () => {
  const results = (name: string) => join(tmp.dir, `${name}-results.jsonl`);

  test("SIGINT: nothing new starts, the messages in flight finish; exit 75 and a summary; the same command finishes it", async () => {
    const prefix = "sigint";
    const n = 120;
    const file = input(prefix, n);
    const res = results("sigint");
    const args = [file, "-f", "int@example.com", "--results", res, "--concurrency", "4"];
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: LATENCY_MS };

    const child = start(args, {});
    await until(() => resultLines(res).length >= 20, 20_000);
    child.kill("SIGINT");
    const stopped = await child;
    expect(stopped.exitCode, String(stopped.stderr)).toBe(75);
    expect(stopped.stdout).toMatch(/\d+ sent.*, \d+ not started \(interrupted\) \(of 120\) in \d+\.\d s/);
    expect(stopped.stderr).toMatch(/stopping; the messages in flight finish/);
    expect(stopped.stderr).toMatch(/run the same command again/);
    const first = resultLines(res);
    expect(first.length).toBeLessThan(n);
    // A stop is not a crash: what was on the wire got its answer; nothing is left in doubt.
    expect(first.filter((r) => r.status === "unknown")).toEqual([]);
    for (const r of first.filter((x) => x.status === "failed"))
      expect(r).toMatchObject({ error: { code: "temporary_failure", message: "interrupted before it was sent" } });
    const sent = first.filter((r) => r.status === "sent").length;
    expect((await stored(`${prefix} `)).length).toBe(sent);

    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
    const again = await runCli(["batch", ...args], { env: { ...t.env }, timeoutMs: 60_000 });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^${n - sent} sent, ${sent} already sent \\(of ${n}\\)`));
    await expectEachOnce(prefix, n, journalOf(defaultJournal(file)).batch);
  });

  test("a second SIGINT aborts the sends in flight: reported as outcome unknown (76 class), named on stderr, exit 130; resent with their keys, stored once", async () => {
    const prefix = "twice";
    const n = 40;
    const file = input(prefix, n);
    const res = results("twice");
    const args = [file, "-f", "int@example.com", "--results", res, "--concurrency", "4", "--json"];
    // Long enough that the second signal lands while the answers are held back.
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 1000 };
    const before = t.sb.stats.toJSON().rest;

    const child = start(args, {});
    await until(async () => (await stored(`${prefix} `)).length >= 6, 20_000);
    child.kill("SIGINT");
    await new Promise((r) => setTimeout(r, 100));
    child.kill("SIGINT");
    const stopped = await child;
    expect(stopped.exitCode, String(stopped.stderr)).toBe(130);
    const first = resultLines(res);
    const unknown = first.filter((r) => r.status === "unknown");
    expect(unknown.length).toBeGreaterThan(0);
    // Which ones are in doubt is said before the exit (--json: as an object on stderr).
    const said = String(stopped.stderr)
      .split("\n")
      .filter((l) => l.startsWith('{"interrupted"'))
      .map((l) => JSON.parse(l) as { interrupted: { signal: string; unknown: number[] }; message: string });
    expect(said).toHaveLength(1);
    expect(said[0]!.interrupted).toEqual({ signal: "SIGINT", unknown: unknown.map((r) => r.index) });
    // The summary carries the exit code the process ends with, and counts every item.
    const summary = String(stopped.stderr)
      .split("\n")
      .filter((l) => l.startsWith('{"summary"'))
      .map((l) => (JSON.parse(l) as { summary: Record<string, number | boolean> }).summary)[0]!;
    expect(summary).toMatchObject({ total: n, exitCode: 130, interrupted: true });
    const counted = ["sent", "failed", "unknown", "invalid", "skipped", "not_started"].reduce(
      (a, k) => a + Number(summary[k] ?? 0),
      0,
    );
    expect(counted).toBe(n);
    expect(said[0]!.message).toMatch(
      /^interrupted twice: the outcome of items? \d+ \(line \d+, to user\d+@example\.com\)/,
    );
    for (const r of unknown)
      expect(r).toMatchObject({ error: { code: "outcome_unknown", exit: 76, class: "protocol" } });
    const journal = journalOf(defaultJournal(file));
    for (const r of unknown) expect(journal.states.get(r.index)).toBe("unknown");

    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
    const again = await runCli(["batch", ...args], { env: { ...t.env }, timeoutMs: 60_000 });
    expect(again.exitCode, again.stderr).toBe(0);
    await expectEachOnce(prefix, n, journal.batch);
    const after = t.sb.stats.toJSON().rest;
    expect(after.duplicates - before.duplicates).toBeGreaterThanOrEqual(unknown.length);
    // The in-doubt ones now report the id of the copy the sandbox kept.
    const ids = new Map(
      (await stored(`${prefix} `)).map((m) => [Number(m.subject.slice(prefix.length + 1)), m.messageId]),
    );
    const out = again.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Result);
    for (const r of unknown)
      expect(out.find((x) => x.index === r.index)).toMatchObject({ status: "sent", message_id: ids.get(r.index) });
  });
});
