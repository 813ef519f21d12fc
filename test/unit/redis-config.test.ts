import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { stripUserinfo } from "../../src/core/redact.js";
import { redisConfigFrom } from "../../src/limits/redis-config.js";

const parse = (url: string, env: Record<string, string> = {}) =>
  redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: url, ...env });

function failure(fn: () => unknown): { code: string; message: string; hint?: string } {
  try {
    fn();
  } catch (e) {
    return e as { code: string; message: string; hint?: string };
  }
  throw new Error("did not throw");
}

describe("MAILSEND_RATE_LIMIT_URL", () => {
  test("unset: no Redis", () => {
    expect(redisConfigFrom({})).toBeUndefined();
    expect(redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: " " })).toBeUndefined();
  });

  test("redis://host: port 6379, db 0, no TLS", () => {
    expect(parse("redis://cache.internal")).toMatchObject({
      kind: "standalone",
      nodes: [{ host: "cache.internal", port: 6379 }],
      db: 0,
      tls: false,
      label: "redis://cache.internal:6379",
    });
  });

  test("rediss:// with an ACL user, a %-encoded password and a db", () => {
    const c = parse("rediss://budget:p%40ss%3Aw%2Frd@redis.example.com:6380/3")!;
    expect(c).toMatchObject({
      kind: "standalone",
      nodes: [{ host: "redis.example.com", port: 6380 }],
      db: 3,
      tls: true,
      username: "budget",
      password: "p@ss:w/rd",
      passwordSource: "the URL",
    });
    expect(c.label).toBe("rediss://redis.example.com:6380/3");
  });

  test("redis://:password@host and redis://password@host (as redis-cli reads it) give a password only", () => {
    expect(parse("redis://:s3cret@h")).toMatchObject({ password: "s3cret" });
    expect(parse("redis://:s3cret@h")!.username).toBeUndefined();
    expect(parse("redis://s3cret@h")).toMatchObject({ password: "s3cret" });
    expect(parse("redis://s3cret@h")!.username).toBeUndefined();
  });

  test("an IPv6 host", () => {
    expect(parse("redis://[::1]:7000")).toMatchObject({
      nodes: [{ host: "::1", port: 7000 }],
      label: "redis://[::1]:7000",
    });
  });

  test("Sentinel: several sentinels, the master's name, a db; redis+sentinel:// too", () => {
    const c = parse("redis-sentinel://u:pw@s1:26379,s2,[::1]:26380/mymaster/2")!;
    expect(c).toMatchObject({
      kind: "sentinel",
      masterName: "mymaster",
      db: 2,
      tls: false,
      username: "u",
      password: "pw",
      nodes: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
        { host: "::1", port: 26380 },
      ],
    });
    expect(c.label).toBe("redis-sentinel://s1:26379,s2:26379,[::1]:26380/mymaster/2");
    expect(parse("redis+sentinel://s1/m")).toMatchObject({ kind: "sentinel", masterName: "m" });
    expect(parse("rediss-sentinel://s1/m")).toMatchObject({ kind: "sentinel", tls: true });
  });

  test("the password from MAILSEND_RATE_LIMIT_PASSWORD_FILE (one trailing newline dropped)", () => {
    const dir = mkdtempSync(join(tmpdir(), "mailsend-redis-cfg-"));
    writeFileSync(join(dir, "pw"), "from-file\n");
    writeFileSync(join(dir, "spw"), "sentinel-pw");
    const c = parse("redis://budget@h", { MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "pw") })!;
    // A user without a password in the URL: the file gives the password, the URL the user.
    expect(c).toMatchObject({ password: "from-file", passwordSource: join(dir, "pw") });
    const s = parse("redis-sentinel://s/m", {
      MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "pw"),
      MAILSEND_RATE_LIMIT_SENTINEL_PASSWORD_FILE: join(dir, "spw"),
    })!;
    expect(s).toMatchObject({ password: "from-file", sentinelPassword: "sentinel-pw" });
  });

  test("bad URLs are config errors (78) that never print the password", () => {
    const cases = [
      "redis://:hunter2@host:99999",
      "http://:hunter2@host",
      "redis://:hunter2@host/notadb",
      "redis://:hunter2@host/0?tls=true",
      "redis-sentinel://:hunter2@host:26379",
      "redis://:hunter2%zz@host",
      "not a url :hunter2@",
      "redis://:hunter2@",
      // Cut by a "/", "?" or "#" written as is: the bare form (redis-cli's password), a user's, one with a space.
      "redis://hunter2/x@host",
      "redis://hunter2#x@host",
      "redis://u/x:hunter2@host",
      "redis://hunter2 x@host/notadb",
    ];
    for (const url of cases) {
      const e = failure(() => parse(url));
      expect(e.code, url).toBe("config_invalid");
      expect(`${e.message} ${e.hint ?? ""}`, url).not.toContain("hunter2");
    }
    expect(failure(() => parse("http://h")).message).toMatch(/must start with redis:\/\//);
    expect(failure(() => parse("redis://h:0")).message).toMatch(/port 0/);
  });

  test("a password both in the URL and in a file is refused; a missing or empty file is named", () => {
    const dir = mkdtempSync(join(tmpdir(), "mailsend-redis-cfg-"));
    writeFileSync(join(dir, "pw"), "x");
    writeFileSync(join(dir, "empty"), "");
    expect(
      failure(() => parse("redis://:a@h", { MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "pw") })).message,
    ).toMatch(/both/);
    expect(failure(() => parse("redis://h", { MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "nope") })).message).toMatch(
      /nope.*cannot be read \(ENOENT\)/,
    );
    expect(
      failure(() => parse("redis://h", { MAILSEND_RATE_LIMIT_PASSWORD_FILE: join(dir, "empty") })).message,
    ).toMatch(/empty/);
  });
});

describe("stripUserinfo", () => {
  test("removes user and password from URLs in a text, whatever they hold", () => {
    expect(stripUserinfo("redis://user:secret@host:6379/0")).toBe("redis://host:6379/0");
    expect(stripUserinfo("at rediss://:secret@h and http://u@p/x")).toBe("at rediss://h and http://p/x");
    expect(stripUserinfo("redis://:p@ss/w:rd@host:1")).toBe("redis://host:1");
    expect(stripUserinfo("socks5://u:p@127.0.0.1:1080")).toBe("socks5://127.0.0.1:1080");
  });

  test("leaves URLs without userinfo alone, an @ in a path or query included", () => {
    expect(stripUserinfo("https://api.example.com/send")).toBe("https://api.example.com/send");
    expect(stripUserinfo("https://host/users/a@b.c?x=1")).toBe("https://host/users/a@b.c?x=1");
    expect(stripUserinfo("mail a@b.c please")).toBe("mail a@b.c please");
  });
});
