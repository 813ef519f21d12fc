/**
 * The built CLI against an in-process sandbox, over both channels: what is
 * stored is what was sent (headers, recipients, attachments byte for byte),
 * `mailsend inbox` shows it, idempotency keys de-duplicate, and a restart
 * keeps everything.
 */
import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInProcess, stdoutJson } from "../helpers/cli.js";
import { inProcessSandbox, overRest, parseEml, post, sendRequest, type TestSandbox } from "../helpers/sandbox.js";

let t: TestSandbox;
let binary: Buffer;
let binPath: string;

beforeAll(async () => {
  t = overRest(await inProcessSandbox());
  binary = randomBytes(150_000);
  binPath = t.scratch.file("data.bin", binary);
});

afterAll(async () => {
  await t?.stop();
  t?.scratch.remove();
});

function bytes(c: ArrayBuffer | Uint8Array | string): Buffer {
  return typeof c === "string" ? Buffer.from(c) : Buffer.from(c as ArrayBuffer);
}

describe("REST through the CLI", () => {
  it("stores the message as sent: recipients, names, reply-to, custom headers, attachments byte for byte", async () => {
    const r = await runInProcess(
      [
        "send",
        "--json",
        "--from",
        "Build Bot <bot@example.com>",
        "--to",
        "Ann <ann@example.com>, bob@example.org",
        "--reply-to",
        "Team <team@example.com>",
        "--subject",
        "Build #42 ✓ passed",
        "--html",
        "<h1>Passed</h1><p>all good</p>",
        "--attach",
        `${binPath}#report.bin`,
        "--header",
        "X-Campaign: nightly",
        "--idempotency-key",
        "rest-stored-1",
      ],
      { env: t.env },
    );
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const out = stdoutJson(r);
    expect(out.ok).toBe(true);
    const m = await t.sb.store.get(out.message_id);
    expect(m).toBeDefined();
    expect(m!.channel).toBe("rest");
    expect(m!.envelope).toEqual({ from: "bot@example.com", to: ["ann@example.com", "bob@example.org"] });
    expect(m!.idempotencyKey).toBe("rest-stored-1");
    expect(m!.attachments).toEqual([
      { filename: "report.bin", contentType: "application/octet-stream", size: binary.length },
    ]);

    const email = await parseEml((await t.sb.store.raw(m!.id))!);
    expect(email.from).toEqual({ name: "Build Bot", address: "bot@example.com" });
    expect(email.to).toEqual([
      { name: "Ann", address: "ann@example.com" },
      { name: "", address: "bob@example.org" },
    ]);
    expect(email.replyTo).toEqual([{ name: "Team", address: "team@example.com" }]);
    expect(email.subject).toBe("Build #42 ✓ passed");
    expect(email.html).toContain("<h1>Passed</h1><p>all good</p>");
    expect(email.headers.find((h) => h.key === "x-campaign")?.value).toBe("nightly");
    expect(email.attachments).toHaveLength(1);
    expect(email.attachments[0]!.filename).toBe("report.bin");
    expect(bytes(email.attachments[0]!.content).equals(binary)).toBe(true);
  });

  it("answers message_id per the spec and the same first answer for a repeated Idempotency-Key", async () => {
    const before = t.sb.store.count;
    const args = [
      "send",
      "--json",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "once",
      "--text",
      "only once",
      "--idempotency-key",
      "rest-idem-7",
    ];
    const r1 = await runInProcess(args, { env: t.env });
    const r2 = await runInProcess(args, { env: t.env });
    expect([r1.exitCode, r2.exitCode]).toEqual([0, 0]);
    expect(stdoutJson(r2).message_id).toBe(stdoutJson(r1).message_id);
    expect(t.sb.store.count).toBe(before + 1);
  });

  it("refuses the same Idempotency-Key with a different body (422), stores nothing", async () => {
    const before = t.sb.store.count;
    const h = { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json", "Idempotency-Key": "k-body" };
    const a = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest({ subject: "one" })), h);
    const b = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest({ subject: "two" })), h);
    expect(a.status).toBe(200);
    expect(b.status).toBe(422);
    expect(b.json.error.code).toBe("idempotency_key_reused");
    expect(t.sb.store.count).toBe(before + 1);
  });

  it("concurrent requests with one Idempotency-Key store one message", async () => {
    const before = t.sb.store.count;
    const h = { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json", "Idempotency-Key": "k-race" };
    const body = JSON.stringify(sendRequest({ subject: "race" }));
    const answers = await Promise.all(Array.from({ length: 5 }, () => post(t.sb.urls.baseUrl, body, h)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(answers.map((a) => a.json.message_id)).size).toBe(1);
    expect(t.sb.store.count).toBe(before + 1);
  });
});

