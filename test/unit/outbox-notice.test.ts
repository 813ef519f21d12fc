/**
 * The outbox's notice as RFC 3464 writes one, read back with a MIME parser; and which messages
 * get none.
 */
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { isAutomatic, planNotice } from "../../src/outbox/notices.js";
import type { QueuedMessage } from "../../src/outbox/types.js";
import { noticeSettings } from "../../src/settings/notices.js";

const original = Buffer.from(
  [
    "From: App <app@example.com>",
    "To: user@example.net",
    "Subject: Your invoice é",
    "Message-ID: <orig.1@example.com>",
    "",
    "Hello",
    "",
  ].join("\n"),
  "utf8",
);

function queued(over: Partial<QueuedMessage["meta"]> = {}, raw = original): QueuedMessage {
  return {
    meta: {
      v: 1,
      id: "0000000000aabcdef01",
      createdAt: Date.parse("2026-01-02T03:04:05Z"),
      envelope: { from: "app@example.com", to: ["user@example.net"] },
      idempotencyKey: "k-1",
      source: "sendmail",
      size: raw.length,
      subject: "Your invoice é",
      headerFrom: "App <app@example.com>",
      ...over,
    },
    raw,
    state: { attempts: 2, nextAttemptAt: 0 },
  };
}

const env = { MAILSEND_CONFIG: "/nonexistent/mailsend-config.json", HOME: "/nonexistent" };
const refused = new MailsendError(
  "too_large",
  "the SMTP server refused the message as too large: 552 5.3.4 Message too big: the limit is 2000 bytes",
);

describe("the notice of a message given up", () => {
  it("is a multipart/report: the readable text first, then delivery-status, then the original's header", async () => {
    const n = planNotice("failed", queued(), refused, {
      env,
      maxAgeMs: 5 * 86400_000,
      attempts: 3,
      now: Date.parse("2026-01-02T04:00:00Z"),
    })!;
    expect(n.envelope).toEqual({ from: "", to: ["app@example.com"] });
    const head = n.raw.toString("latin1").split("\r\n\r\n")[0]!;
    expect(head).toMatch(/^Content-Type: multipart\/report; report-type=delivery-status; boundary=/m);
    expect(head).toMatch(/^Auto-Submitted: auto-replied$/m);
    expect(head).toMatch(/^In-Reply-To: <orig\.1@example\.com>$/m);
    const mail = await PostalMime.parse(n.raw, { attachmentEncoding: "utf8" });
    expect(mail.from?.address).toBe("app@example.com");
    expect(mail.from?.name).toBe("Mail Delivery System");
    expect(mail.subject).toBe("Undelivered Mail Returned to Sender");
    expect(mail.text).toContain('Your message "Your invoice é" could not be delivered');
    expect(mail.text).toContain("user@example.net");
    expect(mail.text).toContain("552 5.3.4 Message too big");
    expect(mail.text).toContain(new Date(Date.parse("2026-01-02T03:04:05Z")).getFullYear().toString());
    const types = mail.attachments.map((a) => a.mimeType);
    expect(types).toEqual(["message/delivery-status", "text/rfc822-headers"]);
    const dsn = String(mail.attachments[0]!.content);
    expect(dsn).toMatch(/^Reporting-MTA: dns; \S+/m);
    expect(dsn).toMatch(/^Final-Recipient: rfc822; user@example\.net$/m);
    expect(dsn).toMatch(/^Action: failed$/m);
    expect(dsn).toMatch(/^Status: 5\.3\.4$/m);
    expect(dsn).toMatch(/^Diagnostic-Code: smtp; 552 5\.3\.4 Message too big/m);
    const headers = String(mail.attachments[1]!.content);
    expect(headers).toContain("Subject: Your invoice é");
    expect(headers).not.toContain("Hello");
  });

  it("a message too old: Status 4.4.7; a delay warning: Action delayed, until when", async () => {
    const old = planNotice(
      "failed",
      queued(),
      new MailsendError("temporary_failure", "connection refused (given up after 120 h in the outbox)"),
      { env, maxAgeMs: 5 * 86400_000, attempts: 9, tooOld: true },
    )!;
    expect(old.raw.toString("latin1")).toMatch(/^Status: 4\.4\.7$/m);
    const delayed = planNotice(
      "delayed",
      queued(),
      new MailsendError("temporary_failure", "the SMTP server deferred the message: 451 4.3.0 try later"),
      { env, maxAgeMs: 5 * 86400_000, attempts: 4 },
    )!;
    const mail = await PostalMime.parse(delayed.raw, { attachmentEncoding: "utf8" });
    expect(mail.subject).toBe("Delayed Mail (still being retried)");
    expect(mail.text).toContain("you need not send it again");
    const dsn = String(mail.attachments[0]!.content);
    expect(dsn).toMatch(/^Action: delayed$/m);
    expect(dsn).toMatch(/^Status: 4\.3\.0$/m);
    expect(dsn).toMatch(/^Will-Retry-Until: /m);
  });

  it("the postmaster as well, or instead; off: none", () => {
    const err = refused;
    const ctx = { maxAgeMs: 1, attempts: 1 };
    expect(
      planNotice("failed", queued(), err, { ...ctx, env: { ...env, MAILSEND_POSTMASTER: "pm@example.org" } })!.envelope
        .to,
    ).toEqual(["app@example.com", "pm@example.org"]);
    expect(
      planNotice("failed", queued(), err, {
        ...ctx,
        env: { ...env, MAILSEND_POSTMASTER: "pm@example.org", MAILSEND_NOTICES: "postmaster" },
      })!.envelope.to,
    ).toEqual(["pm@example.org"]);
    expect(planNotice("failed", queued(), err, { ...ctx, env: { ...env, MAILSEND_NOTICES: "off" } })).toBeUndefined();
    expect(() => planNotice("failed", queued(), err, { ...ctx, env: { ...env, MAILSEND_NOTICES: "maybe" } })).toThrow(
      /MAILSEND_NOTICES must be on, off or postmaster/,
    );
  });

  it("a delay warning only after MAILSEND_QUEUE_WARN_AFTER, never with 0, and once", () => {
    const err = new MailsendError("temporary_failure", "deferred");
    const q = queued({ createdAt: Date.now() - 3600_000 });
    expect(planNotice("delayed", q, err, { env, maxAgeMs: 86400_000, attempts: 2 })).toBeUndefined();
    expect(
      planNotice("delayed", q, err, {
        env: { ...env, MAILSEND_QUEUE_WARN_AFTER: "30m" },
        maxAgeMs: 86400_000,
        attempts: 2,
      }),
    ).toBeDefined();
    expect(
      planNotice("delayed", q, err, {
        env: { ...env, MAILSEND_QUEUE_WARN_AFTER: "0" },
        maxAgeMs: 86400_000,
        attempts: 2,
      }),
    ).toBeUndefined();
    const warned = { ...q, state: { ...q.state, notices: { delayed: Date.now() } } };
    expect(
      planNotice("delayed", warned, err, {
        env: { ...env, MAILSEND_QUEUE_WARN_AFTER: "30m" },
        maxAgeMs: 86400_000,
        attempts: 2,
      }),
    ).toBeUndefined();
  });
});

