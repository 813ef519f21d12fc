import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { MailsendError, type ErrorCode } from "../../src/core/errors.js";
import type { Message } from "../../src/core/message.js";
import type { SendResult, Transport } from "../../src/core/transport.js";
import { keyHash } from "../../src/limits/budget.js";
import { resolveLimits } from "../../src/settings/budget.js";
import {
  FALLBACK_STATE_ROOT,
  fallbackStateDir,
  ephemeralMount,
  otherStateDir,
  stateDir,
} from "../../src/settings/state-dir.js";
import { carriesIdempotencyKey, deliver } from "../../src/limits/deliver.js";
import { FileSlotStore } from "../../src/limits/file-store.js";
import { backoffMs, retryVerdict, shouldRetry } from "../../src/limits/retry.js";
import type { SlotStore } from "../../src/limits/store.js";

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), "mailsend-limits-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("file slot store", () => {
  test("several stores on one file (as several processes) never hand out more than the limit", async () => {
    const dir = tmp();
    const limits = { limit: 7, windowMs: 60_000 };
    const stores = Array.from({ length: 4 }, () => new FileSlotStore({ dir, keyHash: "k" }));
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => stores[i % 4]!.tryTake(`id${i}`, limits)));
    expect(results.filter((r) => r.ok).length).toBe(7);
    expect(await stores[0]!.used(limits)).toBe(7);
  });

  test("a lock older than the stale timeout is broken even if its pid is alive", async () => {
    const dir = tmp();
    let now = 1_000_000;
    const store = new FileSlotStore({ dir, keyHash: "k", staleMs: 2_000, now: () => (now += 100) });
    writeFileSync(join(dir, "k.json.lock"), `${process.ppid} ${now}`);
    expect((await store.tryTake("a", { limit: 1, windowMs: 1000 })).ok).toBe(true);
    expect(existsSync(join(dir, "k.json.lock"))).toBe(false);
  });

  test("the key never appears in the state: files are named by its hash", () => {
    expect(keyHash("sk_live_secret")).toMatch(/^[0-9a-f]{32}$/);
    expect(keyHash("sk_live_secret")).not.toContain("secret");
    expect(stateDir({ MAILSEND_STATE_DIR: "/x" })).toBe("/x");
    // Homes this user can write (the dirs are made on first use).
    const home = tmp();
    const xdg = tmp();
    expect(stateDir({ XDG_STATE_HOME: xdg, HOME: home }, "linux")).toBe(join(xdg, "mailsend"));
    expect(stateDir({ HOME: home }, "linux")).toBe(join(home, ".local", "state", "mailsend"));
    // A home that does not exist is not made (root with HOME=/nonexistent would make it): the
    // /var/tmp dir instead. XDG_STATE_HOME, given, is used as asked.
    const missing = join(tmp(), "no-such-home");
    expect(stateDir({ HOME: missing }, "linux", () => "/var/tmp/mailsend-test")).toBe("/var/tmp/mailsend-test");
    expect(existsSync(missing)).toBe(false);
    expect(stateDir({ HOME: missing, XDG_STATE_HOME: xdg }, "linux", () => "/var/tmp/mailsend-test")).toBe(
      join(xdg, "mailsend"),
    );
  });

  test.skipIf(process.platform === "win32")(
    "a home this user cannot write: a private /var/tmp/mailsend-<uid> instead, never one another user made",
    () => {
      const root = tmp();
      const uid = process.getuid!();
      const made = fallbackStateDir(root);
      expect(made).toBe(join(root, `mailsend-${uid}`));
      expect(statSync(made!).mode & 0o777).toBe(0o700);
      // Found again as it is: the same dir for every process of this user.
      expect(fallbackStateDir(root)).toBe(made);
      // Open to others (made by someone else, or chmod'ed): not used.
      chmodSync(made!, 0o755);
      expect(fallbackStateDir(root)).toBeUndefined();
      // A link planted in its place: not followed.
      const other = tmp();
      rmSync(made!, { recursive: true });
      chmodSync(other, 0o700);
      symlinkSync(other, made!);
      expect(fallbackStateDir(root)).toBeUndefined();
      // Not a directory: nothing.
      rmSync(made!);
      writeFileSync(made!, "");
      expect(fallbackStateDir(root)).toBeUndefined();
      expect(FALLBACK_STATE_ROOT).toBe("/var/tmp");
    },
  );

  test.skipIf(process.platform === "win32")(
    "the other state dir (mail left in /var/tmp) is named only when this user made it for itself",
    () => {
      const root = tmp();
      const env = { HOME: tmp() };
      const dir = join(root, `mailsend-${process.getuid!()}`);
      expect(otherStateDir(env, root)).toBeUndefined();
      mkdirSync(dir, { mode: 0o777 });
      chmodSync(dir, 0o777);
      // Open to all (as a dir another user made would be): not ours to point at.
      expect(otherStateDir(env, root)).toBeUndefined();
      chmodSync(dir, 0o700);
      expect(otherStateDir(env, root)).toBe(dir);
      expect(otherStateDir({ ...env, MAILSEND_STATE_DIR: "/x" }, root)).toBeUndefined();
    },
  );

  test("systemd's PrivateTmp /var/tmp (a service's own, removed when it stops) is told from a /var/tmp partition", () => {
    const privateTmp = [
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
      "310 22 8:1 /tmp/systemd-private-4f2a-php8.2-fpm.service-Ab12Cd/tmp /tmp rw,relatime shared:190 - ext4 /dev/sda1 rw",
      "311 22 8:1 /var/tmp/systemd-private-4f2a-php8.2-fpm.service-Xy34Ef/tmp /var/tmp rw,relatime shared:191 - ext4 /dev/sda1 rw",
    ].join("\n");
    expect(ephemeralMount("/var/tmp", privateTmp)).toBe(true);
    const partition = [
      "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw",
      "40 22 8:3 / /var/tmp rw,relatime - ext4 /dev/sda3 rw",
    ].join("\n");
    expect(ephemeralMount("/var/tmp", partition)).toBe(false);
    expect(ephemeralMount("/var/tmp", "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw")).toBe(false);
    // A tmpfs there (systemd's TemporaryFileSystem=): gone with the service or the boot.
    expect(
      ephemeralMount(
        "/var/tmp",
        [
          "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw",
          "90 22 0:52 / /var/tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1024k",
        ].join("\n"),
      ),
    ).toBe(true);
  });

  test("limits come from the flag, then the environment, then 60 per minute", () => {
    expect(resolveLimits({}, {})).toEqual({ limit: 60, windowMs: 60_000 });
    expect(resolveLimits({}, { MAILSEND_RATE_LIMIT: "10", MAILSEND_RATE_WINDOW: "5" })).toEqual({
      limit: 10,
      windowMs: 5_000,
    });
    expect(resolveLimits({ rateLimit: 3 }, { MAILSEND_RATE_LIMIT: "10" }).limit).toBe(3);
    expect(() => resolveLimits({}, { MAILSEND_RATE_LIMIT: "ten" })).toThrow(/whole number/);
  });
});

