/**
 * The relay never says 250 for a message it did not store: with the outbox on
 * a small tmpfs that is full, or remounted read-only, a client gets 452 and
 * nothing (not even half a file) is left in the outbox; once there is room
 * again, the same client's message is taken.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { SmtpDialog } from "../helpers/smtp-dialog.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { startRelayChild } from "../helpers/relay.js";
import { runCli } from "../helpers/cli.js";

vi.setConfig({ testTimeout: 90_000 });

let s: Scratch;
let mnt: string;
let mounted = false;
let why = "";

beforeAll(() => {
  s = scratch("mailsend-relay-disk-");
  mnt = join(s.dir, "mnt");
  mkdirSync(mnt);
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", mnt], { encoding: "utf8" });
  mounted = r.status === 0;
  if (!mounted)
    why = `mount -t tmpfs failed (${(r.stderr || r.error?.message || "").trim()}): needs root in a container that allows it`;
});

afterAll(() => {
  if (mounted) spawnSync("umount", ["-l", mnt]);
  s?.remove();
});

async function sendOne(port: number, subject: string, bodyBytes: number): Promise<string> {
  const d = await SmtpDialog.connect(port);
  try {
    await d.cmd("EHLO client.test");
    expect(await d.cmd("MAIL FROM:<app@example.com>")).toMatch(/^250/);
    expect(await d.cmd("RCPT TO:<dev@example.com>")).toMatch(/^250/);
    expect(await d.cmd("DATA")).toMatch(/^354/);
    d.write(
      `From: app@example.com\r\nTo: dev@example.com\r\nSubject: ${subject}\r\nContent-Type: text/html\r\n\r\n<p>${"y".repeat(bodyBytes)}</p>\r\n.\r\n`,
    );
    return await d.reply(15_000);
  } finally {
    await d.quit();
  }
}

function files(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

describe("relay: the outbox cannot be written", () => {
  test("a full tmpfs, then a read-only one: 452 and nothing left behind; 250 once writable again", async (ctx) => {
    if (!mounted) {
      console.warn(`skipped: ${why}`);
      ctx.skip();
    }
    const outbox = join(mnt, "outbox");
    const relay = await startRelayChild({ MAILSEND_STATE_DIR: join(s.dir, "state"), MAILSEND_OUTBOX_DIR: outbox }, [
      "--no-deliver",
    ]);
    try {
      expect(relay.ready.outbox).toBe(outbox);
      // Fill the file system to the last block.
      const filler = join(mnt, "filler");
      const chunk = Buffer.alloc(4096, 1);
      const parts: Buffer[] = [];
      for (let i = 0; i < 256; i++) parts.push(chunk);
      try {
        writeFileSync(filler, Buffer.concat(parts));
      } catch (e) {
        expect((e as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const full = await sendOne(relay.ready.port, "disk full", 20_000);
      expect(full).toMatch(/^452 4\.3\.1 /);
      expect(full).toMatch(/no space left on device/);
      expect(files(join(outbox, "queue"))).toEqual([]);
      expect(files(join(outbox, "tmp"))).toEqual([]);

      rmSync(filler);
      const ok = await sendOne(relay.ready.port, "room again", 20_000);
      expect(ok).toMatch(/^250 2\.0\.0 queued as /);
      expect(files(join(outbox, "queue")).filter((n) => n.endsWith(".msg"))).toHaveLength(1);

      // Read-only (root ignores file modes, so a remount is what makes it unwritable).
      expect(spawnSync("mount", ["-o", "remount,ro", mnt]).status).toBe(0);
      try {
        const ro = await sendOne(relay.ready.port, "read only", 100);
        expect(ro).toMatch(/^452 4\.3\.1 .*read-only file system/);
        // sendmail -bs answers the same condition with the same reply, from the same place.
        const bs = await runCli(["sendmail", "-bs"], {
          env: {
            MAILSEND_STATE_DIR: join(s.dir, "state"),
            MAILSEND_OUTBOX_DIR: outbox,
            MAILSEND_QUEUE: "always",
            MAILSEND_QUEUE_AUTORUN: "0",
            MAILSEND_API_KEY: "msk_unused_key_123456",
            MAILSEND_BASE_URL: "http://127.0.0.1:9",
          },
          input:
            "EHLO app.example\r\nMAIL FROM:<app@example.com>\r\nRCPT TO:<dev@example.com>\r\nDATA\r\nFrom: app@example.com\r\nTo: dev@example.com\r\nSubject: read only bs\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n.\r\nQUIT\r\n",
        });
        const bsReply = bs.stdout.split("\r\n").find((l) => /^4\d\d /.test(l));
        expect(bsReply, bs.stdout + bs.stderr).toMatch(/^452 4\.3\.1 .*read-only file system/);
        expect(bsReply!.replace(/\(.*\)$/, "")).toBe(ro.split("\r\n")[0]!.replace(/\(.*\)$/, ""));
      } finally {
        spawnSync("mount", ["-o", "remount,rw", mnt]);
      }
      expect(files(join(outbox, "queue")).filter((n) => n.endsWith(".msg"))).toHaveLength(1);
      const again = await sendOne(relay.ready.port, "writable again", 100);
      expect(again).toMatch(/^250 2\.0\.0 queued as /);
      expect(files(join(outbox, "queue")).filter((n) => n.endsWith(".msg"))).toHaveLength(2);
    } finally {
      expect((await relay.stop()).exitCode).toBe(0);
    }
    // A fault of this machine is logged without -v (as JSON lines under --json).
    expect(relay.events.filter((e) => e.event === "refused" && e.code === 452).length).toBeGreaterThanOrEqual(2);
  });
});
