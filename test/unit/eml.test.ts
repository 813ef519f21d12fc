import { describe, expect, it } from "vitest";
import { sendRequestFields } from "../../src/core/request.js";
import { messageFromEml, stripHeader } from "../../src/sendmail/eml.js";
import { restLoss } from "../../src/transports/choose.js";
import { failure } from "../helpers/failure.js";

const crlf = (lines: string[]) => Buffer.from(lines.join("\r\n"));

const SIMPLE = crlf([
  "From: Alice Example <alice@example.com>",
  "To: Bob <bob@example.com>, carol@example.com",
  "Cc: dave@example.com",
  "Bcc: secret@example.com,",
  "  hidden@example.com",
  "Reply-To: help@example.com",
  "Subject: Quarterly report",
  "X-Campaign: q3",
  "X-Folded: part one",
  " part two",
  "Message-ID: <abc@example.com>",
  "MIME-Version: 1.0",
  "Content-Type: text/plain; charset=utf-8",
  "",
  "Numbers are up.",
  "Bcc: this line is body text, not a header",
  "",
]);

describe("stripHeader", () => {
  it("removes the header with its folded lines and nothing else, byte for byte", () => {
    const out = stripHeader(SIMPLE, "bcc").toString("latin1");
    expect(out).toBe(SIMPLE.toString("latin1").replace("Bcc: secret@example.com,\r\n  hidden@example.com\r\n", ""));
    expect(out).toContain("Bcc: this line is body text, not a header");
  });

  it("matches the name case-insensitively, with space before the colon, every occurrence", () => {
    const raw = crlf([
      "BCC: a@example.com",
      "To: t@example.com",
      "bcc : b@example.com",
      "\tc@example.com",
      "Subject: s",
      "",
      "body",
    ]);
    expect(stripHeader(raw, "bcc").toString()).toBe("To: t@example.com\r\nSubject: s\r\n\r\nbody");
  });

  it("handles LF-only messages and tab-folded lines", () => {
    const raw = Buffer.from("To: t@example.com\nBcc: a@example.com,\n\tb@example.com\nSubject: s\n\nBcc: body\n");
    expect(stripHeader(raw, "bcc").toString()).toBe("To: t@example.com\nSubject: s\n\nBcc: body\n");
  });

  it("does not touch headers whose name only starts the same", () => {
    const raw = crlf(["Bcc-Note: keep", "Bcc: drop", "Subject: s", "", "x"]);
    expect(stripHeader(raw, "bcc").toString()).toBe("Bcc-Note: keep\r\nSubject: s\r\n\r\nx");
  });

  it("leaves 8-bit bytes alone", () => {
    const raw = Buffer.concat([
      Buffer.from("Subject: "),
      Buffer.from("Grüße", "utf8"),
      Buffer.from("\r\nBcc: x@example.com\r\n\r\n"),
      Buffer.from([0xff, 0x00, 0x80]),
    ]);
    const out = stripHeader(raw, "bcc");
    expect(
      out.equals(
        Buffer.concat([
          Buffer.from("Subject: "),
          Buffer.from("Grüße", "utf8"),
          Buffer.from("\r\n\r\n"),
          Buffer.from([0xff, 0x00, 0x80]),
        ]),
      ),
    ).toBe(true);
  });
});