describe("retry policy", () => {
  const err = (code: ErrorCode, extra: { status?: number; retryAfter?: number; mayHaveBeenSent?: boolean } = {}) =>
    new MailsendError(code, code, extra);

  test.each([
    ["connection_failed", true],
    ["timeout", true],
    ["rate_limited", true],
    ["temporary_failure", true],
    ["invalid_message", false],
    ["auth_failed", false],
    ["key_revoked", false],
    ["too_large", false],
    ["rejected", false],
    ["protocol_error", false],
  ] as const)("%s retried: %s", (code, yes) => {
    expect(shouldRetry(err(code), true)).toBe(yes);
    expect(shouldRetry(err(code), false)).toBe(yes);
  });

  test("outcome unknown and 500 are retried only with an idempotency key; 502/503/504 always", () => {
    expect(retryVerdict("outcome_unknown")).toBe("retry-if-idempotent");
    expect(shouldRetry(err("outcome_unknown"), true)).toBe(true);
    expect(shouldRetry(err("outcome_unknown"), false)).toBe(false);
    expect(shouldRetry(err("service_error", { status: 500 }), false)).toBe(false);
    expect(shouldRetry(err("service_error", { status: 500 }), true)).toBe(true);
    expect(shouldRetry(err("service_error", { status: 503 }), false)).toBe(true);
  });

  test("backoff honours Retry-After, else full jitter under an exponential cap", () => {
    expect(backoffMs(1, err("rate_limited", { retryAfter: 7 }))).toBe(7000);
    expect(backoffMs(3, err("connection_failed"), { random: () => 0.999 })).toBeLessThan(2000);
    expect(backoffMs(3, err("connection_failed"), { random: () => 0.999 })).toBeGreaterThan(1900);
    expect(backoffMs(30, err("connection_failed"), { random: () => 0.999, capMs: 30_000 })).toBeLessThan(30_000);
    expect(backoffMs(1, err("connection_failed"), { random: () => 0 })).toBe(0);
  });
});

