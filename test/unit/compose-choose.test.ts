import { describe, expect, it } from "vitest";
import type { Message } from "../../src/core/message.js";
import { messageFromEml } from "../../src/sendmail/eml.js";
import { chooseTransport, restLoss } from "../../src/transports/choose.js";
import { failureOf } from "../helpers/failure.js";

const base = (over: Partial<Message> = {}): Message => ({
  from: { address: "ci@example.com" },
  to: [{ address: "dev@example.com" }],
  cc: [],
  bcc: [],
  subject: "Report",
  html: "<p>hi</p>",
  attachments: [],
  headers: [],
  idempotencyKey: "k-1",
  ...over,
});

const eml = (lines: string[]) => messageFromEml(Buffer.from(lines.join("\r\n")), "test.eml");

const HEAD = ["From: ci@example.com", "To: dev@example.com", "Subject: Report", "MIME-Version: 1.0"];

describe("restLoss", () => {
  it("is undefined for what REST carries: html, attachments with a name, reply-to, single headers", () => {
    expect(
      restLoss(
        base({
          replyTo: { address: "r@example.com" },
          headers: [
            ["X-A", "1"],
            ["X-B", "2"],
          ],
          attachments: [
            { filename: "a.pdf", source: { kind: "bytes", data: Buffer.from("x") }, contentType: "application/pdf" },
          ],
        }),
      ),
    ).toBeUndefined();
  });

  it("names each thing REST would lose", () => {
    const bytes = { kind: "bytes" as const, data: Buffer.from("x") };
    expect(restLoss(base({ cc: [{ address: "c@example.com" }] }))).toBe("cc");
    expect(restLoss(base({ bcc: [{ address: "b@example.com" }] }))).toBe("bcc");
    expect(restLoss(base({ cc: [{ address: "c@example.com" }], bcc: [{ address: "b@example.com" }] }))).toBe("cc/bcc");
    expect(
      restLoss(
        base({ attachments: [{ filename: "chart.png", source: bytes, contentType: "image/png", cid: "chart" }] }),
      ),
    ).toBe("inline images");
    expect(
      restLoss(base({ attachments: [{ filename: "fwd.eml", source: bytes, contentType: "message/rfc822" }] })),
    ).toBe("an attached message");
    expect(
      restLoss(
        base({
          attachments: [{ filename: "invite.ics", source: bytes, contentType: "text/calendar; method=REQUEST" }],
        }),
      ),
    ).toBe("a calendar part");
    const { html: _, ...noHtml } = base();
    expect(restLoss({ ...noHtml, text: "plain" })).toBe("a text-only body");
    expect(
      restLoss({
        ...noHtml,
        text: "plain",
        attachments: [{ filename: "chart.png", source: bytes, contentType: "image/png" }],
      }),
    ).toBe("a plain-text body without HTML, beside an attachment");
    expect(restLoss(base({ text: "plain" }))).toBe("a text part");
    expect(
      restLoss(
        base({
          headers: [
            ["X-A", "1"],
            ["x-a", "2"],
          ],
        }),
      ),
    ).toBe("header x-a given more than once");
  });

  it("sees the same things in a message parsed from a raw RFC 5322 message", async () => {
    expect(restLoss(await eml([...HEAD, "Content-Type: text/html", "", "<p>hi</p>"]))).toBeUndefined();
    expect(restLoss(await eml([...HEAD, "Content-Type: text/plain", "", "hi"]))).toBe("a text-only body");
    expect(restLoss(await eml([...HEAD, "Cc: c@example.com", "Content-Type: text/html", "", "<p>hi</p>"]))).toBe("cc");
    // Bcc is stripped from the raw message but still an envelope recipient.
    expect(restLoss(await eml([...HEAD, "Bcc: b@example.com", "Content-Type: text/html", "", "<p>hi</p>"]))).toBe(
      "bcc",
    );

    const related = await eml([
      ...HEAD,
      'Content-Type: multipart/related; boundary="R"',
      "",
      "--R",
      "Content-Type: text/html",
      "",
      '<img src="cid:chart@x">',
      "--R",
      "Content-Type: image/png",
      "Content-ID: <chart@x>",
      "Content-Disposition: inline",
      "Content-Transfer-Encoding: base64",
      "",
      "iVBORw0KGgo=",
      "--R--",
      "",
    ]);
    expect(related.attachments[0]?.cid).toBe("chart@x");
    expect(restLoss(related)).toBe("inline images");

    // A Content-ID on an ordinary attachment (outside multipart/related) is not an inline image.
    const mixedWithId = await eml([
      ...HEAD,
      'Content-Type: multipart/mixed; boundary="M"',
      "",
      "--M",
      "Content-Type: text/html",
      "",
      "<p>hi</p>",
      "--M",
      "Content-Type: application/pdf",
      "Content-ID: <doc@x>",
      'Content-Disposition: attachment; filename="a.pdf"',
      "",
      "%PDF",
      "--M--",
      "",
    ]);
    expect(restLoss(mixedWithId)).toBeUndefined();

    const forwarded = (disposition: string[]) =>
      eml([
        ...HEAD,
        'Content-Type: multipart/mixed; boundary="M"',
        "",
        "--M",
        "Content-Type: text/html",
        "",
        "<p>see below</p>",
        "--M",
        "Content-Type: message/rfc822",
        ...disposition,
        "",
        "From: old@example.com",
        "To: dev@example.com",
        "Subject: the original",
        "",
        "original body",
        "--M--",
        "",
      ]);
    expect(restLoss(await forwarded(['Content-Disposition: attachment; filename="orig.eml"']))).toBe(
      "an attached message",
    );
    // Without a disposition too: it is not folded into the body.
    expect(restLoss(await forwarded([]))).toBe("an attached message");

    const invite = await eml([
      ...HEAD,
      'Content-Type: multipart/alternative; boundary="A"',
      "",
      "--A",
      "Content-Type: text/html",
      "",
      "<p>meeting</p>",
      "--A",
      "Content-Type: text/calendar; method=REQUEST; charset=utf-8",
      "",
      "BEGIN:VCALENDAR",
      "METHOD:REQUEST",
      "END:VCALENDAR",
      "--A--",
      "",
    ]);
    expect(restLoss(invite)).toBe("a calendar part");
  });
});

