/**
 * The built binary, two sends sharing a budget of 1 per 2 s: the second waits for its slot, opens
 * its connection before the slot frees (Transport.prepare through `mailsend send`), and writes its
 * request only once the slot is free, counted from the first answer. A TCP server on 127.0.0.1
 * notes when each connection came, when its first byte came and when it answered.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { startRawPeer, type PeerConnection, type RawPeer } from "../helpers/raw-peer.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_prepare_Qm4Tz1";
const WINDOW_MS = 2000;
const tmp = scratch();
let peer: RawPeer;

beforeAll(async () => {
  peer = await startRawPeer();
});
afterAll(async () => {
  await peer.close();
  tmp.remove();
});

it("a send waiting for its slot connects before the slot frees and writes its request only after", async () => {
  const env = {
    MAILSEND_API_KEY: KEY,
    MAILSEND_BASE_URL: peer.url,
    MAILSEND_STATE_DIR: tmp.dir,
    MAILSEND_RATE_LIMIT: "1",
    MAILSEND_RATE_WINDOW: String(WINDOW_MS / 1000),
  };
  const send = (subject: string) =>
    runCli(["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", subject, "--html", "<p>x</p>", "--json"], {
      env,
      timeoutMs: 20_000,
    });
  const first = await send("first");
  expect(first.exitCode, first.stderr).toBe(0);
  const second = await send("second");
  expect(second.exitCode, second.stderr).toBe(0);
  expect(JSON.parse(second.stdout).waited_ms).toBeGreaterThan(0);

  const used = peer.conns.filter((c) => c.firstByteAt !== undefined);
  expect(used).toHaveLength(2);
  const [a, b] = used as [Required<PeerConnection>, Required<PeerConnection>];
  expect(b.bytes.toString("utf8")).toContain('"subject":"second"');
  // Never early: the slot counts from the first answer (which the server wrote before the client read it).
  expect(b.firstByteAt).toBeGreaterThanOrEqual(a.answeredAt + WINDOW_MS);
  // Its connection was open before the slot freed (prepared ahead of it), not made after it.
  expect(b.connectedAt).toBeLessThan(a.answeredAt + WINDOW_MS);
  // Every connection carried at most one request, and none was opened that wrote anything else.
  expect(peer.conns.every((c) => c.bytes.toString("utf8").split("POST /send").length - 1 <= 1)).toBe(true);
  expect(peer.posts()).toBe(2);
});
