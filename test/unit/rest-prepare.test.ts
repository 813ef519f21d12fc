/**
 * A send waiting for its rate-limit slot is made ready shortly before the slot frees (deliver()
 * calls Transport.prepare; REST opens the request's connection), so its request reaches the service
 * as the slot frees. What must hold: nothing of the message is on the wire before the send, a
 * prepared request that went bad or belongs to another message is never used, and the slot counts
 * from the moment the answer began to arrive. Real TCP servers on 127.0.0.1 watch the wire.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { SendContext, SendResult, Transport } from "../../src/core/transport.js";
import { deliver } from "../../src/limits/deliver.js";
import type { SlotStore, TakeOutcome } from "../../src/limits/store.js";
import { create } from "../../src/transports/rest.js";
import { testMessage } from "../helpers/deliver.js";
import { startRawPeer, type RawPeer } from "../helpers/raw-peer.js";
import { startRestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

const peers: RawPeer[] = [];
afterEach(async () => {
  for (const p of peers.splice(0)) await p.close();
});

async function peer(opts: Parameters<typeof startRawPeer>[0] = {}): Promise<RawPeer> {
  const p = await startRawPeer(opts);
  peers.push(p);
  return p;
}

const transportTo = (url: string) =>
  create({
    baseUrl: url,
    apiKey: "msk_prepare_test_51ab",
    timeoutMs: 5000,
    userAgent: "mailsend/test",
    insecure: false,
  });
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("RestTransport.prepare", () => {
  test("opens the request's connection and writes nothing on it until the send, which then uses it", async () => {
    const p = await peer();
    const t = transportTo(p.url);
    const m = testMessage("prepared-key-1");
    t.prepare!(m);
    await p.connected(1);
    await settle(100);
    expect(p.conns).toHaveLength(1);
    expect(p.conns[0]!.bytes.length).toBe(0);
    const r = await t.send(m);
    expect(r.messageId).toBe("id-0");
    expect(p.conns).toHaveLength(1);
    const wire = p.conns[0]!.bytes.toString("utf8");
    expect(wire).toMatch(/^POST \/send HTTP\/1\.1\r\n/);
    expect(wire).toContain("Idempotency-Key: prepared-key-1");
    expect(p.posts()).toBe(1);
    await t.close();
  });

  test("a request prepared for another message is dropped unwritten; the message sent is the one given", async () => {
    const p = await peer();
    const t = transportTo(p.url);
    t.prepare!(testMessage("prepared-other"));
    await p.connected(1);
    const r = await t.send(testMessage("sent-instead"));
    expect(r.idempotencyKey).toBe("sent-instead");
    const wire = p.conns.map((c) => c.bytes.toString("utf8")).join("\n");
    expect(wire).not.toContain("prepared-other");
    expect(wire.split("POST ").length - 1).toBe(1);
    expect(wire).toContain("Idempotency-Key: sent-instead");
    await t.close();
  });

  test("a prepared connection the service closed before the send: the send makes its own and is sent once", async () => {
    const p = await peer({ hangUp: (i) => (i === 0 ? 0 : undefined) });
    const t = transportTo(p.url);
    const m = testMessage("after-hang-up");
    t.prepare!(m);
    await p.connected(1);
    await settle(50);
    const r = await t.send(m);
    expect(r.messageId).toBe("id-1");
    expect(p.conns).toHaveLength(2);
    expect(p.conns[0]!.bytes.length).toBe(0);
    expect(p.conns[1]!.bytes.toString("utf8").split("POST ").length - 1).toBe(1);
    await t.close();
  });

  test("a prepared connection the service closes just as the send starts: sent on a new one, once", async () => {
    // The server ends the idle connection after 20 ms; its FIN arrives while this process is busy.
    const p = await peer({ hangUp: (i) => (i === 0 ? 20 : undefined) });
    const t = transportTo(p.url);
    const m = testMessage("closed-idle");
    t.prepare!(m);
    await settle(10);
    const until = Date.now() + 60;
    while (Date.now() < until) {
      // busy: the budget's last look before the slot
    }
    const r = await t.send(m);
    expect(r.messageId).toBe("id-1");
    expect(p.conns).toHaveLength(2);
    expect(p.posts()).toBe(1);
    await t.close();
  });

  test("a send whose caller stopped it before it began, on a prepared connection: nothing was sent, and it says so", async () => {
    const p = await peer();
    const t = transportTo(p.url);
    const m = testMessage("stopped-first");
    t.prepare!(m);
    await p.connected(1);
    await settle(50);
    const stop = new AbortController();
    stop.abort();
    const e = await t.send(m, { signal: stop.signal }).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toMatchObject({ code: "temporary_failure" });
    expect((e as { mayHaveBeenSent?: boolean }).mayHaveBeenSent).not.toBe(true);
    await settle(50);
    expect(p.conns.every((c) => c.bytes.length === 0)).toBe(true);
    await t.close();
  });

  test("close() drops a prepared request: its connection ends with nothing written", async () => {
    const p = await peer();
    const t = transportTo(p.url);
    t.prepare!(testMessage("never-sent"));
    await p.connected(1);
    await t.close();
    await until(() => p.conns[0]!.closedByClient || p.conns[0]!.socket.destroyed, {
      what: "the client to close the idle connection",
      timeoutMs: 1000,
      everyMs: 10,
    });
    expect(p.conns[0]!.closedByClient || p.conns[0]!.socket.destroyed).toBe(true);
    expect(p.conns[0]!.bytes.length).toBe(0);
  });

  test("https: a prepared request's TLS connection carries the send, and an untrusted one fails as without it", async () => {
    const tmp = scratch("mailsend-prepare-");
    const rec = await startRestRecorder({ tls: await tmp.tls() });
    try {
      const good = create({
        baseUrl: rec.url,
        apiKey: "msk_prepare_test_51ab",
        timeoutMs: 5000,
        userAgent: "mailsend/test",
        insecure: false,
        caFile: (await tmp.tls()).caPath,
      });
      const m = testMessage("tls-prepared");
      good.prepare!(m);
      await settle(150);
      expect(rec.connections).toBe(1);
      expect(rec.requests).toHaveLength(0);
      await good.send(m);
      expect(rec.connections).toBe(1);
      expect(rec.requests.map((r) => r.headers["idempotency-key"])).toEqual(["tls-prepared"]);
      await good.close();

      const untrusted = create({
        baseUrl: rec.url,
        apiKey: "msk_prepare_test_51ab",
        timeoutMs: 5000,
        userAgent: "mailsend/test",
        insecure: false,
      });
      const u = testMessage("tls-untrusted");
      untrusted.prepare!(u);
      await settle(150);
      await expect(untrusted.send(u)).rejects.toMatchObject({ code: "tls_untrusted" });
      expect(rec.requests).toHaveLength(1);
      await untrusted.close();
    } finally {
      await rec.close();
      tmp.remove();
    }
  });

  test("a pooled transport (a batch's keep-alive connections) prepares nothing", async () => {
    const p = await peer();
    const t = create(
      { baseUrl: p.url, apiKey: "msk_prepare_test_51ab", timeoutMs: 5000, userAgent: "mailsend/test", insecure: false },
      { pool: 4 },
    );
    t.prepare!(testMessage("pooled"));
    await settle(100);
    expect(p.conns).toHaveLength(0);
    await t.close();
  });
});

/** A store whose first `full` tryTake calls say "wait waitMs"; it records what happened, in order. */
function scriptedStore(full: number, waitMs: number, log: string[]): SlotStore & { elapsed: number[] } {
  let calls = 0;
  const elapsed: number[] = [];
  return {
    elapsed,
    async tryTake(): Promise<TakeOutcome> {
      log.push("tryTake");
      return calls++ < full ? { ok: false, waitMs } : { ok: true };
    },
    async complete(_id, _limits, elapsedMs) {
      log.push("complete");
      if (elapsedMs) elapsed.push(elapsedMs());
    },
    async release() {
      log.push("release");
    },
    async block() {},
    async used() {
      return 0;
    },
    async close() {},
  };
}