describe("chooseTransport", () => {
  it("with both channels: REST when lossless, else SMTP with the reason", () => {
    expect(chooseTransport(base(), { rest: true, smtp: true })).toEqual({
      transport: "rest",
      reason: "REST carries the whole message",
    });
    expect(chooseTransport(base({ cc: [{ address: "c@example.com" }] }), { rest: true, smtp: true })).toEqual({
      transport: "smtp",
      reason: "cc",
    });
  });

  it("a raw message with its program's own Message-ID: SMTP when both are configured (REST would replace it); REST alone still sends it", async () => {
    const own = await messageFromEml(
      Buffer.from(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: s\r\nMessage-ID: <issue-5@gitea.example>\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n",
      ),
      "m.eml",
    );
    expect(own.ownMessageId).toBe(true);
    expect(chooseTransport(own, { rest: true, smtp: true })).toEqual({
      transport: "smtp",
      reason: "its own Message-ID (REST would replace it, and replies to it would not thread)",
    });
    expect(chooseTransport(own, { rest: true, smtp: false })).toEqual({
      transport: "rest",
      reason: "only REST is configured",
    });
    const none = await messageFromEml(
      Buffer.from(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: s\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n",
      ),
      "m.eml",
    );
    expect(chooseTransport(none, { rest: true, smtp: true }).transport).toBe("rest");
  });

  it("with one channel: that one, and SMTP never loses anything", () => {
    expect(chooseTransport(base(), { rest: false, smtp: true })).toEqual({
      transport: "smtp",
      reason: "only SMTP is configured",
    });
    expect(chooseTransport(base({ text: "t" }), { rest: false, smtp: true })).toEqual({
      transport: "smtp",
      reason: "a text part",
    });
    expect(chooseTransport(base(), { rest: true, smtp: false })).toEqual({
      transport: "rest",
      reason: "only REST is configured",
    });
  });

  it("fails clearly (78, nothing sent) when only REST is configured and REST would lose something", () => {
    const m = base({
      attachments: [{ filename: "c.png", source: { kind: "bytes", data: Buffer.from("x") }, cid: "c" }],
    });
    const e = failureOf(() => chooseTransport(m, { rest: true, smtp: false }));
    expect(e.code).toBe("config_missing");
    expect(e.message).toContain("inline images");
    expect(e.hint).toContain("--no-embed");
    expect(failureOf(() => chooseTransport(base(), { rest: false, smtp: false })).code).toBe("config_missing");
  });
});
