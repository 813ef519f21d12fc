/**
 * The journal's group commit: records made together share one fdatasync, and
 * none of them is reported on disk before the fdatasync that covers it has
 * finished. A crash that loses the lines written after the last finished
 * fdatasync (what a power loss leaves of a file: its durable part) makes the
 * next run send those items again, each with the idempotency key it had
 * before, never a different one, so the service takes each message once.
 *
 * fdatasync is wrapped (vi.mock of node:fs) so the test can hold a sync back,
 * count syncs, and know how much of the file each finished sync made durable.
 */
import { copyFileSync, fstatSync, mkdtempSync, rmSync, statSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import type { Message } from "../../src/core/message.js";
import type { SendContext, SendResult, Transport } from "../../src/core/transport.js";
import { Journal } from "../../src/batch/journal.js";
import { runBatch, type ItemResult } from "../../src/batch/runner.js";

type Sync = (fd: number, cb: (e: NodeJS.ErrnoException | null) => void) => void;

const fsHooks = vi.hoisted(() => ({
  /** Replaces fdatasync while set; gets the real one to call. */
  fdatasync: undefined as undefined | ((real: Sync, fd: number, cb: (e: NodeJS.ErrnoException | null) => void) => void),
}));

vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const fdatasync: Sync = (fd, cb) =>
    fsHooks.fdatasync ? fsHooks.fdatasync(real.fdatasync, fd, cb) : real.fdatasync(fd, cb);
  return { ...real, default: { ...real, fdatasync }, fdatasync };
});

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "mailsend-group-commit-"));
});
afterEach(() => {
  fsHooks.fdatasync = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const open = (path: string) => Journal.open({ path, input: "fp", fresh: false, resume: false });

test("records made together share one fdatasync, and none resolves before it has finished", async () => {
  const journal = await open(join(dir, "j"));
  const held: Array<() => void> = [];
  let syncs = 0;
  fsHooks.fdatasync = (real, fd, cb) => {
    syncs++;
    held.push(() => real(fd, cb));
  };
  let resolved = 0;
  const records = Array.from({ length: 10 }, (_, i) =>
    journal.record(i, { s: "intended", k: journal.keyFor(i) }).then(() => resolved++),
  );
  await vi.waitFor(() => expect(held).toHaveLength(1));
  // Written, not yet durable: nobody is told it is on disk.
  await new Promise((r) => setTimeout(r, 20));
  expect(resolved).toBe(0);
  // A record made while that fdatasync runs waits for the next one.
  const later = journal.record(10, { s: "intended", k: journal.keyFor(10) }).then(() => resolved++);
  held.shift()!();
  await Promise.all(records);
  expect(resolved).toBe(10);
  await vi.waitFor(() => expect(held).toHaveLength(1));
  held.shift()!();
  await later;
  expect(syncs).toBe(2);
  fsHooks.fdatasync = undefined;
  await journal.close();
  expect(Journal.read(join(dir, "j")).states.size).toBe(11);
});

/** A service that keeps what it accepted by idempotency key, as the real one does for 24 h. */
function service(onAccept: (accepted: number) => void = () => {}) {
  const byKey = new Map<string, { subject: string; id: string }>();
  const sends: Array<{ subject: string; key: string }> = [];
  let accepted = 0;
  const transport: Transport = {
    name: "rest",
    preview: async () => {},
    close: async () => {},
    async send(m: Message, _ctx?: SendContext): Promise<SendResult> {
      // Answers come back in an order of their own, as from N connections.
      await new Promise((r) => setTimeout(r, (m.subject.length * 7) % 5));
      sends.push({ subject: m.subject, key: m.idempotencyKey });
      let kept = byKey.get(m.idempotencyKey);
      if (!kept) {
        kept = { subject: m.subject, id: `msg_${++accepted}` };
        byKey.set(m.idempotencyKey, kept);
        onAccept(accepted);
      }
      return {
        transport: "rest",
        messageId: kept.id,
        recipients: m.to.map((t) => t.address),
        idempotencyKey: m.idempotencyKey,
        status: 200,
        attempts: 1,
      };
    },
  };
  return { transport, byKey, sends };
}

const N = 60;
const rows = `${Array.from({ length: N }, (_, i) => JSON.stringify({ from: "a@example.com", to: `u${i}@example.com`, subject: `item ${i}`, text: "x" })).join("\n")}\n`;

function batch(journal: Journal, transport: Transport, results: ItemResult[], signal?: AbortSignal) {
  return runBatch({
    input: {
      format: "jsonl",
      open: async function* () {
        yield Buffer.from(rows);
      },
    },
    defaults: {},
    transportName: "rest",
    transport,
    deliver: { limits: { limit: 0, windowMs: 60_000 }, retries: 0, maxWaitMs: 0, noWait: true },
    concurrency: 8,
    check: false,
    failFast: false,
    journal,
    onResult: (r) => results.push(r),
    ...(signal ? { signal } : {}),
  });
}

test("a crash between the sends and their grouped fdatasync: the next run resends those items with the same keys, and each message is taken once", async () => {
  const path = join(dir, "batch.journal");
  const first = await open(path);
  // The process dies the moment the service has accepted half the batch: that item's
  // answer is never recorded, and records still waiting for their fdatasync are lost.
  let crashed = false;
  const svc = service((accepted) => {
    if (accepted === N / 2) crashed = true;
  });
  // The bytes each finished fdatasync made durable: all that was written before it was called.
  let durable = statSync(path).size;
  let syncs = 0;
  fsHooks.fdatasync = (real, fd, cb) => {
    if (crashed) return; // the process is gone: this sync never finishes, nobody hears back
    const size = fstatSync(fd).size;
    syncs++;
    real(fd, (e) => {
      if (!e && !crashed) durable = size;
      cb(e);
    });
  };
  const results: ItemResult[] = [];
  const running = batch(first, svc.transport, results);
  await vi.waitFor(() => expect(crashed).toBe(true), { timeout: 10_000 });
  // The sends already on the wire get their answers (no record of them becomes durable); nothing new starts.
  await new Promise((r) => setTimeout(r, 100));
  const acceptedAtCrash = new Map([...svc.byKey].map(([k, v]) => [v.subject, k]));
  // What a power loss leaves: the journal up to its last durable byte.
  const image = join(dir, "after-crash.journal");
  copyFileSync(path, image);
  truncateSync(image, durable);
  void running.catch(() => {});
  expect(syncs).toBeLessThan(2 * N); // grouped: fewer fdatasyncs than records

  // Accepted by the service, but its "done" line was not durable: the case a careless resend would double.
  const lost = [...acceptedAtCrash.keys()].filter(
    (subject) => Journal.read(image).states.get(Number(subject.split(" ")[1]))?.s !== "done",
  );
  expect(lost.length, "the crash came after every accepted item was durable: nothing tested").toBeGreaterThan(0);

  fsHooks.fdatasync = undefined;
  const second = await open(image);
  expect(second.batchId).toBe(first.batchId);
  const mark = svc.sends.length;
  const again: ItemResult[] = [];
  const summary = await batch(second, svc.transport, again);
  await second.close();
  expect(summary).toMatchObject({ total: N, failed: 0, unknown: 0 });
  expect(summary.sent + summary.skipped).toBe(N);

  // Every item that the service had accepted and was sent again went with the key it had the first time.
  const resent = svc.sends.slice(mark);
  for (const s of resent) {
    const before = acceptedAtCrash.get(s.subject);
    if (before !== undefined) expect(s.key, s.subject).toBe(before);
  }
  for (const subject of lost) expect(resent.some((s) => s.subject === subject)).toBe(true);
  // Each subject under exactly one key: the service holds each message once.
  const keysBySubject = new Map<string, Set<string>>();
  for (const s of svc.sends) keysBySubject.set(s.subject, (keysBySubject.get(s.subject) ?? new Set()).add(s.key));
  expect([...keysBySubject.values()].filter((k) => k.size !== 1)).toEqual([]);
  expect(svc.byKey.size).toBe(N);
  // Nothing reported skipped on the re-run unless its "done" line was durable before the crash.
  const durableDone = Journal.read(image).states;
  for (const r of again.filter((x) => x.status === "skipped")) expect(durableDone.get(r.index)?.s).toBe("done");
});
