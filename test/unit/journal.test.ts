import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { fingerprint, Journal, legacyFingerprint } from "../../src/batch/journal.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function journalFile(created: Date, lines: object[]): string {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-"));
  dirs.push(dir);
  const path = join(dir, "j.journal");
  const header = { mailsend_journal: 1, batch: "b1", input: "fp1", created: created.toISOString() };
  writeFileSync(path, `${[header, ...lines].map((l) => JSON.stringify(l)).join("\n")}\n`);
  return path;
}

const opts = (path: string) => ({ path, input: "fp1", fresh: false, resume: false });

test("a finished journal of the same input is resumed (every item skipped) within 24 h", async () => {
  const path = journalFile(new Date(Date.now() - 3600_000), [{ i: 0, s: "done", k: "b1-0", id: "m0" }]);
  const j = await Journal.open(opts(path));
  expect(j.batchId).toBe("b1");
  expect(j.previous.get(0)).toMatchObject({ s: "done", id: "m0" });
  await j.close();
});

test("a finished journal older than 24 h starts a new batch (a nightly job with the same input sends again)", async () => {
  const path = journalFile(new Date(Date.now() - 25 * 3600_000), [{ i: 0, s: "done", k: "b1-0", id: "m0" }]);
  const j = await Journal.open(opts(path));
  expect(j.batchId).not.toBe("b1");
  expect(j.previous.size).toBe(0);
  await j.close();
  expect(readdirSync(join(path, "..")).some((f) => f.endsWith(".old"))).toBe(true);
});

test("an unfinished journal is resumed however old, so nothing in doubt is sent without its key", async () => {
  const path = journalFile(new Date(Date.now() - 72 * 3600_000), [{ i: 0, s: "intended", k: "b1-0" }]);
  const j = await Journal.open(opts(path));
  expect(j.batchId).toBe("b1");
  expect(j.keyFor(0)).toBe("b1-0");
  await j.close();
});

test("records survive as JSON lines; a torn last line is ignored", async () => {
  const path = journalFile(new Date(), []);
  const j = await Journal.open(opts(path));
  await Promise.all([j.record(1, { s: "intended", k: "b1-1" }), j.record(2, { s: "intended", k: "b1-2" })]);
  await j.record(1, { s: "done", k: "b1-1", id: "m1" });
  await j.close();
  writeFileSync(path, `${readFileSync(path, "utf8")}{"i":2,"s":"do`);
  const { states } = Journal.read(path);
  expect(states.get(1)).toMatchObject({ s: "done", id: "m1" });
  expect(states.get(2)).toMatchObject({ s: "intended" });
});

test("a finished journal of another input is replaced and kept; replaced says when that run finished and how many it sent", async () => {
  const path = journalFile(new Date(Date.now() - 3600_000), [
    { i: 0, s: "done", k: "b1-0", id: "m0" },
    { i: 1, s: "done", k: "b1-1", id: "m1" },
  ]);
  const finished = new Date(Date.now() - 1800_000);
  utimesSync(path, finished, finished);
  const changed = { ...opts(path), input: "fp2" };
  // plan() decides without touching the file.
  expect(Journal.plan(changed)).toMatchObject({ action: "replace", reason: "input_changed", sent: 2 });
  expect(readdirSync(join(path, "..")).filter((f) => f.endsWith(".old"))).toEqual([]);

  const j = await Journal.open(changed);
  await j.close();
  expect(j.batchId).not.toBe("b1");
  expect(j.replaced).toMatchObject({ reason: "input_changed", sent: 2 });
  expect(Math.abs(j.replaced!.finishedAt.getTime() - finished.getTime())).toBeLessThan(1000);
  expect(existsSync(j.replaced!.path)).toBe(true);
  expect(j.replaced!.path.startsWith(`${path}.`) && j.replaced!.path.endsWith(".old")).toBe(true);
  expect(Journal.read(j.replaced!.path).states.get(1)).toMatchObject({ s: "done", id: "m1" });
});

test("replaced is unset when a journal is resumed or new; its reason is fresh or stale for those cases", async () => {
  const path = journalFile(new Date(Date.now() - 3600_000), [{ i: 0, s: "done", k: "b1-0", id: "m0" }]);
  expect(Journal.plan(opts(path)).action).toBe("resume");
  const same = await Journal.open(opts(path));
  await same.close();
  expect(same.replaced).toBeUndefined();
  const fresh = await Journal.open({ ...opts(path), fresh: true });
  await fresh.close();
  expect(fresh.replaced).toMatchObject({ reason: "fresh", sent: 1 });

  const old = journalFile(new Date(Date.now() - 25 * 3600_000), [{ i: 0, s: "done", k: "b1-0", id: "m0" }]);
  expect(Journal.plan(opts(old))).toMatchObject({ action: "replace", reason: "stale" });
  const unfinished = journalFile(new Date(), [{ i: 0, s: "intended", k: "b1-0" }]);
  expect(Journal.plan({ ...opts(unfinished), input: "fp2" }).action).toBe("refuse");
  const none = join(join(unfinished, ".."), "none.journal");
  expect(Journal.plan(opts(none)).action).toBe("create");
  expect(() => Journal.plan({ ...opts(none), resume: true })).toThrow(/no journal/);
});