describe("SMTP through the CLI", () => {
  for (const mode of ["starttls", "implicit"] as const) {
    it(`stores what was submitted (${mode}): envelope with bcc, headers without it, attachment bytes`, async () => {
      const env = mode === "starttls" ? t.env : t.envImplicit;
      const r = await runInProcess(
        [
          "send",
          "--json",
          "--transport",
          "smtp",
          "--from",
          "Ops <ops@example.com>",
          "--to",
          "dev@example.com",
          "--cc",
          "Lead <lead@example.com>",
          "--bcc",
          "audit@example.com",
          "--subject",
          `over ${mode}`,
          "--text",
          "plain body",
          "--html",
          "<p>html body</p>",
          "--attach",
          `${binPath}#blob.bin`,
          "--header",
          "X-Ticket: T-1",
          "--idempotency-key",
          `smtp-${mode}-1`,
        ],
        { env },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      const list = await t.sb.store.list({ limit: 1 });
      const m = list[0]!;
      expect(m.channel).toBe("smtp");
      expect(m.subject).toBe(`over ${mode}`);
      expect(m.envelope).toEqual({
        from: "ops@example.com",
        to: ["dev@example.com", "lead@example.com", "audit@example.com"],
      });
      expect(m.idempotencyKey).toBe(`smtp-${mode}-1`);
      expect(m.messageId).toBe(stdoutJson(r).message_id);
      const raw = (await t.sb.store.raw(m.id))!;
      expect(raw.toString("latin1")).not.toMatch(/^bcc:/im);
      const email = await parseEml(raw);
      expect(email.from).toEqual({ name: "Ops", address: "ops@example.com" });
      expect(email.cc).toEqual([{ name: "Lead", address: "lead@example.com" }]);
      expect(email.text?.trim()).toBe("plain body");
      expect(email.html).toContain("<p>html body</p>");
      expect(email.headers.find((h) => h.key === "x-ticket")?.value).toBe("T-1");
      expect(bytes(email.attachments[0]!.content).equals(binary)).toBe(true);
      expect(m.attachments).toEqual([
        { filename: "blob.bin", contentType: "application/octet-stream", size: binary.length },
      ]);
    });
  }

  it("X-Idempotency-Key de-duplicates over SMTP, across the two ports", async () => {
    const before = t.sb.store.count;
    const args = [
      "send",
      "--transport",
      "smtp",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "smtp once",
      "--text",
      "x",
      "--idempotency-key",
      "smtp-dup",
    ];
    expect((await runInProcess(args, { env: t.env })).exitCode).toBe(0);
    expect((await runInProcess(args, { env: t.envImplicit })).exitCode).toBe(0);
    expect(t.sb.store.count).toBe(before + 1);
    expect(t.sb.stats.smtp.duplicates).toBeGreaterThanOrEqual(1);
  });
});

describe("mailsend inbox", () => {
  it("lists stored messages as JSON, newest first, and shows one raw byte for byte", async () => {
    const r = await runInProcess(["inbox", "--dir", t.dir, "--json"]);
    expect(r.exitCode).toBe(0);
    const list = stdoutJson(r) as Array<{ id: string; receivedAt: string }>;
    expect(list.length).toBe(t.sb.store.count);
    const ids = list.map((m) => m.id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const raw = await runInProcess(["inbox", "show", ids[0]!, "--raw", "--dir", t.dir]);
    expect(raw.exitCode).toBe(0);
    expect(raw.stdout).toBe((await t.sb.store.raw(ids[0]!))!.toString("utf8"));
  });

  it("prints a table, and a readable view of one message", async () => {
    const r = await runInProcess(["inbox", "--dir", t.dir]);
    expect(r.stdout).toMatch(/^ID\s+RECEIVED\s+VIA\s+FROM\s+TO\s+SIZE\s+ATT\s+SUBJECT/);
    expect(r.stdout).toContain("Build #42");
    const id = (await t.sb.store.list()).find((m) => m.subject === "over starttls")!.id;
    const show = await runInProcess(["inbox", "show", id, "--dir", t.dir]);
    expect(show.exitCode).toBe(0);
    expect(show.stdout).toContain("Subject:");
    expect(show.stdout).toContain("plain body");
    expect(show.stdout).toContain("blob.bin");
  });

  it("an unknown id is missing input (66), not a usage error", async () => {
    const r = await runInProcess(["inbox", "show", "nope", "--dir", t.dir]);
    expect(r.exitCode).toBe(66);
    expect(r.stderr).toContain("nope");
  });
});

describe("restart", () => {
  it("keeps messages, keys and idempotency answers", async () => {
    const before = await t.sb.store.list();
    const firstRaw = (await t.sb.store.raw(before[0]!.id))!;
    await t.stop();
    const again = overRest(await inProcessSandbox({ dir: t.dir }, t.scratch));
    t = again;
    expect(t.sb.createdKey).toBeUndefined();
    expect(await t.sb.store.list()).toEqual(before);
    expect((await t.sb.store.raw(before[0]!.id))!.equals(firstRaw)).toBe(true);
    const args = [
      "send",
      "--json",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "once",
      "--text",
      "only once",
      "--idempotency-key",
      "rest-idem-7",
    ];
    const r = await runInProcess(args, { env: t.env });
    expect(r.exitCode).toBe(0);
    expect(t.sb.store.count).toBe(before.length);
    expect(before.some((m) => m.id === stdoutJson(r).message_id)).toBe(true);
    expect(readFileSync(t.sb.paths.apiKeyFile, "utf8").trim()).toBe(t.key);
  });

  it("after a crash: a torn last index line is cut, an .eml without its index line is removed, the rest is intact", async () => {
    const before = await t.sb.store.list();
    await t.stop();
    // What a crash between writing a message file and committing its index line leaves.
    const orphan = join(t.sb.paths.messages, "0zzzzzzzz00000zzzz.eml");
    writeFileSync(orphan, "Subject: never acknowledged\r\n\r\nx\r\n");
    appendFileSync(t.sb.paths.index, '{"id":"0zzzzzzzz00001zzzz","receivedAt":"2026-');
    const indexBefore = readFileSync(t.sb.paths.index, "utf8");
    t = overRest(await inProcessSandbox({ dir: t.dir }, t.scratch));
    expect(existsSync(orphan)).toBe(false);
    expect(await t.sb.store.list()).toEqual(before);
    const indexAfter = readFileSync(t.sb.paths.index, "utf8");
    expect(indexAfter.endsWith("\n")).toBe(true);
    expect(indexBefore.startsWith(indexAfter)).toBe(true);
    const r = await runInProcess(
      ["send", "--json", "-f", "a@example.com", "-t", "b@example.com", "-s", "after crash", "--text", "x"],
      { env: t.env },
    );
    expect(r.exitCode).toBe(0);
    expect(t.sb.store.count).toBe(before.length + 1);
  });
});

describe("composing", () => {
  it("the direct MailComposer path gives the same bytes as MailComposer's build()", async () => {
    const { default: MailComposer } = await import("nodemailer/lib/mail-composer");
    const { buildInline } = await import("../../src/sandbox/compose.js");
    const cases = [
      { html: "<p>plain</p>" },
      { html: "<p>ends with CR</p>\r" },
      { html: "<p>ends with LF</p>\n" },
      { html: "Ünïcödé ✓ and a very long line ".repeat(40) },
    ];
    for (const c of cases) {
      const options = {
        from: { name: "A", address: "a@example.com" },
        to: [{ name: "", address: "b@example.com" }],
        subject: "Grüße",
        headers: [{ key: "X-Test", value: "1" }],
        attachments: [],
        messageId: "<fixed@example.com>",
        date: "2026-01-02T03:04:05.000Z",
        ...c,
      };
      const viaBuild = await new MailComposer({ ...options, date: new Date(options.date) }).compile().build();
      expect((await buildInline(options)).equals(viaBuild), JSON.stringify(c).slice(0, 40)).toBe(true);
    }
  });
});

describe("the web inbox is served on the same port", () => {
  it("GET / answers HTML; unknown paths 404", async () => {
    const home = await fetch(`${t.sb.urls.baseUrl}/`);
    expect(home.status).toBe(200);
    expect(home.headers.get("content-type")).toMatch(/text\/html/);
    await home.text();
    const none = await fetch(`${t.sb.urls.baseUrl}/no/such/page`);
    expect(none.status).toBe(404);
    await none.text();
  });
});
