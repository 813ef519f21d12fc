/**
 * A program started without the user's environment (cron, PHP-FPM, a service calling sendmail)
 * gets every setting from the config file of the user it runs as: here the shared budget's Redis
 * (a real redis-server with a password, the password in a file the profile names), a private CA
 * (the sandbox's, for SMTP over STARTTLS) and the rest, with nothing but PATH and HOME in the
 * environment. The profile's paths are relative to the config file. A URL with a password in it
 * is refused by `config set`, without repeating the password.
 */
import { execa } from "execa";
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTls } from "../../src/sandbox/tls.js";
import { BIN, mailsendCommand } from "../helpers/cli.js";
import { startRedis, type RedisHandle } from "../helpers/redis.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";

const PASSWORD = "profile-redis-secret-4";
let t: TestSandbox;
let s: Scratch;
let redis: RedisHandle;
let home: string;
let sendmail: string;

/** The budget's keys in Redis (an inline command on a raw connection: no client library needed). */
function budgetKeys(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = connect(port, "127.0.0.1");
    let got = "";
    const timer = setTimeout(
      () => (c.destroy(), reject(new Error(`redis answered only ${JSON.stringify(got)}`))),
      5_000,
    );
    c.on("error", reject);
    c.on("data", (d) => {
      got += d;
      // +OK for AUTH, then the KEYS array: its header and as many entries as it says.
      const m = /\*(\d+)\r\n/.exec(got);
      if (m && got.split("\r\n").filter((l) => l.startsWith("$")).length >= Number(m[1])) {
        clearTimeout(timer);
        c.end();
        resolve(got);
      }
    });
    c.write(`AUTH ${PASSWORD}\r\nKEYS *\r\n`);
  });
}

/** Only what cron gives a job. */
const daemonEnv = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home });

useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-profile-daemon-");
  home = join(s.dir, "home");
  const conf = join(home, ".config", "mailsend");
  mkdirSync(conf, { recursive: true });
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  symlinkSync(BIN, sendmail);
  if (redisServer.present) redis = await startRedis({ password: PASSWORD });
  writeFileSync(join(conf, "key"), `${t.key}\n`, { mode: 0o600 });
  writeFileSync(join(conf, "redis-password"), `${PASSWORD}\n`, { mode: 0o600 });
  copyFileSync(t.env.NODE_EXTRA_CA_CERTS!, join(conf, "ca.pem"));
  const profile = {
    transport: "smtp",
    smtp_host: t.env.MAILSEND_SMTP_HOST,
    smtp_port: Number(t.env.MAILSEND_SMTP_PORT),
    smtp_tls: "starttls",
    base_url: t.env.MAILSEND_BASE_URL,
    from: "cron@example.com",
    api_key_file: "key",
    ca_file: "ca.pem",
    rate_limit: 60,
    rate_limit_url: `redis://127.0.0.1:${redis?.port ?? 1}`,
    rate_limit_password_file: "redis-password",
  };
  writeFileSync(join(conf, "config.json"), JSON.stringify({ profiles: { default: profile } }, null, 2), {
    mode: 0o600,
  });
});
afterAll(async () => {
  await redis?.stop();
  s?.remove();
});

describe.skipIf(lacks(redisServer))("a daemon's sendmail with nothing but its user's config file", () => {
  it("sendmail -t goes over SMTP trusting the profile's ca_file, within the budget kept in the profile's Redis", async () => {
    const message = "To: ops@example.com\nSubject: nightly backup done\n\nall good\n";
    const r = await execa(sendmail, ["-t", "-i"], {
      env: daemonEnv(),
      extendEnv: false,
      input: message,
      reject: false,
      timeout: 60_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/queued/);
    const stored = (await t.sb.store.list({ limit: 100 })).filter((m) => m.subject === "nightly backup done");
    expect(stored.map((m) => m.channel)).toEqual(["smtp"]);
    // The budget was taken in Redis (the file store would have left Redis empty).
    expect(await budgetKeys(redis.port)).toMatch(/mailsend/);
  });

  it("a profile's ca_file adds to the CAs NODE_EXTRA_CA_CERTS gives, it does not replace them", async () => {
    // Another user's config: ca_file names a CA that has nothing to do with the SMTP server; the
    // environment trusts the server's own CA (the sandbox's) through NODE_EXTRA_CA_CERTS.
    const other = await ensureTls(join(s.dir, "other-ca"), ["redis.example.test"]);
    const config = join(s.dir, "other-config.json");
    writeFileSync(config, JSON.stringify({ profiles: { default: { ca_file: other.caPath } } }));
    const r = await execa(
      ...mailsendCommand([
        "send",
        "--transport",
        "smtp",
        "-f",
        "ci@example.com",
        "-t",
        "dev@example.com",
        "-s",
        "ca both",
        "--text",
        "x",
      ]),
      {
        env: {
          ...daemonEnv(),
          ...t.env,
          MAILSEND_CONFIG: config,
          MAILSEND_STATE_DIR: join(s.dir, "state-ca"),
          MAILSEND_RATE_LIMIT: "0",
        },
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
  });

  it("config set refuses a Redis or proxy URL with a password in it (64), and says so without repeating it", async () => {
    for (const [name, value, said] of [
      ["rate_limit_url", "redis://:leaky-pass-1@127.0.0.1:6379", "rate_limit_url must not hold a password"],
      // A bare user part is the password when no password file is set (as redis-cli reads it).
      [
        "rate_limit_url",
        "redis://leaky-pass-3@127.0.0.1:6379",
        "rate_limit_url has a user part and there is no rate_limit_password_file",
      ],
      ["proxy", "http://alice:leaky-pass-2@proxy.example:3128", "proxy must not hold a password"],
    ] as const) {
      const r = await execa(...mailsendCommand(["config", "set", "--profile", "fresh", name, value]), {
        env: daemonEnv(),
        extendEnv: false,
        reject: false,
        timeout: 30_000,
      });
      expect(r.exitCode, `${name}: ${r.stderr}`).toBe(64);
      expect(r.stderr).toContain(said);
      expect(`${r.stdout}${r.stderr}`).not.toMatch(/leaky-pass/);
    }
    // A proxy without credentials is taken.
    const ok = await execa(...mailsendCommand(["config", "set", "--profile", "other", "proxy", "proxy.example:3128"]), {
      env: daemonEnv(),
      extendEnv: false,
      reject: false,
      timeout: 30_000,
    });
    expect(ok.exitCode, ok.stderr).toBe(0);
  });
});
