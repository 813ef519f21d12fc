/**
 * search() and waitFor() over a store: a wait counts what is stored already, reacts to what the
 * store writes next, reads a message's parts only when a term needs them, and leaves no listener
 * behind however it ends (found, timed out, stopped).
 */
import { describe, expect, it } from "vitest";
import { parseQuery } from "../../src/sandbox/query.js";
import { createSearcher, search, waitFor, WaitTimeoutError } from "../../src/sandbox/search.js";
import { composeEml, MemoryStore } from "../helpers/memory-store.js";

async function storeWith(...mails: Array<{ to: string; subject: string; text?: string }>): Promise<MemoryStore> {
  const store = new MemoryStore();
  for (const m of mails) await store.add(await composeEml({ from: "app@example.com", text: "hello", ...m }));
  return store;
}

describe("search", () => {
  it("newest first, words in the body, a limit", async () => {
    const store = await storeWith(
      { to: "a@example.com", subject: "one", text: "code 1" },
      { to: "a@example.com", subject: "two", text: "code 2" },
      { to: "b@example.com", subject: "three" },
    );
    const s = createSearcher(store);
    expect((await search(s, parseQuery("to:a@example.com"))).map((m) => m.subject)).toEqual(["two", "one"]);
    expect((await search(s, parseQuery('"code 1"'))).map((m) => m.subject)).toEqual(["one"]);
    expect((await search(s, parseQuery("to:a@"), { limit: 1 })).map((m) => m.subject)).toEqual(["two"]);
  });
});

describe("waitFor", () => {
  it("resolves at once with what is stored, and unsubscribes", async () => {
    const store = await storeWith({ to: "a@example.com", subject: "here" });
    const found = await waitFor(createSearcher(store), parseQuery("subject:here"), { timeoutMs: 5000 });
    expect(found.map((m) => m.subject)).toEqual(["here"]);
    expect(store.subscriberCount).toBe(0);
  });

  it("resolves when the store writes the message, counting to count", async () => {
    const store = await storeWith();
    const waiting = waitFor(createSearcher(store), parseQuery('to:c@example.com "the code"'), {
      count: 2,
      timeoutMs: 10_000,
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(store.subscriberCount).toBe(1);
    await store.add(
      await composeEml({ from: "x@example.com", to: "c@example.com", subject: "1", text: "the code is 1" }),
    );
    await store.add(await composeEml({ from: "x@example.com", to: "c@example.com", subject: "no", text: "nothing" }));
    await store.add(
      await composeEml({ from: "x@example.com", to: "c@example.com", subject: "2", text: "the code is 2" }),
    );
    expect((await waiting).map((m) => m.subject)).toEqual(["2", "1"]);
    expect(store.subscriberCount).toBe(0);
  });

  it("rejects at its timeout with what matched and the closest, and unsubscribes", async () => {
    const store = await storeWith(
      { to: "d@example.com", subject: "Welcome" },
      { to: "e@example.com", subject: "Receipt" },
      { to: "f@example.com", subject: "Other" },
    );
    const e = await waitFor(createSearcher(store), parseQuery("to:d@example.com subject:receipt"), {
      timeoutMs: 50,
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WaitTimeoutError);
    const w = e as WaitTimeoutError;
    expect(w.code).toBe("timeout");
    expect(w.closest.map((m) => m.subject).sort()).toEqual(["Receipt", "Welcome"]);
    expect(w.message).toContain('waited 50ms for a message matching "to:d@example.com subject:receipt"; none arrived');
    expect(store.subscriberCount).toBe(0);
    const words = (await waitFor(createSearcher(store), parseQuery('"no such words"'), { timeoutMs: 20 }).catch(
      (x: unknown) => x,
    )) as WaitTimeoutError;
    expect(words.message).toContain("the newest it holds:");
    expect(words.closest).toHaveLength(3);
  });

  it("stops when its signal aborts, and unsubscribes", async () => {
    const store = await storeWith();
    const stop = new AbortController();
    const waiting = waitFor(createSearcher(store), parseQuery("to:nobody"), { timeoutMs: 10_000, signal: stop.signal });
    stop.abort(new Error("client gone"));
    await expect(waiting).rejects.toThrow("client gone");
    expect(store.subscriberCount).toBe(0);
  });
});
