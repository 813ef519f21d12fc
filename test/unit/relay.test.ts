import { describe, expect, test } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { hashPassword, RelayUsers } from "../../src/relay/auth.js";
import { isLoopback, parseListen } from "../../src/relay/listen.js";
import { rcptReplyFor, replyFor, summaryHeaders } from "../../src/relay/server.js";
import { parseSize } from "../../src/cli/commands/relay.js";

describe("--listen", () => {
  test("host:port, [v6]:port, a bare port", () => {
    expect(parseListen("127.0.0.1:2525")).toEqual({ host: "127.0.0.1", port: 2525 });
    expect(parseListen("[::1]:0")).toEqual({ host: "::1", port: 0 });
    expect(parseListen("localhost:25")).toEqual({ host: "localhost", port: 25 });
    expect(parseListen("2600")).toEqual({ host: "127.0.0.1", port: 2600 });
    for (const bad of ["::1:25", "host", "host:x", "1.2.3.4:70000", "[nothost]:25"])
      expect(() => parseListen(bad), bad).toThrow(MailsendError);
  });

  test("loopback: 127/8, ::1, v4-mapped 127, localhost; nothing else", () => {
    for (const h of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost", "LOCALHOST"])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "::ffff:10.0.0.1", "example.com", "1127.0.0.1"])
      expect(isLoopback(h), h).toBe(false);
  });
});

describe("--max-size", () => {
  test("bytes and binary suffixes", () => {
    expect(parseSize("26214400")).toBe(26214400);
    expect(parseSize("25M")).toBe(25 * 1024 * 1024);
    expect(parseSize("512k")).toBe(512 * 1024);
    expect(parseSize("1GiB")).toBe(1024 ** 3);
    for (const bad of ["", "10", "1.5M", "-1", "25X"]) expect(() => parseSize(bad), bad).toThrow(MailsendError);
  });
});

describe("the auth file", () => {
  test("a hash made by hash-password checks the right password only; unknown users fail", async () => {
    const h = await hashPassword("s3cret pass");
    expect(h).toMatch(/^scrypt\$16384\$8\$1\$/);
    expect(h).not.toContain("s3cret");
    const users = RelayUsers.parse(`# users\n\nalice:${h}\n bob : ${await hashPassword("other")}\n`, "users");
    expect(users.size).toBe(2);
    expect(await users.verify("alice", "s3cret pass")).toBe(true);
    expect(await users.verify("alice", "s3cret pas")).toBe(false);
    expect(await users.verify("alice", undefined)).toBe(false);
    expect(await users.verify("bob", "other")).toBe(true);
    expect(await users.verify("carol", "s3cret pass")).toBe(false);
    expect(await users.verify(undefined, "s3cret pass")).toBe(false);
  });

  test("a bad line is named by its number, never shown", () => {
    expect(() => RelayUsers.parse("alice:plaintext-password\n", "/etc/users")).toThrow(/\/etc\/users line 1 is not/);
    try {
      RelayUsers.parse("alice:plaintext-password\n", "/etc/users");
    } catch (e) {
      expect((e as Error).message).not.toContain("plaintext-password");
      expect((e as MailsendError).exitCode).toBe(78);
    }
    expect(() => RelayUsers.parse("# nobody\n", "u")).toThrow(/lists no users/);
    expect(() => RelayUsers.parse("a:scrypt$3$8$1$AAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA==\n", "u")).toThrow(/line 1/);
  });
});

describe("SMTP replies", () => {
  test("bad data 554, too large 552, a temporary or internal fault 451, the outbox 452", () => {
    expect(replyFor(new MailsendError("invalid_eml", "no From"), "validate")).toEqual({
      code: 554,
      text: "5.6.0 no From",
    });
    expect(replyFor(new MailsendError("too_large", "too big"), "validate").code).toBe(552);
    expect(replyFor(new MailsendError("internal", "bug"), "validate").code).toBe(451);
    expect(replyFor(new Error("x"), "validate").code).toBe(451);
    const full = replyFor(
      new MailsendError(
        "temporary_failure",
        "cannot write the outbox file /x: no space left on device; the message was NOT queued",
      ),
      "store",
    );
    expect(full.code).toBe(452);
    expect(full.text).toMatch(/^4\.3\.1 .*no space left on device\)$/);
    expect(replyFor(new MailsendError("invalid_eml", "a\r\nb\u00e9"), "validate").text).toBe("5.6.0 a b?");
  });

  test("this machine's setup (no key, no sender, settings, the key refused, a local refusal) is 451 4.3.5, not the message's 554", () => {
    expect(replyFor(new MailsendError("config_missing", "no sender"), "validate")).toEqual({
      code: 451,
      text: "4.3.5 no sender",
    });
    expect(replyFor(new MailsendError("config_invalid", "bad transport"), "validate").code).toBe(451);
    expect(replyFor(new MailsendError("auth_failed", "key refused"), "validate").code).toBe(451);
    expect(replyFor(new MailsendError("rejected", "proxy", { local: true }), "validate").code).toBe(451);
    expect(replyFor(new MailsendError("rejected", "spam"), "validate").code).toBe(554);
  });

  test("a recipient refused at RCPT: 553 5.1.3 for an invalid address, 550 5.1.1 for one that goes nowhere, a fault here 4xx", () => {
    const code = (e: unknown) => (rcptReplyFor(e, "u@intranet") as Error & { responseCode: number }).responseCode;
    expect(code(new MailsendError("invalid_address", 'domain "intranet" is not fully qualified'))).toBe(553);
    expect(rcptReplyFor(new MailsendError("invalid_address", "x"), "u@intranet").message).toBe("5.1.3 <u@intranet>: x");
    expect(code(new MailsendError("config_missing", "root is not in the aliases file"))).toBe(550);
    expect(code(new MailsendError("temporary_failure", "aliases unreadable"))).toBe(451);
  });

  test("Subject and From for queue ls, unfolded, first of each", () => {
    const raw = Buffer.from("From: A <a@x>\r\nSubject: one\r\n two\r\nSubject: again\r\n\r\nSubject: body\r\n");
    expect(summaryHeaders(raw)).toEqual({ subject: "one two", headerFrom: "A <a@x>" });
    expect(summaryHeaders(Buffer.from("\r\nFrom: body@x\r\n"))).toEqual({});
  });
});
