import { describe, expect, test } from "vitest";
import {
  hideOptionValues,
  isSecretOption,
  looksLikeKey,
  looksSecret,
  secretOptionError,
} from "../../src/cli/secret-options.js";

describe("options that would carry a key", () => {
  test("are recognised with a space or =, in any case; look-alikes are not", () => {
    for (const w of [
      "--api-key",
      "--api_key",
      "--apikey",
      "--API-KEY",
      "--key=x",
      "--token",
      "--auth-token=x",
      "--password",
      "--passwd=x",
      "--pass",
      "--secret=x",
    ])
      expect(isSecretOption(w), w).toBe(true);
    for (const w of ["--api-key-stdin", "--idempotency-key", "--keys", "-k", "--tokenize", "--password-file", "key"])
      expect(isSecretOption(w), w).toBe(false);
  });

  test("the refusal names the option, never the value, and says where a key goes; words after -- are not options", () => {
    const e = secretOptionError(["send", "-s", "hi", "--api-key=msk_live_abc123456789"])!;
    expect(e.exitCode).toBe(64);
    expect(e.message).toMatch(/^--api-key is not an option/);
    expect(`${e.message} ${e.hint}`).not.toContain("msk_live_abc123456789");
    expect(e.hint).toMatch(/MAILSEND_API_KEY.*MAILSEND_API_KEY_FILE.*--api-key-stdin/);
    expect(secretOptionError(["send", "--", "--api-key"])).toBeUndefined();
    expect(secretOptionError(["send", "--api-key-stdin"])).toBeUndefined();
  });
});

describe("commander's messages as printed", () => {
  test("the value of an unknown --opt=value is cut off", () => {
    expect(hideOptionValues("error: unknown option '--tiemout=sk-abc'")).toBe(
      "error: unknown option '--tiemout=…' (the value is not shown)",
    );
    expect(hideOptionValues("error: unknown option '--frobnicate'")).toBe("error: unknown option '--frobnicate'");
  });

  test("an invalid argument is repeated only when it does not look like a key", () => {
    expect(hideOptionValues("error: option '--timeout <seconds>' argument '3O' is invalid.")).toContain(
      "argument '3O' is invalid",
    );
    expect(hideOptionValues("error: option '--timeout <seconds>' argument 'msk_live_x' is invalid.")).toContain(
      "argument (10 characters, not shown) is invalid",
    );
    expect(looksSecret("ghp_abcdef")).toBe(true);
    expect(looksSecret("0123456789abcdefXYZ")).toBe(true);
    expect(looksSecret("rest")).toBe(false);
  });

  test("a bare word that looks like a key: a key's prefix or a long letters-and-digits token, not a SHA, a path, an address or a word", () => {
    for (const w of ["msk_live_9fQ2xLr7Wk3Tz0Pa8", "sk_test_abcdefgh12", "Zq81vPl0Xw4Rt7YuA9b8C7d6E5f4"])
      expect(looksLikeKey(w), w).toBe(true);
    for (const w of [
      "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a",
      "failed",
      "dev@example.com",
      "reports/2026-11-24/build-42.html",
      "Deployment-of-version-twelve",
    ])
      expect(looksLikeKey(w), w).toBe(false);
  });
});
