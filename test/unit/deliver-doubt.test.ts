/**
 * deliver() once an attempt may have handed the message over: retries that then cannot reach the
 * service, are told to wait or run out of time never turn that into "nothing was sent" (which a
 * script would answer by sending again, with a new key); a refusal of the message itself stands.
 */
import { expect, test } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { deliver, type DeliverOptions } from "../../src/limits/deliver.js";
import { scriptedTransport, testMessage } from "../helpers/deliver.js";

const message = testMessage("key-123");

const unknown = () =>
  new MailsendError(
    "outcome_unknown",
    "the connection to http://127.0.0.1:1 broke after the message was sent (socket hang up)",
    {
      mayHaveBeenSent: true,
      hint: "The message may have been sent. Check before sending again (resending with --idempotency-key key-123 is safe).",
    },
  );
const refused = () =>
  new MailsendError("connection_failed", "cannot reach http://127.0.0.1:1: connection refused", {
    hint: "Nothing was sent.",
  });

/** A transport that fails each attempt with the next of `failures` (then succeeds), counting them. */
const scripted = (failures: Array<() => MailsendError>) =>
  scriptedTransport((n) => {
    const f = failures[n];
    if (f) throw f();
  });

const options = (retries: number): DeliverOptions => ({
  limits: { limit: 0, windowMs: 60_000 },
  retries,
  maxWaitMs: 60_000,
  noWait: false,
  deadlineMs: 0,
  sleep: async () => {},
});

async function failure(p: Promise<unknown>): Promise<MailsendError> {
  try {
    await p;
  } catch (e) {
    return e as MailsendError;
  }
  throw new Error("deliver succeeded");
}

test("an attempt in doubt, then retries that cannot reach the service: outcome unknown (76), with the key, not 'nothing was sent' (69)", async () => {
  const t = scripted([unknown, refused, refused]);
  const err = await failure(deliver(t.transport, message, options(2)));
  expect(t.count()).toBe(3);
  expect(err.code).toBe("outcome_unknown");
  expect(err.exitCode).toBe(76);
  expect(err.attempts).toBe(3);
  expect(err.mayHaveBeenSent).toBe(true);
  expect(err.message).toMatch(/broke after the message was sent .*; attempt 3 failed too: cannot reach/);
  expect(err.hint).toContain("--idempotency-key key-123");
  expect(err.hint).not.toMatch(/Nothing was sent/);
});

test("told to wait (503, 429) or out of time after an attempt in doubt: still unknown", async () => {
  for (const last of [
    () => new MailsendError("service_error", "the service answered HTTP 503", { status: 503 }),
    () => new MailsendError("rate_limited", "the service answered HTTP 429", { status: 429, retryAfter: 1 }),
    () => new MailsendError("timeout", "did not respond within 30 s; nothing was sent"),
  ]) {
    const err = await failure(deliver(scripted([unknown, last]).transport, message, options(1)));
    expect(err.code).toBe("outcome_unknown");
  }
});

test("a refusal of the message itself after an attempt in doubt stands (the key would have replayed a message the service took)", async () => {
  const invalid = () =>
    new MailsendError("invalid_message", "the service refused the message (HTTP 422)", { status: 422 });
  const err = await failure(deliver(scripted([unknown, invalid]).transport, message, options(2)));
  expect(err.code).toBe("invalid_message");
  expect(err.exitCode).toBe(65);
});

test("no attempt in doubt: the last failure as it was; a later success is a success", async () => {
  const err = await failure(deliver(scripted([refused, refused]).transport, message, options(1)));
  expect(err.code).toBe("connection_failed");
  expect(err.attempts).toBe(2);
  const ok = await deliver(scripted([unknown, refused]).transport, message, options(2));
  expect(ok).toMatchObject({ messageId: "id-1", attempts: 3 });
});

test("a caller's own stop (the outbox runner's WaitCut, not a MailsendError) goes through as it is, doubt or not", async () => {
  class WaitCut extends Error {}
  const cut = new WaitCut("stopped");
  const stopping = { ...options(3), sleep: async () => Promise.reject(cut) };
  for (const first of [unknown, refused]) {
    const e = await failure(deliver(scripted([first, refused]).transport, message, stopping));
    expect(e).toBe(cut);
  }
});

test("a 403/404 after an attempt in doubt (a proxy or load balancer in an outage) is still unknown", async () => {
  for (const last of [
    () => new MailsendError("key_revoked", "the API key is not allowed to send (HTTP 403)", { status: 403 }),
    () => new MailsendError("config_invalid", "there is no send endpoint (HTTP 404)", { status: 404 }),
  ]) {
    const err = await failure(deliver(scripted([unknown, last]).transport, message, options(2)));
    expect(err.code).toBe("outcome_unknown");
    expect(err.exitCode).toBe(76);
  }
});

test("a 429 whose cause is the doubt (a repeat after a broken connection) keeps its wait, and the doubt is reported at the end", async () => {
  const waits: number[] = [];
  const limited = () =>
    new MailsendError("rate_limited", "rate limit exceeded (HTTP 429)", {
      status: 429,
      retryAfter: 7,
      cause: unknown(),
    });
  const err = await failure(
    deliver(scripted([limited, limited]).transport, message, { ...options(1), onWait: (w) => waits.push(w.ms) }),
  );
  // The service's Retry-After was honoured (a rate-limit wait, not a short retry backoff).
  expect(waits).toEqual([7000]);
  expect(err.code).toBe("outcome_unknown");
  expect(err.message).toMatch(/broke after the message was sent.*attempt 2 failed too: rate limit exceeded/);
  // --no-wait still refuses to wait for it.
  const quick = await failure(deliver(scripted([limited]).transport, message, { ...options(1), noWait: true }));
  expect(quick.code).toBe("outcome_unknown");
  expect(quick.attempts).toBe(1);
});