test("each kind of record is the JSON line of { i, ...state }, keys and ids with quotes, backslashes and non-ASCII included", async () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-"));
  dirs.push(dir);
  const path = join(dir, "new.journal");
  const j = await Journal.open({ path, input: "fp1", fresh: false, resume: false });
  const records: Array<[number, Parameters<Journal["record"]>[1]]> = [
    [0, { s: "intended", k: 'a"b\\c-\u00e9-\u2028' }],
    [0, { s: "done", k: 'a"b\\c-\u00e9-\u2028', id: 'm"1\\\n' }],
    [1, { s: "failed", k: "k1", code: "invalid_message", exit: 65 }],
    [2, { s: "unknown", k: "k2", code: "outcome_unknown" }],
  ];
  for (const [i, state] of records) await j.record(i, state);
  await j.close();
  const lines = readFileSync(path, "utf8").trimEnd().split("\n").slice(1);
  expect(lines).toEqual(records.map(([i, state]) => JSON.stringify({ i, ...state })));
  const { states } = Journal.read(path);
  expect(states.get(0)).toEqual(records[1]![1]);
  expect(states.get(1)).toEqual(records[2]![1]);
});

test('"written" resolves once the line is in the file, before its fsync; the same group\'s durable records still wait for it', async () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-"));
  dirs.push(dir);
  const path = join(dir, "written.journal");
  const j = await Journal.open({ path, input: "fp1", fresh: false, resume: false });
  await j.durable();
  const order: string[] = [];
  const durable = j.record(0, { s: "done", k: "k0", id: "m0" }).then(() => order.push("durable"));
  const written = j.record(1, { s: "intended", k: "k1" }, "written").then(() => {
    order.push("written");
    // In the file now: a process killed here leaves it for the re-run to read.
    expect(readFileSync(path, "utf8")).toContain('{"i":1,"s":"intended","k":"k1"}');
  });
  await Promise.all([durable, written]);
  expect(order).toEqual(["written", "durable"]);
  await j.close();
  expect(Journal.read(path).states.get(1)).toEqual({ s: "intended", k: "k1" });
});

test("the run's lock: a second open in this process is refused until the first closes (the lock itself: test/unit/lock.test.ts)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-"));
  dirs.push(dir);
  const path = join(dir, "lock.journal");
  const j = await Journal.open(opts(path));
  expect(existsSync(`${path}.lock`)).toBe(true);
  await expect(Journal.open(opts(path))).rejects.toMatchObject({ code: "temporary_failure" });
  await j.close();
  expect(existsSync(`${path}.lock`)).toBe(false);
  const again = await Journal.open(opts(path));
  await again.close();
  expect(existsSync(`${path}.lock`)).toBe(false);
});

test("a journal cut short before its header was whole (a full disk, a kill -9 as it was made) records nothing: the next run makes it again, without --fresh", async () => {
  const path = journalFile(new Date(), []);
  const whole = readFileSync(path, "utf8");
  for (const left of ["", whole.slice(0, 10), whole.slice(0, whole.length - 1)]) {
    writeFileSync(path, left);
    expect(Journal.plan(opts(path))).toEqual({ action: "create", over: true });
    const j = await Journal.open(opts(path));
    expect(j.previous.size).toBe(0);
    expect(j.replaced).toBeUndefined();
    await j.durable();
    await j.close();
    const header = JSON.parse(readFileSync(path, "utf8").split("\n")[0]!) as {
      mailsend_journal: number;
      batch: string;
    };
    expect(header.mailsend_journal).toBe(1);
    expect(header.batch).not.toBe("b1");
  }
  // Anything else that is not a journal is still refused, and left alone.
  writeFileSync(path, "hello");
  expect(() => Journal.plan(opts(path))).toThrow(/is not a mailsend batch journal/);
  expect(readFileSync(path, "utf8")).toBe("hello");
});

test("only a regular file is ever made again: a link to /dev/null (or the device itself, as root) is refused and left alone", async () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-"));
  dirs.push(dir);
  const path = join(dir, "null.journal");
  symlinkSync("/dev/null", path);
  expect(() => Journal.plan(opts(path))).toThrow(/is not a mailsend batch journal/);
  await expect(Journal.open(opts(path))).rejects.toThrow(/is not a mailsend batch journal/);
  expect(lstatSync(path).isSymbolicLink()).toBe(true);
  expect(statSync("/dev/null").isCharacterDevice()).toBe(true);
});

test("a file's identity is its content: saved again unchanged (new mtime) it is the same input; its journal from an earlier version (mtime in the identity) is still its own", async () => {
  const dir = mkdtempSync(join(tmpdir(), "mailsend-journal-fp-"));
  dirs.push(dir);
  const input = join(dir, "people.csv");
  writeFileSync(input, "to\na@example.com\n");
  const before = await fingerprint(input);
  const legacyBefore = await legacyFingerprint(input);
  utimesSync(input, new Date(Date.now() + 60_000), new Date(Date.now() + 60_000));
  expect(await fingerprint(input)).toBe(before);
  expect(await legacyFingerprint(input)).not.toBe(legacyBefore);
  writeFileSync(input, "to\nb@example.com\n");
  expect(await fingerprint(input)).not.toBe(before);
  // A finished journal written by an earlier version for this very file (its identity then) is resumed, not replaced.
  const path = journalFile(new Date(Date.now() - 3600_000), [{ i: 0, s: "done", k: "b1-0", id: "m0" }]);
  expect(Journal.plan({ path, input: "cNEW", legacyInput: "fp1", fresh: false, resume: false }).action).toBe("resume");
  expect(Journal.plan({ path, input: "cNEW", legacyInput: "other", fresh: false, resume: false })).toMatchObject({
    action: "replace",
    reason: "input_changed",
  });
});