describe("deliver", () => {
  const message = { idempotencyKey: "k1" } as Message;
  const ok: SendResult = {
    transport: "rest",
    messageId: "m1",
    recipients: ["a@example.com"],
    idempotencyKey: "k1",
    attempts: 1,
  };

  function script(outcomes: Array<MailsendError | "ok">): Transport & { calls: number } {
    return {
      name: "rest",
      calls: 0,
      async send() {
        const o = outcomes[this.calls++];
        if (o === "ok" || o === undefined) return ok;
        throw o;
      },
      async preview() {},
      async close() {},
    };
  }

  function memoryStore(): SlotStore & { log: string[] } {
    const log: string[] = [];
    let taken = 0;
    return {
      log,
      async tryTake(id) {
        log.push(`take ${id.length > 0}`);
        return taken++ < 100 ? { ok: true } : { ok: false, waitMs: 10 };
      },
      async complete() {
        log.push("complete");
      },
      async release() {
        log.push("release");
      },
      async block(ms) {
        log.push(`block ${ms}`);
      },
      async used() {
        return taken;
      },
      async close() {},
    };
  }

  const base = {
    limits: { limit: 60, windowMs: 60_000 },
    retries: 3,
    maxWaitMs: 600_000,
    noWait: false,
    sleep: async () => {},
  };

  test("retries a connection failure, giving the unused slot back, and counts attempts", async () => {
    const t = script([new MailsendError("connection_failed", "refused"), "ok"]);
    const store = memoryStore();
    const r = await deliver(t, message, { ...base, store });
    expect(r.attempts).toBe(2);
    expect(store.log).toEqual(["take true", "release", "take true", "complete"]);
  });

  test("a 429 blocks the shared budget for Retry-After and is retried", async () => {
    const t = script([new MailsendError("rate_limited", "429", { retryAfter: 2, status: 429 }), "ok"]);
    const store = memoryStore();
    const waits: number[] = [];
    const r = await deliver(t, message, { ...base, store, onWait: (w) => waits.push(w.ms) });
    expect(r.attempts).toBe(2);
    expect(store.log).toContain("block 2000");
    expect(waits).toEqual([2000]);
  });

  test("the result tells how long it waited, for the budget and before retries (0 when it did not)", async () => {
    const clock = { now: 1_000_000 };
    const realNow = Date.now;
    Date.now = () => clock.now;
    try {
      const sleep = async (ms: number) => void (clock.now += ms);
      let first = true;
      const store: SlotStore = {
        ...memoryStore(),
        tryTake: async () => (first ? ((first = false), { ok: false, waitMs: 1500 }) : { ok: true }),
      };
      const t = script([new MailsendError("connection_failed", "refused"), "ok"]);
      const r = await deliver(t, message, { ...base, store, sleep, onWait: () => {} });
      expect(r.attempts).toBe(2);
      expect(r.waitedMs).toBeGreaterThanOrEqual(1500);
      expect(r.waitedMs).toBeLessThanOrEqual(1500 + 500); // 1.5 s for the slot, plus one backoff (at most 500 ms)
      expect((await deliver(script(["ok"]), message, base)).waitedMs).toBe(0);
    } finally {
      Date.now = realNow;
    }
  });

  test("never retries a 400 or a bad key", async () => {
    for (const code of ["invalid_message", "auth_failed", "key_revoked", "too_large"] as const) {
      const t = script([new MailsendError(code, code), "ok"]);
      await expect(deliver(t, message, base)).rejects.toMatchObject({ code, attempts: 1 });
      expect(t.calls).toBe(1);
    }
  });

  test("stops after --retries and reports the attempts", async () => {
    const e = () => new MailsendError("temporary_failure", "451");
    const t = script([e(), e(), e(), e(), e()]);
    await expect(deliver(t, message, { ...base, retries: 2 })).rejects.toMatchObject({
      code: "temporary_failure",
      attempts: 3,
    });
    expect(t.calls).toBe(3);
  });

  test("outcome unknown is not retried for a raw .eml without an idempotency header", async () => {
    const raw = { ...message, raw: Buffer.from("From: a@example.com\r\nTo: b@example.com\r\n\r\nhi") } as Message;
    expect(carriesIdempotencyKey(raw)).toBe(false);
    const t = script([new MailsendError("outcome_unknown", "?", { mayHaveBeenSent: true }), "ok"]);
    await expect(deliver(t, raw, base)).rejects.toMatchObject({ code: "outcome_unknown" });
    expect(t.calls).toBe(1);
  });

  test("--no-wait fails at once when the budget is used up; --max-wait bounds the wait", async () => {
    const full: SlotStore = { ...memoryStore(), tryTake: async () => ({ ok: false, waitMs: 30_000 }) };
    await expect(deliver(script(["ok"]), message, { ...base, store: full, noWait: true })).rejects.toMatchObject({
      code: "rate_limited",
      retryAfter: 30,
    });
    await expect(deliver(script(["ok"]), message, { ...base, store: full, maxWaitMs: 10_000 })).rejects.toThrow(
      /--max-wait/,
    );
  });

  test("a 429 is a wait for a slot: --no-wait fails at once (the budget still holds back), --max-wait bounds it, --deadline does not", async () => {
    const refusal = () => new MailsendError("rate_limited", "429", { retryAfter: 20, status: 429 });
    const slept: number[] = [];
    const sleep = async (ms: number) => void slept.push(ms);
    const store = memoryStore();
    const once = script([refusal(), "ok"]);
    await expect(deliver(once, message, { ...base, store, sleep, noWait: true })).rejects.toMatchObject({
      code: "rate_limited",
      attempts: 1,
    });
    expect(once.calls).toBe(1);
    expect(slept).toEqual([]);
    expect(store.log).toContain("block 20000");
    // Waited for, past a deadline shorter than the wait: the deadline bounds attempts, not slot waits.
    const waited = script([refusal(), "ok"]);
    const r = await deliver(waited, message, { ...base, sleep, deadlineMs: 5_000 });
    expect(r.attempts).toBe(2);
    expect(slept).toEqual([20_000]);
    await expect(
      deliver(script([refusal(), "ok"]), message, { ...base, sleep, maxWaitMs: 10_000 }),
    ).rejects.toMatchObject({ code: "rate_limited", attempts: 1 });
    // Any other failure's backoff still counts against the deadline.
    const e = () => new MailsendError("temporary_failure", "451");
    await expect(deliver(script([e(), "ok"]), message, { ...base, sleep, deadlineMs: 1 })).rejects.toMatchObject({
      code: "temporary_failure",
      attempts: 1,
    });
  });
});

