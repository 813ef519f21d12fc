import { describe, expect, it } from "vitest";
import { makeRedactor, REDACTED } from "../../src/core/redact.js";

const KEY = "msk_test_Zx9Qw7Er5Ty3Ui1Op";

describe("makeRedactor", () => {
  const redact = makeRedactor(KEY);

  it("removes the key itself, every occurrence", () => {
    expect(redact(`Authorization: Bearer ${KEY}`)).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(redact(`${KEY} and ${KEY}`)).toBe(`${REDACTED} and ${REDACTED}`);
  });

  it("removes AUTH LOGIN's base64 password line", () => {
    const line = `C: ${Buffer.from(KEY).toString("base64")}`;
    expect(redact(line)).toBe(`C: ${REDACTED}`);
  });

  it("removes AUTH PLAIN's base64 blob, with and without an authzid", () => {
    const plain = Buffer.from(`\0mailsend\0${KEY}`).toString("base64");
    const withAuthz = Buffer.from(`mailsend\0mailsend\0${KEY}`).toString("base64");
    expect(redact(`AUTH PLAIN ${plain}`)).toBe(`AUTH PLAIN ${REDACTED}`);
    expect(redact(`AUTH PLAIN ${withAuthz}`)).toBe(`AUTH PLAIN ${REDACTED}`);
  });

  it("uses the configured username for the PLAIN blob", () => {
    const r = makeRedactor(KEY, "other");
    const plain = Buffer.from(`\0other\0${KEY}`).toString("base64");
    expect(r(plain)).toBe(REDACTED);
  });

  it("removes the URL-encoded key", () => {
    const key = "a+b/c=d";
    expect(makeRedactor(key)(`?k=${encodeURIComponent(key)}`)).toBe(`?k=${REDACTED}`);
  });

  it("leaves text without the key alone", () => {
    expect(redact("250 2.0.0 Ok: queued")).toBe("250 2.0.0 Ok: queued");
  });

  it("is the identity without a key", () => {
    expect(makeRedactor(undefined)("anything")).toBe("anything");
    expect(makeRedactor("")("anything")).toBe("anything");
  });

  it("never leaves a usable piece of a longer form", () => {
    const out = redact(`${Buffer.from(`\0mailsend\0${KEY}`).toString("base64")} ${Buffer.from(KEY).toString("base64")} ${KEY}`);
    expect(out).not.toContain(KEY);
    expect(out).not.toContain(Buffer.from(KEY).toString("base64"));
    expect(out.split(REDACTED)).toHaveLength(4);
  });
});