function preparingTransport(log: string[], send: (ctx: SendContext) => Promise<void> = async () => {}): Transport {
  return {
    name: "rest",
    preview: async () => {},
    close: async () => {},
    prepare: (m) => log.push(`prepare ${m.idempotencyKey}`),
    send: async (m, ctx = {}): Promise<SendResult> => {
      log.push("send");
      await send(ctx);
      return { transport: "rest", messageId: "id-1", recipients: [], idempotencyKey: m.idempotencyKey, attempts: 1 };
    },
  };
}

const limits = { limit: 1, windowMs: 60_000 };
const options = (store: SlotStore) => ({ store, limits, retries: 0, maxWaitMs: 60_000, noWait: false });

describe("deliver() and a wait for the slot", () => {
  test("a wait longer than the lead: the send is prepared during it, before the slot is taken", async () => {
    const log: string[] = [];
    await deliver(preparingTransport(log), testMessage("k-long"), options(scriptedStore(1, 400, log)));
    expect(log).toEqual(["tryTake", "prepare k-long", "tryTake", "send", "complete"]);
  });

  test("a short wait: prepared at once; no wait: not prepared at all", async () => {
    const log: string[] = [];
    await deliver(preparingTransport(log), testMessage("k-short"), options(scriptedStore(1, 20, log)));
    expect(log).toEqual(["tryTake", "prepare k-short", "tryTake", "send", "complete"]);
    const none: string[] = [];
    await deliver(preparingTransport(none), testMessage("k-none"), options(scriptedStore(0, 0, none)));
    expect(none).toEqual(["tryTake", "send", "complete"]);
  });

  test("a prepare that throws does not stop the send", async () => {
    const log: string[] = [];
    const t = preparingTransport(log);
    t.prepare = () => {
      throw new Error("boom");
    };
    const r = await deliver(t, testMessage("k-throw"), options(scriptedStore(1, 20, log)));
    expect(r.messageId).toBe("id-1");
  });

  test("the slot counts from when the answer began to arrive (SendContext.answered), not from after it was read", async () => {
    const log: string[] = [];
    const store = scriptedStore(0, 0, log);
    // The answer's head comes, then its body takes 300 ms to read.
    await deliver(
      preparingTransport(log, async (ctx) => {
        ctx.answered?.();
        await settle(300);
      }),
      testMessage("k-answer"),
      options(store),
    );
    expect(store.elapsed).toHaveLength(1);
    expect(store.elapsed[0]!).toBeGreaterThanOrEqual(250);
  });
});
