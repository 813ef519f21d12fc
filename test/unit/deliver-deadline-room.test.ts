/**
 * deliver() under a deadline: a retry starts only with room left to finish (250 ms, or twice what
 * the last attempt took). One cut at the deadline after its request went out would turn a clean
 * "nothing was sent" (69) into an outcome unknown (76).
 */
import { afterEach, expect, test, vi } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { deliver, type DeliverOptions } from "../../src/limits/deliver.js";
import { scriptedTransport, testMessage } from "../helpers/deliver.js";

const message = testMessage("key-1");

/** A transport whose every attempt takes `ms` and is answered 503. */
const unavailable = (ms: number) =>
  scriptedTransport(async () => {
    if (ms) await new Promise((r) => setTimeout(r, ms));
    throw new MailsendError("service_error", "the service answered HTTP 503", { status: 503 });
  });

const traced: string[] = [];
const options = (deadlineMs: number): DeliverOptions => ({
  limits: { limit: 0, windowMs: 60_000 },
  retries: 20,
  maxWaitMs: 60_000,
  noWait: false,
  deadlineMs,
  sleep: async () => {},
  trace: (line) => traced.push(line),
});

afterEach(() => {
  vi.restoreAllMocks();
  traced.length = 0;
});

async function exitOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    return (e as MailsendError).exitCode;
  }
  throw new Error("deliver succeeded");
}

test("a retry that would start with less than 250 ms left is not started", async () => {
  // Full jitter at 0.95: the first retry waits 475 ms; 475 + 250 > 700.
  vi.spyOn(Math, "random").mockReturnValue(0.95);
  const t = unavailable(0);
  expect(await exitOf(deliver(t.transport, message, options(700)))).toBe(69);
  expect(t.count()).toBe(1);
  expect(traced).toContain("* no retry: it could not finish before the 1 s deadline");
});

test("with room left it is started", async () => {
  vi.spyOn(Math, "random").mockReturnValue(0.95);
  const t = unavailable(0);
  // 475 + 250 < 800: one retry; the next would wait 950 ms, past the deadline.
  expect(await exitOf(deliver(t.transport, message, options(800)))).toBe(69);
  expect(t.count()).toBe(2);
});

test("the room is twice the last attempt's time when that is longer", async () => {
  // Each attempt takes 200 ms; the first retry waits 450 ms: 200 + 450 + 400 > 1000, though 200 + 450 + 250 is not.
  vi.spyOn(Math, "random").mockReturnValue(0.9);
  const t = unavailable(200);
  expect(await exitOf(deliver(t.transport, message, options(1000)))).toBe(69);
  expect(t.count()).toBe(1);
});

test("once an attempt may have handed the message over, a retry takes whatever time is left: only it can settle the outcome", async () => {
  vi.spyOn(Math, "random").mockReturnValue(0.95);
  const t = scriptedTransport((n) => {
    if (n === 0)
      throw new MailsendError("outcome_unknown", "the connection broke after the message was sent", {
        mayHaveBeenSent: true,
      });
  });
  // 475 + 250 > 700 would stop a retry of a clean failure; this one goes, and settles it.
  const r = await deliver(t.transport, message, options(700));
  expect(r.messageId).toBe("id-1");
  expect(t.count()).toBe(2);
});

test("an attempt that got no answer (timed out) does not stand for a round trip: the floor alone", async () => {
  vi.spyOn(Math, "random").mockReturnValue(0.9);
  const t = scriptedTransport(async () => {
    await new Promise((r) => setTimeout(r, 200));
    throw new MailsendError("timeout", "did not respond within 0.2 s; nothing was sent");
  });
  // 200 + 450 + 250 < 1000: retried (twice 200 ms would have stopped it); the next waits 900 ms.
  expect(await exitOf(deliver(t.transport, message, options(1000)))).toBe(75);
  expect(t.count()).toBe(2);
});
