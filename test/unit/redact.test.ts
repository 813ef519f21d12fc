import { describe, expect, it } from "vitest";
import { hideKeyLikeWords, KEY_NOT_SHOWN, makeRedactor, REDACTED } from "../../src/core/redact.js";

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
    const out = redact(
      `${Buffer.from(`\0mailsend\0${KEY}`).toString("base64")} ${Buffer.from(KEY).toString("base64")} ${KEY}`,
    );
    expect(out).not.toContain(KEY);
    expect(out).not.toContain(Buffer.from(KEY).toString("base64"));
    expect(out.split(REDACTED)).toHaveLength(4);
  });
});

describe("hideKeyLikeWords: a key a person typed where another value goes", () => {
  const GENERIC = "Zq3xY9pL0aBcDeFgHiJkLmNoPqRsTuVw12";
  it("is hidden as a word, quoted, as a host of host:port, in a path or a URL by its prefix", () => {
    for (const [text, want] of [
      [`unknown command '${KEY}'`, `unknown command '${KEY_NOT_SHOWN}'`],
      [`missing @ in "${GENERIC}"`, `missing @ in "${KEY_NOT_SHOWN}"`],
      [`cannot reach ${GENERIC}:587: host not found`, `cannot reach ${KEY_NOT_SHOWN}:587: host not found`],
      [`not found: ./${KEY}`, `not found: ./${KEY_NOT_SHOWN}`],
      [`https://${KEY}/send`, `https://${KEY_NOT_SHOWN}/send`],
      [`no profile ${KEY}.`, `no profile ${KEY_NOT_SHOWN}.`],
      [`--profile=${GENERIC}`, `--profile=${KEY_NOT_SHOWN}`],
    ])
      expect(hideKeyLikeWords(text!)).toBe(want);
  });
  it("leaves what is not a key: a long temp dir's name in a path, a UUID, a SHA, a sentence, an address", () => {
    for (const text of [
      "cannot write /tmp/mailsend-daemon-user-AbCd12/state-0/outbox",
      "idempotency key 123e4567-e89b-12d3-a456-426614174000",
      "commit 3f9a0c2d4e5f60718293a4b5c6d7e8f901234567",
      "the outbox file 0mx0fw9jq0y2b515aaf.msg is damaged",
      "missing @ in bob.example.com; user-with-a-long-name-2026@example.com",
      "MAILSEND_QUEUE_AUTORUN=0 turns that off here; MAILSEND_RATE_LIMIT_PASSWORD_FILE2 too",
    ])
      expect(hideKeyLikeWords(text)).toBe(text);
  });
});
