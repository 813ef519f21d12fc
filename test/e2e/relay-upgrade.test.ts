/**
 * An upgrade under a running relay: `npm i -g mailsend@next` replaces the package's files while the
 * relay (a service that runs for weeks) keeps running. The relay must go on taking and delivering
 * mail with the code it started with, not answer 451 to every message until someone restarts it.
 * The relay runs from a copy of the built package; its dist/ is moved away once it is ready.
 */
import { execa } from "execa";
import { renameSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import nodemailer from "nodemailer";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { baseEnv, copyMailsend, mailsendCommand, SINGLE_EXECUTABLE } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

vi.setConfig({ testTimeout: 120_000 });

let t: TestSandbox;
let s: Scratch;
useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-relay-upgrade-");
});
afterAll(async () => {
  s?.remove();
});

// The single executable has no dist/ to be replaced under it.
describe.skipIf(SINGLE_EXECUTABLE)("relay: the package replaced under it", () => {
  test("mail taken after dist/ is gone is still queued (250) and delivered, over REST and over SMTP", async () => {
    const pkg = join(s.dir, "pkg");
    const file = copyMailsend(pkg);
    const env = {
      ...baseEnv(),
      ...t.env,
      MAILSEND_STATE_DIR: join(s.dir, "state"),
      XDG_CACHE_HOME: join(s.dir, "cache"),
    };
    const relay = execa(...mailsendCommand(["relay", "--listen", "127.0.0.1:0", "--json", "-v"], file), {
      env,
      extendEnv: false,
      cwd: s.dir,
      stdin: "ignore",
      reject: false,
      timeout: 110_000,
    });
    const events: Record<string, any>[] = [];
    const lines = createInterface({ input: relay.stdout! });
    const ready = await new Promise<{ port: number }>((resolve, reject) => {
      lines.once("line", (l) => resolve(JSON.parse(l)));
      relay.once("exit", () => reject(new Error("the relay exited before its ready line")));
    });
    lines.on("line", (l) => events.push(JSON.parse(l)));
    try {
      // The upgrade: every file the relay did not load yet is gone (a new version's have other names).
      renameSync(join(pkg, "dist"), join(pkg, "dist-old"));
      const client = nodemailer.createTransport({
        host: "127.0.0.1",
        port: ready.port,
        secure: false,
        ignoreTLS: true,
      });
      // As an app writes it: HTML only, which the REST request carries whole, so over REST ...
      const raw = (head: string, subject: string) =>
        `From: app@example.com\r\n${head}Subject: ${subject}\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>hello</p>\r\n`;
      const rest = await client.sendMail({
        envelope: { from: "app@example.com", to: ["dev@example.com"] },
        raw: raw("To: dev@example.com\r\n", "after upgrade rest"),
      });
      // ... and a Cc it cannot carry: this one goes over SMTP.
      const smtp = await client.sendMail({
        envelope: { from: "app@example.com", to: ["dev@example.com", "cc@example.com"] },
        raw: raw("To: dev@example.com\r\nCc: cc@example.com\r\n", "after upgrade smtp"),
      });
      client.close();
      expect(rest.response).toMatch(/^250 /);
      expect(smtp.response).toMatch(/^250 /);
      await until(async () => {
        const subjects = (await t.sb.store.list({ limit: 100 })).map((m) => m.subject);
        return subjects.includes("after upgrade rest") && subjects.includes("after upgrade smtp");
      }, 60_000);
      await until(() => events.filter((e) => e.event === "sent").length >= 2, 30_000);
      const sent = events.filter((e) => e.event === "sent");
      expect(sent.map((e) => e.transport).sort()).toEqual(["rest", "smtp"]);
      expect(events.filter((e) => e.event === "refused" || e.event === "deferred" || e.event === "failed")).toEqual([]);
    } finally {
      relay.kill("SIGTERM");
      await relay;
    }
  });
});