describe("no notice about automatic mail", () => {
  const raw = (headers: string[]) => Buffer.from([...headers, "From: a@example.com", "", "body"].join("\r\n"));
  it.each([
    ["Auto-Submitted: auto-generated", true],
    ["Auto-Submitted: auto-replied", true],
    ["Auto-Submitted: no", false],
    ["Precedence: bulk", true],
    ["Precedence: list", true],
    ["Precedence: junk", true],
    ["X-Other: 1", false],
  ])("%s: automatic %s", (h, automatic) => {
    expect(isAutomatic(queued().meta, raw([h]))).toBe(automatic);
  });
  it("a null sender, or a notice itself", () => {
    expect(isAutomatic(queued({ envelope: { from: "", to: ["x@example.com"] } }).meta, original)).toBe(true);
    expect(isAutomatic(queued({ source: "notice" }).meta, original)).toBe(true);
    expect(
      planNotice("failed", queued({ source: "notice" }), refused, { env, maxAgeMs: 1, attempts: 1 }),
    ).toBeUndefined();
  });
});

describe("the notice settings", () => {
  it("read MAILSEND_NOTICES, MAILSEND_QUEUE_WARN_AFTER and MAILSEND_POSTMASTER; a bad value names its variable", () => {
    expect(noticeSettings({})).toEqual({ mode: "on", warnAfterMs: 4 * 3600_000 });
    expect(
      noticeSettings({
        MAILSEND_QUEUE_WARN_AFTER: "90m",
        MAILSEND_POSTMASTER: "Ops <ops@example.com>",
        MAILSEND_NOTICES: "postmaster",
      }),
    ).toMatchObject({
      mode: "postmaster",
      warnAfterMs: 90 * 60_000,
      postmaster: { name: "Ops", address: "ops@example.com" },
    });
    expect(noticeSettings({ MAILSEND_QUEUE_WARN_AFTER: "0" }).warnAfterMs).toBe(0);
    const bad = (env: Record<string, string>) => {
      try {
        noticeSettings(env);
      } catch (e) {
        return e as MailsendError;
      }
      throw new Error("expected a failure");
    };
    expect(bad({ MAILSEND_QUEUE_WARN_AFTER: "soon" })).toMatchObject({
      code: "config_invalid",
      setting: "queueWarnAfter",
      message: expect.stringContaining("MAILSEND_QUEUE_WARN_AFTER"),
    });
    expect(bad({ MAILSEND_POSTMASTER: "not an address" })).toMatchObject({
      setting: "postmaster",
      message: expect.stringContaining("MAILSEND_POSTMASTER"),
    });
    expect(bad({ MAILSEND_NOTICES: "postmaster" })).toMatchObject({ setting: "notices" });
  });
});
