/**
 * The head of a REST request as it goes on the wire. RestTransport hands node:http its headers
 * as a raw name/value list (cheaper in a batch than an object), so node:http does not add Host
 * itself: the head must still carry every header once, Host as node:http makes it and first (as
 * RFC 9110 asks of a client), and keep the connection alive. A bare TCP peer on 127.0.0.1
 * records the bytes.
 */
import http from "node:http";
import { afterEach, describe, expect, test } from "vitest";
import { create } from "../../src/transports/rest.js";
import { testMessage } from "../helpers/deliver.js";
import { startRawPeer, type RawPeer } from "../helpers/raw-peer.js";

const peers: RawPeer[] = [];
afterEach(async () => {
  for (const p of peers.splice(0)) await p.close();
});

async function peer(): Promise<RawPeer> {
  const p = await startRawPeer();
  peers.push(p);
  return p;
}

/** The head's lines (request line first) of the request on connection `i`. */
function head(p: RawPeer, i = 0): string[] {
  const text = p.conns[i]!.bytes.toString("latin1");
  return text.slice(0, text.indexOf("\r\n\r\n")).split("\r\n");
}

/** The Host header node:http itself makes for a POST to `url` (headers as an object), sent to `p` on a connection of its own. */
async function nodesHost(p: RawPeer, url: string): Promise<string> {
  const before = p.conns.length;
  await new Promise<void>((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { "Content-Length": "0" }, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve());
    });
    req.on("error", reject);
    req.end();
  });
  const line = head(p, before).find((l) => /^host:/i.test(l));
  expect(line, "node:http sent a Host").toBeDefined();
  return line!.slice(line!.indexOf(":") + 1).trim();
}

describe("the REST request's head", () => {
  test("Host first, as node:http makes it; every header once; the connection kept alive; Content-Length in bytes", async () => {
    const p = await peer();
    const url = `${p.url.replace(/\/$/, "")}/v1`;
    const t = create({
      baseUrl: url,
      apiKey: "msk_head_test_7f3e",
      timeoutMs: 5000,
      userAgent: "mailsend/test",
      insecure: false,
    });
    await t.send({ ...testMessage("head-key-1"), subject: "Grüße 📧" });
    await t.close();
    const lines = head(p);
    expect(lines[0]).toBe("POST /v1/send HTTP/1.1");
    expect(lines[1]).toBe(`Host: ${new URL(url).host}`);
    expect(lines[1]).toBe(`Host: ${await nodesHost(p, url)}`);
    const names = lines.slice(1).map((l) => l.slice(0, l.indexOf(":")).toLowerCase());
    expect(new Set(names).size).toBe(names.length);
    expect(names.sort()).toEqual([
      "accept",
      "authorization",
      "connection",
      "content-length",
      "content-type",
      "host",
      "idempotency-key",
      "user-agent",
    ]);
    expect(lines).toContain("Connection: keep-alive");
    expect(lines).toContain("Authorization: Bearer msk_head_test_7f3e");
    expect(lines).toContain("Idempotency-Key: head-key-1");
    const wire = p.conns[0]!.bytes;
    const body = wire.subarray(wire.indexOf("\r\n\r\n") + 4);
    expect(lines).toContain(`Content-Length: ${body.length}`);
    expect(JSON.parse(body.toString("utf8")).subject).toBe("Grüße 📧");
  });

  test("localhost by name: Host names it with its port, as node:http does", async () => {
    const p = await peer();
    const url = p.url.replace("127.0.0.1", "localhost");
    const t = create({
      baseUrl: url,
      apiKey: "msk_head_test_7f3e",
      timeoutMs: 5000,
      userAgent: "mailsend/test",
      insecure: false,
    });
    await t.send(testMessage("head-key-2"));
    await t.close();
    expect(head(p)[1]).toBe(`Host: localhost:${new URL(p.url).port}`);
    expect(head(p)[1]).toBe(`Host: ${await nodesHost(p, url)}`);
  });

  test("a second request on the kept-alive connection has the same head but its own key", async () => {
    const seen: { socket: object; raw: string[] }[] = [];
    const server = http.createServer((req, res) => {
      seen.push({ socket: req.socket, raw: req.rawHeaders });
      req.resume();
      req.on("end", () => res.end(JSON.stringify({ success: true, message_id: `id-${seen.length}` })));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const t = create({
        baseUrl: url,
        apiKey: "msk_head_test_7f3e",
        timeoutMs: 5000,
        userAgent: "mailsend/test",
        insecure: false,
      });
      await t.send(testMessage("head-key-3"));
      await t.send(testMessage("head-key-4"));
      await t.close();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
    expect(seen).toHaveLength(2);
    expect(seen[1]!.socket).toBe(seen[0]!.socket);
    const names = (raw: string[]) => raw.filter((_, i) => i % 2 === 0);
    expect(names(seen[1]!.raw)).toEqual(names(seen[0]!.raw));
    expect(seen.map((s) => s.raw.slice(0, 2))).toEqual([
      ["Host", new URL(url).host],
      ["Host", new URL(url).host],
    ]);
    expect(seen.map((s) => s.raw[s.raw.findIndex((v, i) => i % 2 === 0 && v === "Idempotency-Key") + 1])).toEqual([
      "head-key-3",
      "head-key-4",
    ]);
  });
});
