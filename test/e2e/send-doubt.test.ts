/**
 * A message the service may have taken is never reported as "nothing was sent": the built CLI
 * against a real HTTP server on 127.0.0.1 that reads a request whole, then drops the connection
 * without an answer and stops listening (a service that went down mid-request, as a deploy or a
 * crash does). The retries that follow cannot reach it; the outcome stays unknown (76), with the
 * idempotency key that makes a resend safe. A script that trusted "69, Nothing was sent" would send
 * the message again under a new key, and the recipient would get it twice.
 */
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, expect, it } from "vitest";
import { runInProcess, type stderrJson } from "../helpers/cli.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_doubt_Qw7Lk2Zp";
const tmp = scratch("mailsend-doubt-");
afterAll(() => tmp.remove());

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server?.listening ? server.close(() => r()) : r()));
  server = undefined;
});

/**
 * A server that answers the first `answered` requests with success (keep-alive), then reads the
 * next one whole and goes away: that connection destroyed unanswered, the port closed.
 */
async function goesAwayAfter(answered: number): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const sockets = new Set<Socket>();
  server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      bodies.push(body);
      if (bodies.length <= answered) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ success: true, message_id: `msg-${bodies.length}` }));
        return;
      }
      server!.close();
      for (const s of sockets) s.destroy();
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

it("send: the connection drops after the request, the retries find nobody: 76 with the key, not 69 'Nothing was sent'", async () => {
  const svc = await goesAwayAfter(0);
  const r = await runInProcess(
    [
      "send",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "deploy",
      "--html",
      "<p>x</p>",
      "--idempotency-key",
      "doubt-key-1",
      "--json",
    ],
    {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: svc.url, MAILSEND_RETRIES: "2" },
    },
  );
  expect(svc.bodies).toHaveLength(1);
  expect(r.exitCode, r.stderr).toBe(76);
  const e = (JSON.parse(r.stderr.trim().split("\n").at(-1)!) as ReturnType<typeof stderrJson>).error;
  expect(e).toMatchObject({ code: "outcome_unknown", exit: 76 });
  expect(e.message).toMatch(/after the message was sent.*attempt 3 failed too: .*connection refused/);
  expect(e.hint).toContain("--idempotency-key doubt-key-1");
  expect(r.stderr).not.toMatch(/Nothing was sent/);
});

it("batch: a kept-alive connection that breaks with the request on it, and a repeat that finds nobody: the item is unknown (76), not failed", async () => {
  const svc = await goesAwayAfter(1);
  const input = tmp.file(
    "rows.jsonl",
    [
      '{"to":"b@example.com","subject":"one","html":"<p>1</p>"}',
      '{"to":"c@example.com","subject":"two","html":"<p>2</p>"}',
      "",
    ].join("\n"),
  );
  const results = join(tmp.dir, "results.jsonl");
  const r = await runInProcess(
    [
      "batch",
      input,
      "-f",
      "a@example.com",
      "--transport",
      "rest",
      "-c",
      "1",
      "--results",
      results,
      "--journal",
      join(tmp.dir, "journal"),
    ],
    {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: svc.url },
    },
  );
  expect(svc.bodies).toHaveLength(2);
  expect(r.exitCode, r.stderr).toBe(76);
  const { readFileSync } = await import("node:fs");
  const items = readFileSync(results, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { status: string; error?: { code: string; message: string } });
  expect(items.map((i) => i.status)).toEqual(["sent", "unknown"]);
  expect(items[1]!.error).toMatchObject({ code: "outcome_unknown" });
  expect(items[1]!.error!.message).toMatch(
    /kept-alive connection .* broke after the message was sent, and sending it again failed/,
  );
});
