import { describe, expect, it } from "vitest";
import { redactForPrint, stripUserinfo } from "../../src/core/redact.js";
import { hideOptionValues } from "../../src/cli/secret-options.js";

describe("redactForPrint: a URL is printed without its userinfo", () => {
  it("removes user and password of well-formed and broken URLs", () => {
    expect(redactForPrint("cannot reach redis://:s3cr3t@cache:6379/0")).toBe("cannot reach redis://cache:6379/0");
    expect(redactForPrint("MAILSEND_RATE_LIMIT_URL (redis://app:s3cr3t@host:99999) has port 99999")).toBe(
      "MAILSEND_RATE_LIMIT_URL (redis://host:99999) has port 99999",
    );
    // A password with a space, or with "/" or "@" in it: the URL does not parse, the password still goes.
    expect(redactForPrint("MAILSEND_RATE_LIMIT_URL (redis://:s3cr3t pass@host:99999) has port 99999")).not.toContain(
      "s3cr3t",
    );
    expect(redactForPrint("redis://:s3/cr@t@host:1")).not.toContain("s3");
    expect(redactForPrint("rediss://user:pa ss word@h.example:6380")).toBe("rediss://h.example:6380");
    expect(redactForPrint("http://u:p@proxy:3128 refused")).toBe("http://proxy:3128 refused");
  });
  it("leaves alone what is not userinfo", () => {
    const usage = "Expected redis://[user:password@]host[:port][/db], rediss://… for TLS";
    expect(redactForPrint(usage)).toBe(usage);
    expect(stripUserinfo("see https://example.com/a@b")).toBe("see https://example.com/a@b");
    expect(redactForPrint("POST http://127.0.0.1:8025/send, mail a@example.com")).toBe(
      "POST http://127.0.0.1:8025/send, mail a@example.com",
    );
    expect(redactForPrint("redis://[::1]:6379")).toBe("redis://[::1]:6379");
  });
});

describe("option errors never repeat a value that looks like a secret", () => {
  it("--timeout KEY: long, high-entropy or a key prefix is not shown", () => {
    for (const value of ["msk_live_Zx9Qw7Er5Ty3Ui1Op", "sk-abc123", "Zx9Qw7Er5Ty3Ui1OpAs8Df6Gh4Jk2L"]) {
      const out = hideOptionValues(
        `error: option '--timeout <seconds>' argument '${value}' is invalid. expected a whole number`,
      );
      expect(out, value).not.toContain(value);
      expect(out).toMatch(/characters, not shown/);
    }
    // A typo is still shown: it helps.
    expect(hideOptionValues("error: option '--timeout <seconds>' argument '3o' is invalid.")).toContain("'3o'");
  });
});

describe("prose after a URL", () => {
  it("a port followed by words and an address is not taken for a password", () => {
    expect(redactForPrint("listening on http://host:8025 or mail a@example.com")).toBe(
      "listening on http://host:8025 or mail a@example.com",
    );
  });
});
