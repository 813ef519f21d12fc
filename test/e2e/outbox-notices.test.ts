/**
 * The outbox's notices, end to end against the sandbox: a message refused for good brings its
 * sender one RFC 3464 report, delivered through the outbox itself with a null sender; the
 * notice's own failure brings none; automatic mail gets none; a message still waiting gets one
 * "still trying" warning.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { NO_FAULTS } from "../../src/sandbox/faults.js";
import { Outbox } from "../../src/outbox/store.js";
import { runCli } from "../helpers/cli.js";
import { parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let sb: TestSandbox;
// Small enough that a padded message is refused for good (REST 413, SMTP 552), large enough for a notice.
useSandbox((v) => (sb = v), { maxSize: 6000 });

afterEach(() => {
  sb.sb.faults.config = { ...NO_FAULTS };
});

let n = 0;
function fresh(extra: Record<string, string> = {}): { dir: string; env: Record<string, string> } {
  const dir = join(sb.scratch.dir, `notices-${n++}`);
  return { dir, env: { ...sb.env, MAILSEND_OUTBOX_DIR: dir, MAILSEND_QUEUE_AUTORUN: "0", ...extra } };
}

/** Each test's own sender, so that what the shared sandbox holds for one test is told from another's. */
const sender = (subject: string) => `cron-${subject}@example.com`;

async function seed(dir: string, subject: string, opts: { pad?: number; headers?: string[] } = {}): Promise<string> {
  const body = `<p>${subject}</p>${"<p>padding padding padding</p>\r\n".repeat(Math.ceil((opts.pad ?? 0) / 30))}`;
  const raw = Buffer.from(
    [
      `From: Cron <${sender(subject)}>`,
      `To: dev@example.com`,
      `Subject: ${subject}`,
      `Message-ID: <${subject.replace(/\W/g, "")}@example.com>`,
      ...(opts.headers ?? []),
      `Content-Type: text/html; charset=utf-8`,
      "",
      body,
      "",
    ].join("\r\n"),
  );
  return new Outbox(dir).add({
    raw,
    envelope: { from: sender(subject), to: ["dev@example.com"] },
    idempotencyKey: `key-${subject}-${n}`,
    source: "sendmail",
    subject,
  });
}

async function queueRun(env: Record<string, string>) {
  const r = await runCli(["queue", "run", "--json"], { env, timeoutMs: 60_000 });
  const events = r.stdout
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  return { r, events };
}

async function storedTo(address: string, subject: string) {
  return (await sb.sb.store.list()).filter((m) => m.envelope.to.includes(address) && m.subject === subject);
}

const failedIn = (dir: string) => readdirSync(join(dir, "failed")).filter((f) => f.endsWith(".msg")).length;

