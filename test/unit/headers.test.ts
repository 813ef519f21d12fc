import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { checkHeader, checkHeaderName, checkSingleLine, parseHeaderFlag } from "../../src/core/headers.js";

function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    return (e as MailsendError).code;
  }
  return "none";
}

describe("header names", () => {
  it.each(["X-Campaign", "X-Mailer", "List-Unsubscribe", "x_under", "X.Dot", "A", "X-!#$%&'*+-^`|~"])(
    "accepts %s",
    (name) => {
      expect(() => checkHeaderName(name)).not.toThrow();
    },
  );

  it.each([
    ["empty", ""],
    ["a space", "X Campaign"],
    ["a colon", "X:Campaign"],
    ["a tab", "X\tA"],
    ["CR LF", "X-A\r\nBcc"],
    ["non-ASCII", "X-Ünï"],
    ["DEL", "X-\u007f"],
  ])("rejects a name with %s", (_why, name) => {
    expect(codeOf(() => checkHeaderName(name))).toBe("invalid_header");
  });

  it.each([
    "From",
    "to",
    "CC",
    "Bcc",
    "SUBJECT",
    "Reply-To",
    "Sender",
    "Content-Type",
    "Content-Transfer-Encoding",
    "MIME-Version",
  ])("reserves %s (the request carries it or the service builds it)", (name) => {
    expect(codeOf(() => checkHeaderName(name))).toBe("invalid_header");
    expect(() => checkHeaderName(name)).toThrow(/cannot be set as a custom header/);
  });
});

describe("single-line values", () => {
  it.each([
    ["CR LF", "a\r\nBcc: x@example.com"],
    ["LF", "a\nb"],
    ["CR", "a\rb"],
    ["NUL", "a\u0000b"],
  ])("rejects %s", (_why, value) => {
    expect(codeOf(() => checkSingleLine(value, "subject"))).toBe("invalid_header");
    expect(codeOf(() => checkHeader("X-A", value))).toBe("invalid_header");
  });

  it("accepts tabs, non-ASCII and an empty value", () => {
    expect(() => checkSingleLine("a\tb — ünïcødé 📧", "subject")).not.toThrow();
    expect(() => checkHeader("X-A", "")).not.toThrow();
  });

  it("names where the problem is", () => {
    expect(() => checkSingleLine("a\nb", "--subject")).toThrow(/--subject contains a line break/);
  });
});

describe("--header 'Name: value'", () => {
  it("splits at the first colon and trims", () => {
    expect(parseHeaderFlag("X-Campaign: spring-sale")).toEqual(["X-Campaign", "spring-sale"]);
    expect(parseHeaderFlag("X-Url:  https://example.com/a:b ")).toEqual(["X-Url", "https://example.com/a:b"]);
    expect(parseHeaderFlag("X-Empty:")).toEqual(["X-Empty", ""]);
  });

  it("is a usage error without a name or a colon", () => {
    expect(codeOf(() => parseHeaderFlag("no colon here"))).toBe("usage");
    expect(codeOf(() => parseHeaderFlag(": value"))).toBe("usage");
  });

  it("refuses X-Idempotency-Key (mailsend sets it; --idempotency-key gives it)", () => {
    expect(codeOf(() => parseHeaderFlag("X-Idempotency-Key: mine"))).toBe("usage");
    expect(codeOf(() => parseHeaderFlag("x-idempotency-key: mine"))).toBe("usage");
    expect(() => parseHeaderFlag("X-Idempotency-Key: mine")).toThrow(/set by mailsend/);
    expect(parseHeaderFlag("Idempotency-Key: an ordinary header")).toEqual(["Idempotency-Key", "an ordinary header"]);
  });

  it("is a data error for a bad name, a reserved one or a line break", () => {
    expect(codeOf(() => parseHeaderFlag("X Bad: v"))).toBe("invalid_header");
    expect(codeOf(() => parseHeaderFlag("Bcc: someone@example.com"))).toBe("invalid_header");
    expect(codeOf(() => parseHeaderFlag("X-A: v\r\nBcc: x@example.com"))).toBe("invalid_header");
  });
});
