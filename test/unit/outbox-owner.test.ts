/**
 * Root writing in another user's outbox (`sudo mailsend queue retry`, a root cron job pointed at
 * www-data's outbox) gives each file it makes to the owner of the directory it goes in: that
 * user's runner must go on reading its own mail, and its next retry stamp must still be made.
 */
import { chownSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { Outbox } from "../../src/outbox/store.js";
import { scratch } from "../helpers/tmp.js";

const s = scratch("mailsend-outbox-owner-");
afterAll(() => s.remove());
const NOBODY = 65534;

test.skipIf(process.getuid?.() !== 0)(
  "as root in nobody's outbox: the message, its state and the retry stamp are nobody's",
  async () => {
    // Only the state dir is nobody's: the outbox's directories root makes in it become nobody's too.
    const state = join(s.dir, "state");
    mkdirSync(state);
    chownSync(state, NOBODY, NOBODY);
    const dir = join(state, "outbox");
    const box = new Outbox(dir);
    const id = await box.add({
      raw: Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nSubject: x\r\n\r\nx\r\n"),
      envelope: { from: "a@example.com", to: ["b@example.com"] },
      idempotencyKey: "k-owner",
      source: "sendmail",
      subject: "x",
      holdUntil: Date.now() + 60_000,
    });
    await box.setState(id, { attempts: 1, nextAttemptAt: 0 });
    // A stamp root left before, 0600 and root's: made anew, not rewritten in place.
    writeFileSync(join(dir, "retry.stamp"), "0\n", { mode: 0o600 });
    await box.markRetried();
    for (const f of [
      dir,
      join(dir, "queue"),
      join(dir, "tmp"),
      join(dir, "queue", `${id}.msg`),
      join(dir, "queue", `${id}.state`),
      join(dir, "retry.stamp"),
    ]) {
      expect(statSync(f).uid, f).toBe(NOBODY);
      expect(statSync(f).gid, f).toBe(NOBODY);
    }
  },
);

test("a user's own outbox: files stay this user's", async () => {
  const dir = join(s.dir, "own");
  const box = new Outbox(dir);
  box.ensureDirs();
  const id = await box.add({
    raw: Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nSubject: y\r\n\r\ny\r\n"),
    envelope: { from: "a@example.com", to: ["b@example.com"] },
    idempotencyKey: "k-own",
    source: "sendmail",
    subject: "y",
  });
  await box.markRetried();
  expect(statSync(join(dir, "queue", `${id}.msg`)).uid).toBe(process.getuid?.());
  expect(statSync(join(dir, "retry.stamp")).uid).toBe(process.getuid?.());
});