describe("a notice when the outbox gives a message up", () => {
  it("a message refused for good brings its sender exactly one report, sent with a null sender", async () => {
    const { dir, env } = fresh();
    const id = await seed(dir, "too-big-1", { pad: 8000 });
    const { r, events } = await queueRun(env);
    expect(events.at(-1), r.stderr).toEqual({ summary: { sent: 1, deferred: 0, failed: 1, left: 0 } });
    expect(events.find((e) => e.event === "failed")?.id).toBe(id);
    const notice = events.find((e) => e.event === "notice");
    expect(notice).toMatchObject({ id, to: [sender("too-big-1")] });
    expect(events.find((e) => e.event === "sent")?.id).toBe(notice.notice_id);

    const got = await storedTo(sender("too-big-1"), "Undelivered Mail Returned to Sender");
    expect(got).toHaveLength(1);
    expect(got[0]!.channel).toBe("smtp");
    expect(got[0]!.envelope.from).toBe("");
    const mail = await parseEml((await sb.sb.store.raw(got[0]!.id))!);
    expect(mail.text).toContain('Your message "too-big-1" could not be delivered');
    expect(mail.text).toContain("dev@example.com");
    expect(mail.attachments.map((a) => a.mimeType)).toEqual(["message/delivery-status", "text/rfc822-headers"]);
    const dsn = Buffer.from(mail.attachments[0]!.content as ArrayBuffer).toString("utf8");
    expect(dsn).toMatch(/^Action: failed$/m);
    expect(dsn).toMatch(/^Final-Recipient: rfc822; dev@example\.com$/m);
    expect(dsn).toMatch(/^Status: 5\.\d+\.\d+$/m);
    expect(Buffer.from(mail.attachments[1]!.content as ArrayBuffer).toString("utf8")).toContain("Subject: too-big-1");

    // Tried again by a person and refused again: the mark in its state keeps it to one notice.
    expect((await runCli(["queue", "retry", id], { env })).exitCode).toBe(0);
    const again = await queueRun(env);
    expect(again.events.find((e) => e.event === "failed")?.id).toBe(id);
    expect(again.events.some((e) => e.event === "notice")).toBe(false);
    expect(await storedTo(sender("too-big-1"), "Undelivered Mail Returned to Sender")).toHaveLength(1);
  });

  it("with REST alone, the notice goes as its readable text in HTML", async () => {
    const { dir, env } = fresh();
    for (const k of Object.keys(env)) if (k.startsWith("MAILSEND_SMTP_")) delete env[k];
    await seed(dir, "rest-only-6", { pad: 8000 });
    const { events } = await queueRun(env);
    expect(events.find((e) => e.event === "sent")).toMatchObject({ transport: "rest" });
    const got = await storedTo(sender("rest-only-6"), "Undelivered Mail Returned to Sender");
    expect(got).toHaveLength(1);
    const mail = await parseEml((await sb.sb.store.raw(got[0]!.id))!);
    expect(mail.html).toContain("could not be delivered");
    expect(mail.html).toContain("dev@example.com");
  });

  it("the notice's own refusal brings no notice about it", async () => {
    const { dir, env } = fresh();
    sb.sb.faults.config = { ...NO_FAULTS, failRate: 1, failStatus: 422, failSmtpCode: 554 };
    const id = await seed(dir, "refused-2");
    const { events } = await queueRun(env);
    const failed = events.filter((e) => e.event === "failed").map((e) => e.id);
    const notices = events.filter((e) => e.event === "notice");
    expect(notices).toHaveLength(1);
    expect(failed).toEqual([id, notices[0].notice_id]);
    expect(failedIn(dir)).toBe(2);
    expect(await new Outbox(dir).count()).toBe(0);
    expect(await storedTo(sender("refused-2"), "Undelivered Mail Returned to Sender")).toHaveLength(0);
  });

  it("a message that was itself automatic (Auto-Submitted: auto-generated) gets none", async () => {
    const { dir, env } = fresh();
    await seed(dir, "auto-3", { pad: 8000, headers: ["Auto-Submitted: auto-generated"] });
    const { events } = await queueRun(env);
    expect(events.filter((e) => e.event === "failed")).toHaveLength(1);
    expect(events.some((e) => e.event === "notice")).toBe(false);
    expect(await new Outbox(dir).count()).toBe(0);
  });

  it("MAILSEND_NOTICES=off: none", async () => {
    const { dir, env } = fresh({ MAILSEND_NOTICES: "off" });
    await seed(dir, "off-4", { pad: 8000 });
    const { events } = await queueRun(env);
    expect(events.filter((e) => e.event === "failed")).toHaveLength(1);
    expect(events.some((e) => e.event === "notice")).toBe(false);
  });

  it("a message still waiting after MAILSEND_QUEUE_WARN_AFTER gets one warning, Action delayed", async () => {
    const { dir, env } = fresh({ MAILSEND_QUEUE_WARN_AFTER: "1s" });
    sb.sb.faults.config = { ...NO_FAULTS, failRate: 1, failStatus: 503, failSmtpCode: 451 };
    const id = await seed(dir, "slow-5");
    await new Promise((r) => setTimeout(r, 1100));
    const first = await queueRun(env);
    expect(first.events.find((e) => e.event === "deferred")?.id).toBe(id);
    const warned = first.events.filter((e) => e.event === "notice");
    expect(warned).toHaveLength(1);
    // Deferred again: no second warning (nor one about the warning, itself waiting).
    expect((await runCli(["queue", "retry", "--all"], { env })).exitCode).toBe(0);
    const second = await queueRun(env);
    expect(second.events.filter((e) => e.event === "deferred")).toHaveLength(2);
    expect(second.events.some((e) => e.event === "notice")).toBe(false);

    sb.sb.faults.config = { ...NO_FAULTS };
    expect((await runCli(["queue", "retry", "--all"], { env })).exitCode).toBe(0);
    const third = await queueRun(env);
    expect(third.events.filter((e) => e.event === "sent")).toHaveLength(2);
    const got = await storedTo(sender("slow-5"), "Delayed Mail (still being retried)");
    expect(got).toHaveLength(1);
    const mail = await parseEml((await sb.sb.store.raw(got[0]!.id))!);
    const dsn = Buffer.from(mail.attachments[0]!.content as ArrayBuffer).toString("utf8");
    expect(dsn).toMatch(/^Action: delayed$/m);
    expect(dsn).toMatch(/^Will-Retry-Until: /m);
  });
});
