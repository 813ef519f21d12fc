/**
 * Damaged files: a journal torn by a crash, a journal damaged in the middle
 * (refused; --fresh moves it aside and says so), a budget state file that is
 * not one (said, and the window counted as full so the limit holds).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { keyHash } from "../../src/limits/budget.js";
import { runInProcess } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "faults-files-test-key";
const tmp = scratch("mailsend-faults-files-");
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
afterAll(() => tmp.remove());

const env = (extra: Record<string, string> = {}) => ({
  MAILSEND_API_KEY: KEY,
  MAILSEND_BASE_URL: rec.url,
  MAILSEND_STATE_DIR: join(tmp.dir, "state"),
  ...extra,
});

function rows(name: string, n: number): string {
  return tmp.file(
    name,
    `${Array.from({ length: n }, (_, i) => JSON.stringify({ to: `u${i}@example.com`, subject: `${name} ${i}`, text: "x" })).join("\n")}\n`,
  );
}

const batch = (args: string[]) => runInProcess(["batch", ...args, "-f", "ci@example.com"], { env: env() });

describe("batch journal", () => {
  test("a torn last line (a crash mid-write) is cut before the next run appends: every line stays a record", async () => {
    const input = rows("torn.jsonl", 3);
    const journal = join(tmp.dir, "torn.journal");
    // Item 3 fails (500): the journal says failed; then a crash tears the line after it.
    rec.script({}, {}, { status: 400, body: { success: false, error: { code: "invalid", message: "no" } } });
    const first = await batch([input, "--journal", journal]);
    expect(first.exitCode).toBe(65);
    appendFileSync(journal, '{"i":2,"s":"do');
    rec.reset();
    const second = await batch([input, "--journal", journal]);
    expect(second.exitCode, second.stderr).toBe(0);
    expect(rec.requests.map((r) => r.json.subject)).toEqual(["torn.jsonl 2"]);
    const lines = readFileSync(journal, "utf8").split("\n");
    expect(lines.pop()).toBe("");
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    // And the run after that finds every item sent.
    rec.reset();
    const third = await batch([input, "--journal", journal, "--json"]);
    expect(third.exitCode, third.stderr).toBe(0);
    expect(rec.requests).toHaveLength(0);
    expect(
      third.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).status),
    ).toEqual(["skipped", "skipped", "skipped"]);
  });

  test("damaged in the middle: refused (74) with a hint that --fresh resends everything and how to see what went out; --fresh moves it aside and says so", async () => {
    const input = rows("mid.jsonl", 3);
    const journal = join(tmp.dir, "mid.journal");
    const first = await batch([input, "--journal", journal]);
    expect(first.exitCode, first.stderr).toBe(0);
    const lines = readFileSync(journal, "utf8").split("\n");
    lines[2] = "\u0000\u0000garbage\u0000";
    writeFileSync(journal, lines.join("\n"));
    rec.reset();

    const refused = await batch([input, "--journal", journal]);
    expect(refused.exitCode, refused.stderr).toBe(74);
    expect(refused.stderr).toContain(`the journal ${journal} is damaged at line 3`);
    expect(refused.stderr).toMatch(
      /hint: --fresh starts over: it moves the damaged journal aside and sends EVERY item again, also those already sent/,
    );
    expect(refused.stderr).toMatch(/results file/);
    expect(refused.stderr).not.toMatch(/another --journal/);
    expect(rec.requests).toHaveLength(0);

    const fresh = await batch([input, "--journal", journal, "--fresh"]);
    expect(fresh.exitCode, fresh.stderr).toBe(0);
    expect(fresh.stderr).toMatch(
      /warning: the journal .*mid\.journal was damaged \(line 3\); it is kept as .*\.damaged, and this is a new batch: every item is sent again/,
    );
    expect(rec.requests).toHaveLength(3);
    expect(readdirSync(tmp.dir).filter((f) => f.startsWith("mid.journal.") && f.endsWith(".damaged"))).toHaveLength(1);
  });
});

describe("budget state file", () => {
  test("a damaged one is said on stderr (path, what to do) and the window is counted as full: the limit is never exceeded", async () => {
    const dir = join(tmp.dir, "state", "ratelimit");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = join(dir, `${keyHash(KEY)}.json`);
    writeFileSync(file, '{"entries":[{"t":17');
    const send = (extra: string[], more: Record<string, string> = {}) =>
      runInProcess(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "state", "--text", "hi", ...extra], {
        env: env({ MAILSEND_RATE_LIMIT: "5", MAILSEND_RATE_WINDOW: "2", ...more }),
      });
    const r = await send(["--no-wait"]);
    expect(r.exitCode, r.stderr).toBe(75);
    expect(r.stderr).toContain(`warning: the rate-limit state ${file} was damaged`);
    expect(r.stderr).toMatch(/counted as full/);
    expect(rec.requests).toHaveLength(0);
    expect(readdirSync(dir).some((f) => f.includes(".damaged-"))).toBe(true);
    // The file was rewritten: the next send waits out the window (at most 2 s) and goes, without a warning.
    const next = await send([]);
    expect(next.exitCode, next.stderr).toBe(0);
    expect(next.stderr).not.toMatch(/damaged/);
    expect(rec.requests).toHaveLength(1);
    expect(existsSync(file)).toBe(true);
  });
});
