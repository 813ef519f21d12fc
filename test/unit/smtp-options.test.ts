import { describe, expect, it } from "vitest";
import type { Message } from "../../src/core/message.js";
import { mailOptions } from "../../src/transports/smtp.js";

const base: Message = {
  from: { name: "Doe, John", address: "john@example.com" },
  to: [{ name: "A <x@evil.example>", address: "a@example.com" }, { address: "b@example.com" }],
  cc: [{ address: "c@example.com" }],
  bcc: [{ name: "Hidden", address: "h@example.com" }],
  replyTo: { address: "r@example.com" },
  subject: "s",
  text: "t",
  html: "<p>h</p>",
  attachments: [
    { filename: "a.pdf", source: { kind: "file", path: "/tmp/a.pdf", size: 3 } },
    { filename: "b.bin", source: { kind: "bytes", data: Buffer.from([1]) }, contentType: "application/x-b" },
  ],
  headers: [["X-Campaign", "q3"]],
  idempotencyKey: "idem-9",
};

describe("mailOptions (what nodemailer is handed)", () => {
  it("gives {name, address} objects and an explicit envelope, never address strings", () => {
    const o = mailOptions(base);
    expect(o.envelope).toEqual({
      from: "john@example.com",
      to: ["a@example.com", "b@example.com", "c@example.com", "h@example.com"],
    });
    expect(o.from).toEqual({ name: "Doe, John", address: "john@example.com" });
    // A name that looks like an address stays a name: nodemailer does not parse it again.
    expect(o.to).toEqual([
      { name: "A <x@evil.example>", address: "a@example.com" },
      { name: "", address: "b@example.com" },
    ]);
    expect(o.cc).toEqual([{ name: "", address: "c@example.com" }]);
    expect(o.bcc).toEqual([{ name: "Hidden", address: "h@example.com" }]);
    expect(o.replyTo).toEqual({ name: "", address: "r@example.com" });
  });

  it("adds X-Idempotency-Key after the custom headers", () => {
    expect(mailOptions(base).headers).toEqual([
      { key: "X-Campaign", value: "q3" },
      { key: "X-Idempotency-Key", value: "idem-9" },
    ]);
  });

  it("streams file attachments by path and passes bytes as they are", () => {
    expect(mailOptions(base).attachments).toEqual([
      { filename: "a.pdf", path: "/tmp/a.pdf" },
      { filename: "b.bin", content: Buffer.from([1]), contentType: "application/x-b" },
    ]);
  });

  it("leaves out empty cc/bcc and absent bodies", () => {
    const o = mailOptions({ ...base, cc: [], bcc: [], replyTo: undefined, html: undefined });
    expect(o).not.toHaveProperty("cc");
    expect(o).not.toHaveProperty("bcc");
    expect(o).not.toHaveProperty("replyTo");
    expect(o).not.toHaveProperty("html");
    expect(o.text).toBe("t");
  });

  it("a raw message (--eml) is sent as it is, with the envelope spelled out", () => {
    const raw = Buffer.from("From: a@example.com\r\n\r\nx");
    expect(mailOptions({ ...base, raw })).toEqual({
      envelope: { from: "john@example.com", to: ["a@example.com", "b@example.com", "c@example.com", "h@example.com"] },
      raw,
    });
  });
});
