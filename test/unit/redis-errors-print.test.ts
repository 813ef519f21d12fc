/**
 * Every message and hint the budget's Redis errors carry reads the same after
 * the printing redactor (redactForPrint strips a URL's userinfo): a hint that
 * shows how to write the URL must not be cut into nonsense on its way out
 * ("redis://:password@host" was printed as "redis://host").
 */
import { describe, expect, test } from "vitest";
import { redactForPrint } from "../../src/core/redact.js";
import { redisConfigFrom } from "../../src/limits/redis-config.js";
import { redisError, type RedisOp, type RedisPhase } from "../../src/limits/redis-errors.js";

function reply(message: string): Error {
  const e = new Error(message);
  e.name = "ReplyError";
  return e;
}
function sys(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

const FAULTS: Array<[string, Error]> = [
  ["wrong password", reply("WRONGPASS invalid username-password pair or user is disabled.")],
  ["no password", reply("NOAUTH Authentication required.")],
  ["user with Redis 5", reply("ERR wrong number of arguments for 'auth' command")],
  ["no permission", reply("NOPERM this user has no permissions to run the 'eval' command")],
  ["untrusted", sys("UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate")],
  ["not Redis", new Error('Protocol error, got "H" as reply type byte')],
  ["cluster", reply("MOVED 3999 127.0.0.1:6381")],
  ["replica", reply("READONLY You can't write against a read only replica.")],
  ["refused", sys("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:6379")],
  ["lost", new Error("Connection is closed.")],
  ["timeout", new Error("Command timed out")],
  ["other refusal", reply("ERR unknown command 'EVAL'")],
];

describe("Redis errors survive the printing redactor unchanged", () => {
  const urls = [
    "redis://cache.internal:6380/2",
    "rediss://budget:s3cret-pw@cache.internal",
    "redis-sentinel://:s3cret-pw@s1:26379,s2:26379/mymaster",
  ];
  for (const url of urls) {
    for (const [name, cause] of FAULTS) {
      for (const [phase, op] of [
        ["connect", "take"],
        ["later", "record"],
      ] as Array<[RedisPhase, RedisOp]>) {
        test(`${url}: ${name} (${phase}, ${op})`, () => {
          const config = redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: url })!;
          const e = redisError(cause, config, phase, op);
          expect(redactForPrint(e.message)).toBe(e.message);
          if (e.hint !== undefined) expect(redactForPrint(e.hint)).toBe(e.hint);
          expect(`${e.message} ${e.hint ?? ""}`).not.toContain("s3cret-pw");
        });
      }
    }
  }
});
