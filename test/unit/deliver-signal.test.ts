/**
 * deliver() and the caller's signal: each attempt's deadline follows it (an abort of the caller's
 * signal ends the attempts in flight, as the deadline would), through one listener on it for all
 * the attempts following it at a time, which is gone once the last of them has ended.
 */
import { getEventListeners } from "node:events";
import { expect, test } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import type { SendContext, SendResult, Transport } from "../../src/core/transport.js";
import { deliver, type DeliverOptions } from "../../src/limits/deliver.js";
import { testMessage } from "../helpers/deliver.js";

const message = testMessage;

/** A transport whose sends end only when told to, or when their signal aborts. */
function heldTransport() {
  const held: Array<{ ctx: SendContext; answer: () => void }> = [];
  const transport: Transport = {
    name: "rest",
    preview: async () => {},
    close: async () => {},
    send: (m, ctx = {}) =>
      new Promise<SendResult>((resolve, reject) => {
        const onAbort = () => reject(new MailsendError("temporary_failure", "interrupted before the message was sent"));
        if (ctx.signal?.aborted) return onAbort();
        ctx.signal?.addEventListener("abort", onAbort, { once: true });
        held.push({
          ctx,
          answer: () => {
            ctx.signal?.removeEventListener("abort", onAbort);
            resolve({
              transport: "rest",
              messageId: `id-${m.idempotencyKey}`,
              recipients: [],
              idempotencyKey: m.idempotencyKey,
              attempts: 1,
            });
          },
        });
      }),
  };
  return { transport, held };
}

const options = (signal: AbortSignal): DeliverOptions => ({
  limits: { limit: 0, windowMs: 60_000 },
  retries: 0,
  maxWaitMs: 0,
  noWait: true,
  deadlineMs: 60_000,
  signal,
});

test("attempts in flight share one listener on the caller's signal, gone when the last one ends", async () => {
  const { transport, held } = heldTransport();
  const caller = new AbortController();
  const sends = [1, 2, 3].map((i) => deliver(transport, message(`k${i}`), options(caller.signal)));
  await new Promise((r) => setImmediate(r));
  expect(held).toHaveLength(3);
  expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
  // Each attempt's own signal is its deadline, not the caller's.
  for (const h of held) expect(h.ctx.signal).not.toBe(caller.signal);
  held[0]!.answer();
  held[1]!.answer();
  await Promise.all(sends.slice(0, 2));
  expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
  held[2]!.answer();
  await sends[2];
  expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
});

test("an abort of the caller's signal ends every attempt in flight, and later ones at once", async () => {
  const { transport, held } = heldTransport();
  const caller = new AbortController();
  const sends = [1, 2].map((i) =>
    deliver(transport, message(`a${i}`), options(caller.signal)).catch((e: unknown) => e),
  );
  await new Promise((r) => setImmediate(r));
  expect(held).toHaveLength(2);
  caller.abort(new Error("stop"));
  for (const r of await Promise.all(sends)) expect(r).toBeInstanceOf(MailsendError);
  for (const h of held) expect(h.ctx.signal?.aborted).toBe(true);
  // Aborted by the caller: not reported as the deadline's timeout.
  for (const r of await Promise.all(sends)) expect((r as MailsendError).code).toBe("temporary_failure");
  const late = await deliver(transport, message("a3"), options(caller.signal)).catch((e: unknown) => e);
  expect(late).toBeInstanceOf(MailsendError);
  expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
});