describe("deliver's own sleep", () => {
  test("an abort that came before the wait ends it at once, and waits leave no abort listener behind", async () => {
    let sends = 0;
    const t: Transport = {
      name: "rest",
      async send() {
        sends++;
        throw new MailsendError("connection_failed", "refused");
      },
      async preview() {},
      async close() {},
    };
    const base = { limits: { limit: 60, windowMs: 60_000 }, retries: 5, maxWaitMs: 600_000, noWait: false };
    const done = new AbortController();
    done.abort(new Error("stopped"));
    const t0 = Date.now();
    await expect(deliver(t, { idempotencyKey: "k" } as Message, { ...base, signal: done.signal })).rejects.toThrow();
    // No retry after the aborted wait (five retries were allowed), and no long sleep.
    expect(sends).toBeLessThanOrEqual(1);
    expect(Date.now() - t0).toBeLessThan(30_000);
    sends = 0;

    const live = new AbortController();
    let added = 0;
    let removed = 0;
    const add = live.signal.addEventListener.bind(live.signal);
    const remove = live.signal.removeEventListener.bind(live.signal);
    live.signal.addEventListener = ((...a: Parameters<typeof add>) => (added++, add(...a))) as typeof add;
    live.signal.removeEventListener = ((...a: Parameters<typeof remove>) => (removed++, remove(...a))) as typeof remove;
    const quick = { ...base, retries: 2 };
    // Backoff with full jitter from 500 ms: two short real sleeps.
    await expect(
      deliver(t, { idempotencyKey: "k" } as Message, { ...quick, signal: live.signal }),
    ).rejects.toMatchObject({ code: "connection_failed", attempts: 3 });
    expect(added).toBe(2);
    expect(removed).toBe(2);
  });
});
