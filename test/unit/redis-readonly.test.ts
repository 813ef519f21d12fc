import { describe, expect, test } from "vitest";
import { redisConfigFrom } from "../../src/limits/redis-config.js";
import { isReadOnly, redisError } from "../../src/limits/redis-errors.js";

function reply(message: string): Error {
  return Object.assign(new Error(message), { name: "ReplyError" });
}

describe("READONLY, as Redis 7 and as Redis 6 answer it from the budget's script", () => {
  const redis7 = reply(
    "READONLY You can't write against a read only replica. script: 0666a0f756882eec0f65273d72f346a4e1c35fbd, on @user_script:1.",
  );
  // Redis 6.2 (the oldest the budget takes) and Dragonfly wrap the failed redis.call's error.
  const redis6 = reply(
    "ERR Error running script (call to f_1028a5dba704e1d8a01fd96efeba25bb78f62df2): @user_script:4: @user_script: 4: -READONLY You can't write against a read only replica.",
  );

  test("both are a demoted server (connect again), a temporary failure if it stays so (75), never a Redis the budget cannot use (78)", () => {
    const config = redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: "redis://cache.internal" })!;
    for (const e of [redis7, redis6]) {
      expect(isReadOnly(e), e.message).toBe(true);
      expect(redisError(e, config, "later", "take"), e.message).toMatchObject({
        code: "temporary_failure",
        hint: expect.stringContaining("It is a replica"),
      });
    }
    expect(
      isReadOnly(
        reply(
          "ERR Error running script (call to f_1): @user_script:1: user_script:1: Script attempted to access nonexistent global variable 'READONLY'",
        ),
      ),
    ).toBe(false);
  });
});
