/**
 * Secrets never printed, by the built CLI: a Redis URL that does not parse
 * (a password with a space) in send and doctor, human and --json; a key
 * pasted as the value of --timeout.
 */
import { describe, expect, test } from "vitest";
import { runInProcess } from "../helpers/cli.js";

const SECRET = "s3cr3tPassw0rdValue";
const env = {
  MAILSEND_API_KEY: "faults-secrets-key",
  MAILSEND_BASE_URL: "http://127.0.0.1:9",
  MAILSEND_RATE_LIMIT: "10",
};
const SEND = ["send", "-f", "a@example.com", "-t", "b@example.com", "-s", "x", "--text", "y"];

describe("secrets never printed", () => {
  for (const url of [
    `redis://:${SECRET} x@cache.example:99999`,
    `redis://app:${SECRET}@cache.example:99999`,
    `rediss://:${SECRET}/x@[::1:6379`,
  ]) {
    test(`a Redis URL that does not parse: ${url.replace(SECRET, "<password>")}`, async () => {
      for (const args of [SEND, [...SEND, "--json"], ["doctor"], ["doctor", "--json"]]) {
        const r = await runInProcess(args, { env: { ...env, MAILSEND_RATE_LIMIT_URL: url } });
        expect(r.exitCode, `${args.join(" ")}: ${r.stderr}`).toBe(78);
        expect(`${r.stdout}${r.stderr}`, args.join(" ")).not.toContain(SECRET);
        expect(`${r.stdout}${r.stderr}`, args.join(" ")).toMatch(/MAILSEND_RATE_LIMIT_URL/);
      }
    });
  }

  test("--timeout with a key as its value: the error does not repeat it (human and --json)", async () => {
    const key = "msk_live_Zx9Qw7Er5Ty3Ui1OpAs8Df6";
    for (const extra of [[], ["--json"]]) {
      const r = await runInProcess([...SEND, "--timeout", key, ...extra], { env });
      expect(r.exitCode).toBe(64);
      expect(r.stderr).toMatch(/--timeout/);
      expect(`${r.stdout}${r.stderr}`).not.toContain(key);
      expect(`${r.stdout}${r.stderr}`).not.toContain("Zx9Qw7Er5Ty3Ui1Op");
    }
  });
});
