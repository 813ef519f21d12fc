/**
 * Profiles, end to end: the built binary with a config file in a scratch
 * dir (never the developer's), against REST recorders. Precedence is
 * flags > environment > profile > defaults, for base URL, transport, sender
 * and key; every bad config names its file and exits 78; `mailsend config`
 * edits the file atomically with private permissions.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, stderrJson, stdoutJson, type RunOptions } from "../helpers/cli.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const PROFILE_KEY = "msk_test_e2e_profile_Zq81Lm";
const ENV_KEY = "msk_test_e2e_env_Pw44Rt";
const tmp = scratch();
let recProfile: RestRecorder;
let recEnv: RestRecorder;
let recFlag: RestRecorder;

beforeAll(async () => {
  [recProfile, recEnv, recFlag] = await Promise.all([startRestRecorder(), startRestRecorder(), startRestRecorder()]);
});
afterAll(async () => {
  await Promise.all([recProfile.close(), recEnv.close(), recFlag.close()]);
  tmp.remove();
});
beforeEach(() => {
  recProfile.reset();
  recEnv.reset();
  recFlag.reset();
});

let n = 0;
function writeConfig(content: unknown): string {
  const dir = join(tmp.dir, `cfg-${++n}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "config.json");
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content, null, 2));
  return path;
}

function standard(): string {
  return writeConfig({
    profile: "work",
    profiles: {
      work: {
        base_url: recProfile.url,
        from: "profile@example.com",
        name: "Profile Sender",
        api_key_env: "WORK_MAILSEND_KEY",
      },
      smtpish: {
        transport: "smtp",
        smtp_host: "smtp.profile.example",
        smtp_port: 465,
        from: "smtp-profile@example.com",
      },
    },
  });
}

const MSG = ["-t", "to@example.com", "-s", "Hi", "--text", "hello"];

function send(config: string, args: string[], opts: RunOptions = {}) {
  return runInProcess(["send", ...args], {
    ...opts,
    env: { MAILSEND_CONFIG: config, WORK_MAILSEND_KEY: PROFILE_KEY, ...opts.env },
  });
}

describe("precedence: flags > environment > profile > defaults", () => {
  it("defaults: no profile, no environment: transport rest, and no base URL is a config error", async () => {
    const r = await send(
      writeConfig({ profiles: { other: { base_url: recProfile.url } } }),
      [...MSG, "-f", "a@example.com"],
      { env: { MAILSEND_API_KEY: ENV_KEY } },
    );
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/no REST base URL/);
  });

  it("the profile: base URL, sender (with its display name) and key", async () => {
    const r = await send(standard(), MSG);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(recProfile.requests).toHaveLength(1);
    const req = recProfile.requests[0]!;
    expect(req.headers.authorization).toBe(`Bearer ${PROFILE_KEY}`);
    expect(req.json).toMatchObject({ from: "profile@example.com", name: "Profile Sender" });
  });

  it("the environment beats the profile: base URL, sender (without the profile's name) and key", async () => {
    const r = await send(standard(), MSG, {
      env: { MAILSEND_BASE_URL: recEnv.url, MAILSEND_FROM: "env@example.com", MAILSEND_API_KEY: ENV_KEY },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(recProfile.requests).toHaveLength(0);
    const req = recEnv.requests[0]!;
    expect(req.headers.authorization).toBe(`Bearer ${ENV_KEY}`);
    expect(req.json.from).toBe("env@example.com");
    expect(req.json).not.toHaveProperty("name");
  });

  it("flags beat the environment: base URL and sender", async () => {
    const r = await send(standard(), [...MSG, "--base-url", recFlag.url, "--from", "Flag <flag@example.com>"], {
      env: { MAILSEND_BASE_URL: recEnv.url, MAILSEND_FROM: "env@example.com" },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(recEnv.requests).toHaveLength(0);
    expect(recFlag.requests[0]!.json).toMatchObject({ from: "flag@example.com", name: "Flag" });
  });

  it("transport: the profile's smtp beats the default; the environment's rest beats the profile; a flag beats both", async () => {
    const config = standard();
    const viaProfile = await send(config, [...MSG, "--profile", "smtpish", "--dry-run"]);
    expect(viaProfile.exitCode, viaProfile.stderr).toBe(0);
    expect(viaProfile.stdout).toMatch(/^# SMTP smtp\.profile\.example:465 \(implicit TLS\)/);
    expect(viaProfile.stdout).toMatch(/^MAIL FROM:<smtp-profile@example\.com>/m);

    const viaEnv = await send(config, [...MSG, "--profile", "smtpish"], {
      env: { MAILSEND_TRANSPORT: "rest", MAILSEND_BASE_URL: recEnv.url, MAILSEND_API_KEY: ENV_KEY },
    });
    expect(viaEnv.exitCode, viaEnv.stderr).toBe(0);
    expect(recEnv.requests).toHaveLength(1);
    expect(recEnv.requests[0]!.json.from).toBe("smtp-profile@example.com");

    const viaFlag = await send(config, [...MSG, "--profile", "smtpish", "--transport", "smtp", "--dry-run"], {
      env: { MAILSEND_TRANSPORT: "rest" },
    });
    expect(viaFlag.stdout).toMatch(/^# SMTP smtp\.profile\.example:465/);
  });

  it("the profile used: --profile beats MAILSEND_PROFILE, which beats the file's default, then one named default", async () => {
    const config = writeConfig({
      profile: "a",
      profiles: { a: { base_url: recProfile.url }, b: { base_url: recEnv.url }, c: { base_url: recFlag.url } },
    });
    const env = { MAILSEND_API_KEY: ENV_KEY };
    await send(config, [...MSG, "-f", "x@example.com"], { env });
    await send(config, [...MSG, "-f", "x@example.com"], { env: { ...env, MAILSEND_PROFILE: "b" } });
    await send(config, [...MSG, "-f", "x@example.com", "--profile", "c"], { env: { ...env, MAILSEND_PROFILE: "b" } });
    expect([recProfile.requests.length, recEnv.requests.length, recFlag.requests.length]).toEqual([1, 1, 1]);
    const named = writeConfig({ profiles: { default: { base_url: recProfile.url } } });
    expect((await send(named, [...MSG, "-f", "x@example.com"], { env })).exitCode).toBe(0);
    expect(recProfile.requests).toHaveLength(2);
  });

  it("batch uses the profile too: base URL, sender and key", async () => {
    const input = tmp.file(
      "rows.jsonl",
      '{"to":"r1@example.com","subject":"one","text":"1"}\n{"to":"r2@example.com","subject":"two","text":"2"}\n',
    );
    const r = await runInProcess(["batch", input, "--results", join(tmp.dir, "rows-results.jsonl")], {
      env: { MAILSEND_CONFIG: standard(), WORK_MAILSEND_KEY: PROFILE_KEY },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(recProfile.requests).toHaveLength(2);
    for (const req of recProfile.requests) {
      expect(req.headers.authorization).toBe(`Bearer ${PROFILE_KEY}`);
      expect(req.json).toMatchObject({ from: "profile@example.com", name: "Profile Sender" });
    }
  });

  it("the file is found under XDG_CONFIG_HOME, else ~/.config", async () => {
    const xdg = join(tmp.dir, "xdg");
    mkdirSync(join(xdg, "mailsend"), { recursive: true });
    writeFileSync(
      join(xdg, "mailsend", "config.json"),
      JSON.stringify({ profiles: { default: { base_url: recProfile.url } } }),
    );
    const home = join(tmp.dir, "home");
    mkdirSync(join(home, ".config", "mailsend"), { recursive: true });
    writeFileSync(
      join(home, ".config", "mailsend", "config.json"),
      JSON.stringify({ profiles: { default: { base_url: recEnv.url } } }),
    );
    const base = { MAILSEND_CONFIG: undefined, MAILSEND_API_KEY: ENV_KEY, HOME: home };
    expect(
      (await runInProcess(["send", ...MSG, "-f", "x@example.com"], { env: { ...base, XDG_CONFIG_HOME: xdg } }))
        .exitCode,
    ).toBe(0);
    expect(
      (await runInProcess(["send", ...MSG, "-f", "x@example.com"], { env: { ...base, XDG_CONFIG_HOME: undefined } }))
        .exitCode,
    ).toBe(0);
    expect([recProfile.requests.length, recEnv.requests.length]).toEqual([1, 1]);
    const path = await runInProcess(["config", "path"], { env: { ...base, XDG_CONFIG_HOME: xdg } });
    expect(path.stdout).toBe(`${join(xdg, "mailsend", "config.json")}\n`);
  });
});

describe("a bad config: exit 78, naming the file", () => {
  async function fails(
    config: string,
    args: string[] = [...MSG, "-f", "x@example.com"],
    env: Record<string, string> = {},
  ) {
    const r = await send(config, args, { env: { MAILSEND_API_KEY: ENV_KEY, ...env } });
    expect(r.exitCode, r.stderr).toBe(78);
    expect(recProfile.requests).toHaveLength(0);
    expect(r.stderr).not.toContain(ENV_KEY);
    expect(r.stderr).not.toContain(PROFILE_KEY);
    return r;
  }

  it("not JSON: the file, line and column", async () => {
    const config = writeConfig(
      '{\n  "profiles": {\n    "work": { "base_url": "https://x.example" }\n    "home": {}\n  }\n}\n',
    );
    const r = await fails(config);
    expect(r.stderr).toContain(
      `error: ${config}:4:5: not valid JSON: expected "," or "}" after a property value, found "\\""`,
    );
  });

  it("not JSON, under --json: the same message in the error object", async () => {
    const config = writeConfig("{ profiles: {} }");
    const r = await fails(config, [...MSG, "-f", "x@example.com", "--json"]);
    expect(stderrJson(r).error).toMatchObject({
      code: "config_invalid",
      exit: 78,
      message: `${config}:1:3: not valid JSON: expected a property name in double quotes, found "p"`,
    });
  });

  it("unknown keys: each named with its line, and the file", async () => {
    const config = writeConfig(
      '{\n  "profiles": {\n    "work": {\n      "base_url": "https://x.example",\n      "smtp_hots": "x",\n      "form": "a@example.com"\n    }\n  }\n}\n',
    );
    const r = await fails(config);
    expect(r.stderr).toContain(`${config}:5:7: profile "work": unknown keys "smtp_hots" (line 5), "form" (line 6)`);
    expect(r.stderr).toMatch(/hint: A profile may hold: .*smtp_host/);
  });

  it("a key in the profile: refused, and its value is never printed", async () => {
    const config = writeConfig({ profiles: { work: { base_url: recProfile.url, api_key: PROFILE_KEY } } });
    const r = await fails(config);
    expect(r.stderr).toContain(config);
    expect(r.stderr).toMatch(/api_key: a profile must not hold an API key/);
    expect(r.stderr).toMatch(/api_key_env/);
  });

  it("a profile naming a missing environment variable", async () => {
    const config = writeConfig({
      profiles: { default: { base_url: recProfile.url, api_key_env: "NOT_SET_ANYWHERE" } },
    });
    const r = await fails(config, [...MSG, "-f", "x@example.com"], { MAILSEND_API_KEY: "" });
    expect(r.stderr).toContain(
      `error: profile "default" (${config}) takes the API key from $NOT_SET_ANYWHERE, which is not set`,
    );
  });

  it("a profile naming a key file that cannot be read (missing, a directory)", async () => {
    const missing = writeConfig({ profiles: { default: { base_url: recProfile.url, api_key_file: "./no-such-key" } } });
    const r1 = await fails(missing, [...MSG, "-f", "x@example.com"], { MAILSEND_API_KEY: "" });
    expect(r1.stderr).toContain(
      `takes the API key from ${join(missing, "..", "no-such-key")}, which cannot be read (it does not exist)`,
    );
    const dir = writeConfig({ profiles: { default: { base_url: recProfile.url, api_key_file: tmp.dir } } });
    const r2 = await fails(dir, [...MSG, "-f", "x@example.com"], { MAILSEND_API_KEY: "" });
    expect(r2.stderr).toMatch(/which cannot be read \(it is a directory\)/);
    expect(r2.stderr).toContain(dir);
  });

  it("--profile or MAILSEND_PROFILE naming a profile that is not there: the ones that are", async () => {
    const config = standard();
    const r = await fails(config, [...MSG, "--profile", "wrok"]);
    expect(r.stderr).toContain(`error: no profile "wrok" (from --profile) in ${config}`);
    expect(r.stderr).toContain("Profiles there: work, smtpish.");
    const e = await fails(config, MSG, { MAILSEND_PROFILE: "home" });
    expect(e.stderr).toMatch(/no profile "home" \(from MAILSEND_PROFILE\)/);
    const none = await fails(join(tmp.dir, "absent", "config.json"), [...MSG, "--profile", "work"]);
    expect(none.stderr).toMatch(
      /no profile "work" \(from --profile\): there is no config file at .*absent\/config\.json/,
    );
  });

  it("a value of the wrong type: the file, line and key", async () => {
    const config = writeConfig('{"profiles": {"work": {\n  "smtp_port": "587"\n}}}');
    const r = await fails(config);
    expect(r.stderr).toContain(`${config}:2:3: profile "work": smtp_port must be a whole number from 1 to 65535`);
  });

  it("a config file that cannot be read", async () => {
    const dir = join(tmp.dir, "is-a-dir.json");
    mkdirSync(dir);
    const r = await fails(dir);
    expect(r.stderr).toContain(`cannot read the config file ${dir} (it is a directory)`);
  });

  it("with GITHUB_ACTIONS=true, also as an ::error annotation", async () => {
    const config = writeConfig('{"profiles": {"work": {"colour": "x"}}}');
    const r = await fails(config, [...MSG, "-f", "x@example.com"], { GITHUB_ACTIONS: "true" });
    expect(r.stderr).toContain(
      `::error title=mailsend::${config}:1:24: profile "work": unknown key "colour" (line 1)%0AA profile may hold:`,
    );
  });
});

describe("mailsend config", () => {
  function config(args: string[], path: string, opts: RunOptions = {}) {
    return runInProcess(["config", ...args], { ...opts, env: { MAILSEND_CONFIG: path, ...opts.env } });
  }

  it("set creates the directory (0700) and the file (0600) atomically; get and list read it back", async () => {
    const dir = join(tmp.dir, "fresh", "mailsend");
    const path = join(dir, "config.json");
    for (const args of [
      ["set", "--profile", "work", "base_url", "https://api.example.com"],
      ["set", "--profile", "work", "api_key_env", "WORK_MAILSEND_KEY"],
      ["set", "--profile", "work", "smtp_port", "465"],
      ["set", "--profile", "work", "from", "CI <ci@example.com>"],
      ["--profile", "home", "set", "transport", "smtp"],
      ["set", "profile", "work"],
    ]) {
      const r = await config(args, path);
      expect(r.exitCode, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toBe("");
    }
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["config.json"]);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({
      profiles: {
        work: {
          base_url: "https://api.example.com",
          api_key_env: "WORK_MAILSEND_KEY",
          smtp_port: 465,
          from: "CI <ci@example.com>",
        },
        home: { transport: "smtp" },
      },
      profile: "work",
    });

    expect((await config(["path"], path)).stdout).toBe(`${path}\n`);
    expect((await config(["get", "base_url"], path)).stdout).toBe("https://api.example.com\n");
    expect((await config(["get", "smtp_port", "--profile", "work"], path)).stdout).toBe("465\n");
    expect((await config(["get", "transport"], path, { env: { MAILSEND_PROFILE: "home" } })).stdout).toBe("smtp\n");
    expect((await config(["get", "profile"], path)).stdout).toBe("work\n");
    expect(stdoutJson(await config(["get", "smtp_port", "--json"], path))).toEqual({ key: "smtp_port", value: 465 });
    const unsetKey = await config(["get", "smtp_host"], path);
    expect(unsetKey.exitCode).toBe(1);
    expect(unsetKey.stdout).toBe("");
    expect(unsetKey.stderr).toMatch(/smtp_host is not set in profile "work"/);

    const list = await config(["list"], path);
    expect(list.exitCode).toBe(0);
    expect(list.stdout).toBe(
      [
        "profile=work",
        "work.base_url=https://api.example.com",
        "work.api_key_env=WORK_MAILSEND_KEY",
        "work.smtp_port=465",
        "work.from=CI <ci@example.com>",
        "home.transport=smtp",
        "",
      ].join("\n"),
    );
    expect((await config(["list", "--profile", "home"], path)).stdout).toBe("transport=smtp\n");
    expect(stdoutJson(await config(["list", "--json"], path))).toMatchObject({
      path,
      exists: true,
      profile: "work",
      profiles: { home: { transport: "smtp" } },
    });

    // A profile made with config set works for a send.
    const sent = await runInProcess(
      ["send", "-t", "to@example.com", "-s", "Hi", "--text", "x", "--base-url", recFlag.url],
      {
        env: { MAILSEND_CONFIG: path, WORK_MAILSEND_KEY: PROFILE_KEY },
      },
    );
    expect(sent.exitCode, sent.stderr).toBe(0);
    expect(recFlag.requests[0]!.json).toMatchObject({ from: "ci@example.com", name: "CI" });
    expect(recFlag.requests[0]!.headers.authorization).toBe(`Bearer ${PROFILE_KEY}`);
  });

  it("set never stores a key: a key-like setting is refused (64) without echoing the value", async () => {
    const path = join(tmp.dir, "nokey", "config.json");
    for (const key of ["api_key", "password", "token"]) {
      const r = await config(["set", key, PROFILE_KEY], path);
      expect(r.exitCode).toBe(64);
      expect(r.stderr).toMatch(/never holds an API key/);
      expect(r.stderr).toMatch(/shell history/);
      expect(r.stderr + r.stdout).not.toContain(PROFILE_KEY);
    }
    // The key typed where a setting's name goes, or as the SMTP username: refused, never repeated.
    for (const args of [
      ["get", PROFILE_KEY],
      ["set", PROFILE_KEY, "1"],
      ["unset", PROFILE_KEY],
      ["set", "smtp_user", PROFILE_KEY],
    ]) {
      const r = await config(args, path);
      expect(r.exitCode, args.join(" ")).toBe(64);
      expect(r.stderr).toMatch(/never holds an API key/);
      expect(r.stderr + r.stdout).not.toContain(PROFILE_KEY);
    }
    // A name with "key" inside a word is a typo, not a key field.
    const typo = await config(["set", "nosuchkey", "1"], path);
    expect(typo.exitCode).toBe(64);
    expect(typo.stderr).toMatch(/unknown setting "nosuchkey"/);
    const value = await config(["set", "api_key_env", PROFILE_KEY], path);
    expect(value.exitCode).toBe(64);
    expect(value.stderr).toMatch(/NAME of an environment variable/);
    expect(value.stderr).not.toContain(PROFILE_KEY);
    expect(existsSync(path)).toBe(false);
  });

  it("set checks values and keys (64), and a key location replaces the other", async () => {
    const path = writeConfig({ profiles: { default: { api_key_file: "~/.k" } } });
    expect((await config(["set", "smtp_port", "99999"], path)).exitCode).toBe(64);
    expect((await config(["set", "transport", "fax"], path)).stderr).toMatch(/transport must be rest or smtp/);
    const unknown = await config(["set", "smtp_hots", "x"], path);
    expect(unknown.exitCode).toBe(64);
    expect(unknown.stderr).toMatch(/unknown setting "smtp_hots"/);
    expect((await config(["set", "name", "Ops"], path)).stderr).toMatch(/set from too/);
    expect((await config(["set", "profile", "nope"], path)).stderr).toMatch(/no profile "nope" to make the default/);
    const swap = await config(["set", "api_key_env", "MY_KEY"], path);
    expect(swap.exitCode).toBe(0);
    expect(swap.stderr).toMatch(/removed api_key_file/);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ profiles: { default: { api_key_env: "MY_KEY" } } });
  });

  it("unset removes a setting or the default profile", async () => {
    const path = writeConfig({ profile: "a", profiles: { a: { smtp_host: "h.example", smtp_user: "u" } } });
    expect((await config(["unset", "smtp_user"], path)).exitCode).toBe(0);
    expect((await config(["unset", "profile"], path)).exitCode).toBe(0);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ profiles: { a: { smtp_host: "h.example" } } });
  });

  it("never rewrites a file it cannot read as a config (78, the file unchanged)", async () => {
    const text = '{"profiles": {"a": {}},}';
    const path = writeConfig(text);
    const r = await config(["set", "--profile", "a", "smtp_host", "h.example"], path);
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toContain(`${path}:1:24: not valid JSON: trailing comma before }`);
    expect(readFileSync(path, "utf8")).toBe(text);
    const list = await config(["list"], path);
    expect(list.exitCode).toBe(78);
  });

  it("list of a file that does not exist: nothing, and a note on stderr", async () => {
    const r = await config(["list"], join(tmp.dir, "none", "config.json"));
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/no config file at/);
  });

  it("get for an unknown --profile: 78 with the profiles there are", async () => {
    const r = await config(["get", "base_url", "--profile", "nope"], standard());
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/Profiles there: work, smtpish/);
  });

  // Root writes into a read-only directory anyway.
  it.skipIf(process.getuid?.() === 0)("set fails with 78 when the directory cannot be written", async () => {
    const dir = join(tmp.dir, "ro");
    mkdirSync(dir);
    chmodSync(dir, 0o500);
    const r = await config(["set", "smtp_host", "h.example"], join(dir, "config.json"));
    expect(r.exitCode).toBe(78);
  });
});
