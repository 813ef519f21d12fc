/**
 * Keys and secrets on the command line: --api-key, --key, --token,
 * --password (with a space or "=") are refused with where a key goes, and no
 * error repeats the value of an unknown --opt=value, nor a key pasted as
 * another option's argument; --json and the ::error annotation neither.
 * And `~` at the start of MAILSEND_API_KEY_FILE, MAILSEND_STATE_DIR and the
 * Redis password files is the home directory, as a shell would have made it.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { runCli, runInProcess, type CliResult } from "../helpers/cli.js";
import { startRedis, type RedisHandle } from "../helpers/redis.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";

const VALUE = "msk_live_Zq81vPl0Xw4Rt7Yu";
const MSG = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi", "--text", "x"];

const tmp = scratch("mailsend-secrets-");
let rec: RestRecorder;
beforeAll(async () => {
  rec = await startRestRecorder();
});
afterAll(async () => {
  await rec?.close();
  tmp.remove();
});
beforeEach(() => rec.reset());

function env(extra: Record<string, string | undefined> = {}) {
  return { MAILSEND_API_KEY: "msk_test_env_key_1234", MAILSEND_BASE_URL: rec.url, ...extra };
}

function expectNoValue(r: CliResult, value = VALUE) {
  for (const part of [value, value.slice(0, 12), value.slice(-12)]) {
    expect(r.stdout, `stdout repeats ${part}`).not.toContain(part);
    expect(r.stderr, `stderr repeats ${part}`).not.toContain(part);
  }
}

describe("a key given as an option is refused, saying where it goes", () => {
  const forms = ["--api-key", "--key", "--token", "--password", "--apikey", "--API_KEY"].flatMap((flag) => [
    [flag, VALUE],
    [`${flag}=${VALUE}`],
  ]);
  test.each(forms.map((f) => [f.join(" "), f] as const))(
    "send %s: 64, nothing sent, the value never shown",
    async (_name, words) => {
      const r = await runInProcess(["send", ...MSG, ...words], { env: env() });
      expect(r.exitCode).toBe(64);
      const flag = words[0]!.split("=")[0]!;
      expect(r.stderr).toContain(`error: ${flag} is not an option: mailsend never takes a key`);
      expect(r.stderr).toMatch(/MAILSEND_API_KEY\b.*MAILSEND_API_KEY_FILE.*--api-key-stdin/);
      expectNoValue(r);
      expect(rec.requests).toHaveLength(0);
    },
  );

  test("--json and GitHub Actions: the error object and the ::error annotation do not hold the value either", async () => {
    for (const argv of [
      ["send", "--json", ...MSG, `--api-key=${VALUE}`],
      ["batch", "items.jsonl", "--token", VALUE, "--json"],
      ["doctor", "--password", VALUE],
    ]) {
      const r = await runInProcess(argv, { env: env({ GITHUB_ACTIONS: "true" }) });
      expect(r.exitCode, argv.join(" ")).toBe(64);
      expect(r.stderr).toMatch(/::error title=mailsend::--(api-key|token|password) is not an option/);
      expectNoValue(r);
    }
    const j = await runInProcess(["send", "--json", ...MSG, `--api-key=${VALUE}`], { env: env() });
    expect(JSON.parse(j.stderr.trim()).error).toMatchObject({ code: "usage", exit: 64 });
  });

  test("--password names the SMTP and Redis ways too", async () => {
    const r = await runInProcess(["send", ...MSG, "--transport", "smtp", "--password", VALUE], { env: env() });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/Over SMTP the key is the password/);
    expect(r.stderr).toMatch(/MAILSEND_RATE_LIMIT_PASSWORD_FILE/);
    expectNoValue(r);
  });

  test("options that only look alike are not refused: --idempotency-key, --api-key-stdin; after -- a word is no option", async () => {
    const a = await runInProcess(["send", ...MSG, "--idempotency-key", "run-42-item-1"], { env: env() });
    expect(a.exitCode, a.stderr).toBe(0);
    const b = await runInProcess(["send", ...MSG, "--api-key-stdin"], {
      env: env({ MAILSEND_API_KEY: undefined }),
      input: "msk_test_stdin_key_99\n",
    });
    expect(b.exitCode, b.stderr).toBe(0);
    expect(rec.requests.map((q) => q.headers.authorization)).toEqual([
      "Bearer msk_test_env_key_1234",
      "Bearer msk_test_stdin_key_99",
    ]);
    const c = await runInProcess(["send", ...MSG, "--", "--api-key"], { env: env() });
    expect(c.exitCode).toBe(64);
    expect(c.stderr).not.toMatch(/is not an option/);
  });
});

describe("no error repeats the value of an unknown --opt=value", () => {
  test.each([
    ["send", ["send", ...MSG, `--tiemout=${VALUE}`]],
    ["send (a short value)", ["send", ...MSG, "--colour=sk-9Ab"]],
    ["batch", ["batch", "x.jsonl", `--concurency=${VALUE}`]],
    ["doctor", ["doctor", `--bse-url=${VALUE}`]],
    ["the program", [`--verbos=${VALUE}`, "send"]],
  ] as const)("%s", async (_name, argv) => {
    for (const json of [false, true]) {
      const r = await runInProcess(json ? [...argv, "--json"] : [...argv], { env: env({ GITHUB_ACTIONS: "true" }) });
      expect(r.exitCode).toBe(64);
      expect(r.stderr).toMatch(/unknown option '--[\w-]+=…' \(the value is not shown\)/);
      expectNoValue(r, argv.find((a) => a.includes("="))!.split("=")[1]!);
    }
  });

  test("a key pasted as another option's value (--timeout KEY) is not repeated; a typo (--timeout 3O) still is", async () => {
    const r = await runInProcess(["send", ...MSG, "--timeout", VALUE], { env: env() });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/option '--timeout <seconds>' argument \(\d+ characters, not shown\) is invalid/);
    expectNoValue(r);
    const t = await runInProcess(["send", ...MSG, "--timeout", "3O"], { env: env() });
    expect(t.exitCode).toBe(64);
    expect(t.stderr).toContain("argument '3O' is invalid");
  });
});

describe("a key pasted onto the command line as a bare word", () => {
  test("is not repeated by the stray-word message; a commit SHA after -s still is, with the quoted form", async () => {
    for (const argv of [
      ["send", ...MSG, VALUE],
      [
        "send",
        "-f",
        "a@example.com",
        "-t",
        "b@example.com",
        "-s",
        "deploy",
        "Zq81vPl0Xw4Rt7YuA9b8C7d6E5f4",
        "--text",
        "x",
      ],
    ]) {
      const r = await runInProcess(argv, { env: env({ GITHUB_ACTIONS: "true" }) });
      expect(r.exitCode).toBe(64);
      expect(r.stderr).toMatch(/unexpected argument \(\d+ characters, not shown: it looks like a key\)/);
      expect(r.stderr).toContain("MAILSEND_API_KEY_FILE");
      expectNoValue(r, argv.find((a) => a === VALUE || a.startsWith("Zq81"))!);
    }
    const sha = "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a";
    const r = await runInProcess(
      ["send", "-f", "a@example.com", "-t", "b@example.com", "-s", "Build", sha, "--text", "x"],
      { env: env() },
    );
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toContain(`-s 'Build ${sha}'`);
    expect(rec.requests).toHaveLength(0);
  });
});

describe("the key as the SMTP username (over SMTP the key is the password)", () => {
  test("refused before anything is sent (78), never repeated; a dry run shows no key-like username", async () => {
    const key = "msk_test_env_key_1234";
    for (const extra of [{ MAILSEND_SMTP_USER: key }, {}]) {
      const args = [
        "send",
        ...MSG,
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        "9",
        ...(Object.keys(extra).length ? [] : ["--smtp-user", key]),
      ];
      const r = await runInProcess(args, { env: env(extra) });
      expect(r.exitCode, r.stderr).toBe(78);
      expect(r.stderr).toMatch(/the SMTP username is the API key itself \((MAILSEND_SMTP_USER|--smtp-user)/);
      expectNoValue(r, key);
    }
    // --transport auto resolves the channels before the key: checked all the same once SMTP is chosen (a cc), in send and batch.
    const auto = await runInProcess(
      ["send", ...MSG, "--cc", "c@example.com", "--transport", "auto", "--smtp-host", "127.0.0.1", "--smtp-port", "9"],
      { env: env({ MAILSEND_SMTP_USER: key }) },
    );
    expect(auto.exitCode, auto.stderr).toBe(78);
    expect(auto.stderr).toMatch(/the SMTP username is the API key itself/);
    expectNoValue(auto, key);
    const rows = join(tmp.dir, "user-is-key.jsonl");
    writeFileSync(
      rows,
      `${JSON.stringify({ from: "a@example.com", to: "b@example.com", cc: "c@example.com", subject: "s", text: "x" })}\n`,
    );
    const batch = await runInProcess(
      [
        "batch",
        rows,
        "--transport",
        "auto",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        "9",
        "--journal",
        join(tmp.dir, "user-is-key.journal"),
      ],
      { env: env({ MAILSEND_SMTP_USER: key }) },
    );
    expect(batch.exitCode, batch.stderr).toBe(78);
    expectNoValue(batch, key);
    expect(rec.requests).toHaveLength(0);
    const dry = await runInProcess(["send", ...MSG, "--transport", "smtp", "--smtp-host", "127.0.0.1", "--dry-run"], {
      env: env({ MAILSEND_SMTP_USER: VALUE }),
    });
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/AUTH as \[redacted\] \(\d+ characters: it looks like a key\)/);
    expectNoValue(dry);
  });
});

describe("a key typed where an id goes", () => {
  test("queue rm and inbox show do not repeat it", async () => {
    for (const args of [
      ["queue", "rm", VALUE],
      ["inbox", "show", VALUE, "--dir", join(tmp.dir, "no-sandbox")],
    ]) {
      const r = await runInProcess(args, { env: env({ MAILSEND_STATE_DIR: join(tmp.dir, "state-ids") }) });
      expect(r.exitCode, args.join(" ")).not.toBe(0);
      expectNoValue(r);
    }
  });
});

describe("~ at the start of a path variable is the home directory", () => {
  const home = join(tmp.dir, "home");
  beforeAll(() => {
    mkdirSync(home, { recursive: true });
    tmp.file("home/mailsend-key", "msk_test_from_tilde_file\n");
  });

  test("MAILSEND_API_KEY_FILE=~/… and MAILSEND_STATE_DIR=~/…", async () => {
    const r = await runCli(["send", ...MSG], {
      cwd: tmp.dir,
      env: env({
        HOME: home,
        MAILSEND_API_KEY: undefined,
        MAILSEND_API_KEY_FILE: "~/mailsend-key",
        MAILSEND_STATE_DIR: "~/state",
        MAILSEND_RATE_LIMIT: "60",
      }),
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests[0]!.headers.authorization).toBe("Bearer msk_test_from_tilde_file");
    // The budget's state went to $HOME/state, not to a directory named "~" here.
    expect(readdirSync(join(home, "state")).length).toBeGreaterThan(0);
    expect(existsSync(join(tmp.dir, "~"))).toBe(false);
  });

  test("a missing ~/ file is named as expanded", async () => {
    const r = await runInProcess(["send", ...MSG], {
      env: env({ HOME: home, MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: "~/no-such-key" }),
    });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toContain(join(home, "no-such-key"));
  });

  describe.skipIf(lacks(redisServer))("MAILSEND_RATE_LIMIT_PASSWORD_FILE=~/…", () => {
    let redis: RedisHandle;
    beforeAll(async () => {
      redis = await startRedis({ password: "tilde-redis-secret" });
      tmp.file("home/redis-password", "tilde-redis-secret\n");
    });
    afterAll(async () => {
      await redis?.stop();
    });
    test("the password is read from the home directory", async () => {
      const r = await runInProcess(["send", ...MSG], {
        env: env({
          HOME: home,
          MAILSEND_RATE_LIMIT: "60",
          MAILSEND_RATE_LIMIT_URL: redis.url,
          MAILSEND_RATE_LIMIT_PASSWORD_FILE: "~/redis-password",
        }),
      });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(rec.requests).toHaveLength(1);
    });
  });
});