describe("messageFromEml", () => {
  it("fills the message from the headers; raw is the message without Bcc", async () => {
    const m = await messageFromEml(SIMPLE, "report.eml");
    expect(m.from).toEqual({ name: "Alice Example", address: "alice@example.com" });
    expect(m.to).toEqual([{ name: "Bob", address: "bob@example.com" }, { address: "carol@example.com" }]);
    expect(m.cc).toEqual([{ address: "dave@example.com" }]);
    expect(m.bcc).toEqual([{ address: "secret@example.com" }, { address: "hidden@example.com" }]);
    expect(m.replyTo).toEqual({ address: "help@example.com" });
    expect(m.subject).toBe("Quarterly report");
    expect(m.text).toContain("Numbers are up.");
    expect(m.headers).toEqual([
      ["X-Campaign", "q3"],
      ["X-Folded", "part one part two"],
    ]);
    expect(m.raw?.toString()).not.toContain("secret@example.com");
    expect(m.raw?.toString()).not.toContain("hidden@example.com");
    expect(m.raw?.toString()).toContain("Bcc: this line is body text");
  });

  it("converts to a send request over REST: html or escaped text, from + name, X- headers", async () => {
    const raw = crlf([
      "From: Alice <alice@example.com>",
      "To: bob@example.com",
      "Subject: Hi",
      "X-Tag: t",
      "Content-Type: text/plain",
      "",
      "a < b",
      "",
    ]);
    const m = await messageFromEml(raw, "m.eml");
    expect(sendRequestFields(m)).toEqual({
      from: "alice@example.com",
      to: "bob@example.com",
      subject: "Hi",
      html: "<pre>a &lt; b\n</pre>",
      name: "Alice",
      headers: { "X-Tag": "t" },
    });
  });

  it("over REST carries the message's own headers (threading, unsubscribe, auto-reply) but not structure, stamps, trace or signatures", async () => {
    const raw = crlf([
      "Received: from a by b",
      "Received: from c by d",
      "Return-Path: <bounce@example.com>",
      "DKIM-Signature: v=1; a=rsa-sha256; d=example.com;",
      " b=abc",
      "From: Alice <alice@example.com>",
      "To: bob@example.com",
      "Subject: Re: plan",
      "Date: Tue, 24 Nov 2026 10:00:00 +0000",
      "Message-ID: <reply-1@example.com>",
      "In-Reply-To: <plan-1@example.com>",
      "References: <root@example.com>",
      " <plan-1@example.com>",
      "List-Unsubscribe: <mailto:unsub@example.com>",
      "Auto-Submitted: auto-generated",
      "X-Mailer: cron",
      "X-Idempotency-Key: key-1",
      "MIME-Version: 1.0",
      "Content-Type: text/html; charset=utf-8",
      "Content-Transfer-Encoding: 7bit",
      "",
      "<p>ok</p>",
      "",
    ]);
    const m = await messageFromEml(raw, "reply.eml");
    expect(sendRequestFields(m).headers).toEqual({
      "In-Reply-To": "<plan-1@example.com>",
      References: "<root@example.com> <plan-1@example.com>",
      "List-Unsubscribe": "<mailto:unsub@example.com>",
      "Auto-Submitted": "auto-generated",
      "X-Mailer": "cron",
    });
    // Received twice is trace, not a header the request would have to carry twice.
    expect(restLoss(m)).toBeUndefined();
  });

  it("decodes RFC 2047 subjects and names, and keeps attachments byte for byte", async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 251, 255]);
    const raw = crlf([
      "From: =?UTF-8?Q?J=C3=BCrgen?= <j@example.de>",
      "To: b@example.com",
      `Subject: =?UTF-8?B?${Buffer.from("Grüße 📧").toString("base64")}?=`,
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b1"',
      "",
      "--b1",
      "Content-Type: text/html; charset=utf-8",
      "",
      "<p>Hallo</p>",
      "--b1",
      'Content-Type: application/octet-stream; name="d.bin"',
      'Content-Disposition: attachment; filename="d.bin"',
      "Content-Transfer-Encoding: base64",
      "",
      bytes.toString("base64"),
      "--b1--",
      "",
    ]);
    const m = await messageFromEml(raw, "m.eml");
    expect(m.subject).toBe("Grüße 📧");
    expect(m.from).toEqual({ name: "Jürgen", address: "j@example.de" });
    expect(m.html?.trim()).toBe("<p>Hallo</p>");
    expect(m.attachments).toHaveLength(1);
    const a = m.attachments[0]!;
    expect(a.filename).toBe("d.bin");
    expect(a.source.kind === "bytes" && a.source.data.equals(bytes)).toBe(true);
  });

  it("Latin-1 bytes in a message that says UTF-8 or nothing: REST would get U+FFFD, so it is a REST loss", async () => {
    const head = "From: a@example.com\r\nTo: b@example.com\r\n";
    const latin = Buffer.concat([
      Buffer.from(`${head}Subject: x\r\nContent-Type: text/html\r\n\r\n<p>Caf`),
      Buffer.from([0xe9]),
      Buffer.from("</p>\r\n"),
    ]);
    const m = await messageFromEml(latin, "m.eml");
    expect(m.html).toContain("\uFFFD");
    expect(restLoss(m)).toMatch(/charset does not explain/);
    const subject = Buffer.concat([
      Buffer.from(`${head}Subject: Caf`),
      Buffer.from([0xe9]),
      Buffer.from("\r\n\r\n<p>x</p>\r\n"),
    ]);
    expect(restLoss(await messageFromEml(subject, "m.eml"))).toMatch(/charset does not explain/);
    // UTF-8 that really holds U+FFFD, and Latin-1 that says so, lose nothing.
    const real = Buffer.from(
      `${head}Subject: x\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Caf\u00e9 \uFFFD</p>\r\n`,
      "utf8",
    );
    expect(restLoss(await messageFromEml(real, "m.eml"))).toBeUndefined();
    const said = Buffer.concat([
      Buffer.from(`${head}Subject: x\r\nContent-Type: text/html; charset=iso-8859-1\r\n\r\n<p>Caf`),
      Buffer.from([0xe9]),
      Buffer.from("</p>\r\n"),
    ]);
    const m2 = await messageFromEml(said, "m.eml");
    expect(m2.html).toContain("Caf\u00e9");
    expect(restLoss(m2)).toBeUndefined();
  });

  it("a message with no body (only a header): REST would have to make one up, so it is a REST loss", async () => {
    const m = await messageFromEml(
      Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nSubject: ping\r\n\r\n"),
      "m.eml",
    );
    expect(restLoss(m)).toBe("no body (REST needs an HTML one)");
  });

  it("a group in To (RFC 5322) stands for its members; an empty one for nobody", async () => {
    const raw = crlf([
      "From: a@example.com",
      "To: team: b@example.com, Cee <c@example.com>;, undisclosed-recipients:;",
      "Subject: s",
      "",
      "x",
    ]);
    expect((await messageFromEml(raw, "m.eml")).to).toEqual([
      { address: "b@example.com" },
      { name: "Cee", address: "c@example.com" },
    ]);
  });

  it("collects every To line and keeps them all in the envelope", async () => {
    const raw = crlf(["From: a@example.com", "To: b@example.com", "To: c@example.com", "Subject: s", "", "x"]);
    expect((await messageFromEml(raw, "m.eml")).to).toEqual([
      { address: "b@example.com" },
      { address: "c@example.com" },
    ]);
  });

  it("decodes a quoted encoded word in a display name", async () => {
    const raw = crlf([
      'From: "=?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?=" <j@example.de>',
      "To: Grüße <g@example.de>",
      "Subject: s",
      "",
      "x",
    ]);
    const m = await messageFromEml(raw, "m.eml");
    expect(m.from).toEqual({ name: "Jürgen Müller", address: "j@example.de" });
    expect(m.to).toEqual([{ name: "Grüße", address: "g@example.de" }]);
  });

  describe("idempotency key", () => {
    it("adds X-Idempotency-Key to the raw message, with the file's line ending", async () => {
      const m = await messageFromEml(SIMPLE, "m.eml");
      expect(m.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      expect(m.raw!.toString().startsWith(`X-Idempotency-Key: ${m.idempotencyKey}\r\nFrom: Alice`)).toBe(true);
      const lf = await messageFromEml(
        Buffer.from("From: a@example.com\nTo: b@example.com\nSubject: s\n\nx\n"),
        "m.eml",
        "k-lf",
      );
      expect(lf.raw!.toString()).toBe(
        "X-Idempotency-Key: k-lf\nFrom: a@example.com\nTo: b@example.com\nSubject: s\n\nx\n",
      );
    });

    it("uses the given key, replacing one in the file", async () => {
      const raw = crlf([
        "X-Idempotency-Key: from-file",
        "From: a@example.com",
        "To: b@example.com",
        "Subject: s",
        "",
        "x",
      ]);
      const m = await messageFromEml(raw, "m.eml", "k-1");
      expect(m.idempotencyKey).toBe("k-1");
      expect(m.raw!.toString()).toBe(
        "X-Idempotency-Key: k-1\r\nFrom: a@example.com\r\nTo: b@example.com\r\nSubject: s\r\n\r\nx",
      );
      expect(m.headers).toEqual([]);
    });

    it("adopts the file's key and leaves the file as it is", async () => {
      const raw = crlf([
        "From: a@example.com",
        "To: b@example.com",
        "X-Idempotency-Key: from-file",
        "Subject: s",
        "",
        "x",
      ]);
      const m = await messageFromEml(raw, "m.eml");
      expect(m.idempotencyKey).toBe("from-file");
      expect(m.raw!.equals(raw)).toBe(true);
    });
  });

  it.each([
    ["no header line", "hello world\r\n\r\nbody"],
    ["no blank line", "From: a@example.com\r\nTo: b@example.com\r\nSubject: s"],
    ["no From", "To: b@example.com\r\nSubject: s\r\n\r\nx"],
    ["two From addresses", "From: a@example.com, c@example.com\r\nTo: b@example.com\r\nSubject: s\r\n\r\nx"],
    ["no recipients", "From: a@example.com\r\nSubject: s\r\n\r\nx"],
    [
      "a group without its ending ;",
      "From: a@example.com\r\nTo: team: b@example.com, c@example.com\r\nSubject: s\r\n\r\nx",
    ],
    ["an invalid To address", "From: a@example.com\r\nTo: not-an-address\r\nSubject: s\r\n\r\nx"],
    [
      "two Reply-To",
      "From: a@example.com\r\nTo: b@example.com\r\nReply-To: c@example.com, d@example.com\r\nSubject: s\r\n\r\nx",
    ],
    [
      "an encoded CR LF in the subject",
      `From: a@example.com\r\nTo: b@example.com\r\nSubject: =?UTF-8?B?${Buffer.from("Hi\r\nBcc: e@example.com").toString("base64")}?=\r\n\r\nx`,
    ],
    [
      "an encoded CR LF in a display name",
      `From: =?UTF-8?B?${Buffer.from("Evil\r\nBcc: e@example.com").toString("base64")}?= <a@example.com>\r\nTo: b@example.com\r\nSubject: s\r\n\r\nx`,
    ],
    ["two From lines", "From: a@example.com\r\nFrom: c@example.com\r\nTo: b@example.com\r\nSubject: s\r\n\r\nx"],
    ["an addr-spec before an angle address", "From: a@example.com\r\nTo: a@x.com <b@y.com>\r\nSubject: s\r\n\r\nx"],
    ["an unquoted comma in a name", "From: a@example.com\r\nTo: Doe, John <j@example.com>\r\nSubject: s\r\n\r\nx"],
    [
      "a key with spaces in X-Idempotency-Key",
      "X-Idempotency-Key: a b\r\nFrom: a@example.com\r\nTo: b@example.com\r\nSubject: s\r\n\r\nx",
    ],
    [
      "an encoded CR LF in an attachment file name",
      [
        "From: a@example.com",
        "To: b@example.com",
        "Subject: s",
        'Content-Type: multipart/mixed; boundary="b"',
        "",
        "--b",
        "Content-Type: text/plain",
        "",
        "x",
        "--b",
        `Content-Disposition: attachment; filename="=?UTF-8?B?${Buffer.from("a\r\nb.txt").toString("base64")}?="`,
        "",
        "y",
        "--b--",
        "",
      ].join("\r\n"),
    ],
    [
      "an encoded CR LF in a recipient's name",
      `From: a@example.com\r\nTo: =?UTF-8?B?${Buffer.from("B\r\nBcc: e@example.com").toString("base64")}?= <b@example.com>\r\nSubject: s\r\n\r\nx`,
    ],
  ])("%s -> exit 65", async (_why, text) => {
    const e = await failure(messageFromEml(Buffer.from(text), "bad.eml"));
    expect(e.exitCode).toBe(65);
    expect(e.message).toContain("bad.eml");
  });
});
