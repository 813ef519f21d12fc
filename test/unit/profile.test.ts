import { readFileSync, statSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { resolveApiKey, resolveTransportConfig } from "../../src/settings/resolve.js";
import { JsonSyntaxError, parseLocatedJson } from "../../src/core/located-json.js";
import {
  checkConfigData,
  configPath,
  layeredEnv,
  loadSettings,
  parseSettingValue,
  PROFILE_SETTINGS,
  readConfigFile,
  readProfileKey,
  selectProfile,
  SETTING_NAMES,
  writeConfigFile,
  type ActiveProfile,
} from "../../src/settings/profile.js";
import { resolveLimits } from "../../src/settings/budget.js";
import { scratch } from "../helpers/tmp.js";
import { failure, failureOf } from "../helpers/failure.js";

const tmp = scratch();
afterAll(() => tmp.remove());

const KEY = "msk_test_unit_profile_7Yx2";

function stdin() {
  const s = Readable.from([]) as Readable & { isTTY?: boolean };
  s.isTTY = false;
  return { stdin: s };
}

function syntaxError(text: string): JsonSyntaxError {
  try {
    parseLocatedJson(text);
  } catch (e) {
    expect(e).toBeInstanceOf(JsonSyntaxError);
    return e as JsonSyntaxError;
  }
  throw new Error("expected a syntax error");
}

let n = 0;
function configFile(content: unknown): string {
  return tmp.file(`config-${++n}.json`, typeof content === "string" ? content : JSON.stringify(content, null, 2));
}

describe("the JSON parser", () => {
  it("parses what JSON.parse parses", () => {
    for (const text of [
      '{"a":[1,-2.5e3,true,false,null,"x\\n\\u00e9"],"b":{}}',
      "[]",
      '"s"',
      "0",
      ' \n {"k" : "v"} \n',
    ]) {
      expect(parseLocatedJson(text).value).toEqual(JSON.parse(text));
    }
  });

  it("knows where each key was written", () => {
    const parsed = parseLocatedJson('{\n  "profiles": {\n    "work": { "base_url": "x" }\n  }\n}');
    const top = parsed.value as { profiles: { work: object } };
    expect(parsed.keyPosition(top, "profiles")).toEqual({ line: 2, column: 3 });
    expect(parsed.keyPosition(top.profiles.work, "base_url")).toEqual({ line: 3, column: 15 });
  });

  it("gives the line and column of a syntax error", () => {
    expect(syntaxError('{\n  "a": 1,\n}').position).toEqual({ line: 3, column: 1 });
    expect(syntaxError('{\n  "a": 1,\n}').reason).toMatch(/trailing comma/);
    expect(syntaxError('{\n  "a": 1\n  "b": 2\n}')).toMatchObject({
      position: { line: 3, column: 3 },
      reason: expect.stringMatching(/expected "," or "}"/),
    });
    expect(syntaxError("{\n  a: 1\n}").position).toEqual({ line: 2, column: 3 });
    expect(syntaxError("{'a': 1}").reason).toMatch(/double quotes/);
    expect(syntaxError('{"a": 1').reason).toMatch(/end of the file/);
    expect(syntaxError('{"a": "x').reason).toMatch(/unterminated string/);
    expect(syntaxError('{"a": "x\ny"}').reason).toMatch(/control character U\+000A/);
    expect(syntaxError('{"a": 1} x').reason).toMatch(/after the end/);
    expect(syntaxError("").reason).toMatch(/empty/);
    expect(syntaxError('{"a": 1, "a": 2}').reason).toMatch(/duplicate key "a"/);
    expect(syntaxError("// comment\n{}").position).toEqual({ line: 1, column: 1 });
    expect(syntaxError("[\n  1,\n]")).toMatchObject({
      position: { line: 3, column: 1 },
      reason: "trailing comma before ]",
    });
    expect(syntaxError('{"a": 1 // note\n}').reason).toBe('expected "," or "}" after a property value, found "/"');
    expect(syntaxError('{"a": 1.}').reason).toBe('expected "," or "}" after a property value, found "."');
  });

  it("never quotes the text around an error (it might be a pasted secret)", () => {
    const e = syntaxError('{"profiles": {"w": {"api_key_env": msk_live_SECRETVALUE}}}');
    expect(e.message).not.toContain("SECRET");
    expect(e.reason).toMatch(/found "m"/);
  });

  it("skips a byte-order mark", () => {
    expect(parseLocatedJson('\ufeff{"a":1}').value).toEqual({ a: 1 });
  });

  it("keeps __proto__ a plain key", () => {
    const v = parseLocatedJson('{"__proto__": {"x": 1}}').value as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(["__proto__"]);
  });
});

describe("the config file", () => {
  it("is MAILSEND_CONFIG, else under XDG_CONFIG_HOME, else ~/.config", () => {
    expect(configPath({ MAILSEND_CONFIG: "/etc/m.json", XDG_CONFIG_HOME: "/x" }, "linux")).toBe("/etc/m.json");
    expect(configPath({ MAILSEND_CONFIG: "~/m.json", HOME: "/home/u" }, "linux")).toBe("/home/u/m.json");
    expect(configPath({ XDG_CONFIG_HOME: "/x", HOME: "/home/u" }, "linux")).toBe("/x/mailsend/config.json");
    expect(configPath({ HOME: "/home/u" }, "linux")).toBe("/home/u/.config/mailsend/config.json");
    expect(configPath({ HOME: "/home/u" }, "darwin")).toBe("/home/u/.config/mailsend/config.json");
    // XDG: a relative XDG_CONFIG_HOME is ignored.
    expect(configPath({ XDG_CONFIG_HOME: "rel", HOME: "/home/u" }, "linux")).toBe(
      "/home/u/.config/mailsend/config.json",
    );
  });

  it("that does not exist is an empty one", () => {
    expect(readConfigFile(join(tmp.dir, "none.json"))).toMatchObject({ exists: false, profiles: {} });
  });

  it("that is not JSON: a config error (78) with the file, line and column", () => {
    const path = configFile('{\n  "profiles": {\n    "work": { "base_url": "https://x.example", }\n  }\n}\n');
    const e = failureOf(() => readConfigFile(path));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(`${path}:3:48: not valid JSON: trailing comma before }`);
  });

  it("that is a directory or unreadable: 78 naming it", () => {
    const dir = join(tmp.dir, "a-dir.json");
    mkdirSync(dir);
    const e = failureOf(() => readConfigFile(dir));
    expect(e.exitCode).toBe(78);
    expect(e.message).toContain(dir);
  });

  it("with unknown keys: 78 naming each key with its line, and the file", () => {
    const path = configFile(
      '{\n  "profiles": {\n    "work": {\n      "smtp_hots": "x",\n      "bse_url": "y"\n    }\n  }\n}',
    );
    const e = failureOf(() => readConfigFile(path));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(`${path}:4:7: profile "work": unknown keys "smtp_hots" (line 4), "bse_url" (line 5)`);
    expect(e.hint).toMatch(/smtp_host/);
    const top = failureOf(() => readConfigFile(configFile('{"profiles": {}, "defaults": {}}')));
    expect(top.message).toMatch(/unknown top-level key "defaults" \(line 1\)/);
  });

  it("refuses a field that would hold the key, whatever it is called, and never repeats its value", () => {
    for (const field of ["api_key", "apiKey", "key", "password", "smtp_password", "token", "secret", "api-key"]) {
      const path = configFile({ profiles: { work: { [field]: "msk_live_DO_NOT_PRINT" } } });
      const e = failureOf(() => readConfigFile(path));
      expect(e.exitCode, field).toBe(78);
      expect(e.message).toContain(path);
      expect(e.message).toContain(field);
      expect(e.message).toMatch(/must not hold an API key/);
      expect(`${e.message} ${e.hint}`).not.toContain("DO_NOT_PRINT");
      expect(e.hint).toMatch(/api_key_env/);
    }
    expect(failureOf(() => readConfigFile(configFile({ api_key: "x" }))).message).toMatch(/must not hold an API key/);
  });

  it("checks each value's type, naming the profile and the line, not the value", () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ transport: "carrier-pigeon" }, /transport must be rest or smtp/],
      [{ smtp_port: 70000 }, /smtp_port must be a whole number from 1 to 65535/],
      [{ smtp_port: "587" }, /smtp_port must be a whole number/],
      [{ smtp_tls: "yes" }, /smtp_tls must be starttls or implicit/],
      [{ base_url: "ftp://x" }, /base_url must be an http/],
      [{ from: "not an address" }, /from must be one address/],
      [{ rate_limit: -1 }, /rate_limit must be a whole number from 0/],
      [{ api_key_env: "msk_live_abc123" }, /NAME of an environment variable/],
      [{ api_key_env: "A", api_key_file: "/k" }, /not both/],
      [{ name: "Ops" }, /set from too/],
      [{ smtp_host: "a\nb" }, /one line/],
    ];
    for (const [settings, re] of cases) {
      const path = configFile({ profiles: { work: settings } });
      const e = failureOf(() => readConfigFile(path));
      expect(e.message, JSON.stringify(settings)).toMatch(re);
      expect(e.message).toMatch(new RegExp(`^${path}:\\d+:\\d+: profile "work"`));
      expect(e.exitCode).toBe(78);
    }
    expect(failureOf(() => readConfigFile(configFile({ profiles: { work: {} }, profile: "home" }))).message).toMatch(
      /"profile" must name one of the profiles \(work\)/,
    );
    expect(failureOf(() => readConfigFile(configFile({ profiles: [] }))).message).toMatch(
      /"profiles" must be an object/,
    );
    expect(failureOf(() => readConfigFile(configFile({ profiles: { "bad name": {} } }))).message).toMatch(
      /profile name/,
    );
    expect(failureOf(() => readConfigFile(configFile("[1]"))).message).toMatch(/must hold a JSON object/);
  });

  it("accepts every documented setting", () => {
    const path = configFile({
      profile: "work",
      profiles: {
        work: {
          transport: "smtp",
          base_url: "https://api.example.com",
          smtp_host: "smtp.example.com",
          smtp_port: 465,
          smtp_tls: "implicit",
          smtp_user: "ops",
          from: "ops@example.com",
          name: "Ops",
          rate_limit: 30,
          timeout: 10,
          retries: 2,
          max_wait: 60,
          api_key_env: "WORK_MAILSEND_KEY",
        },
        home: { api_key_file: "~/.secrets/mailsend" },
      },
    });
    const cfg = readConfigFile(path);
    expect(cfg.defaultProfile).toBe("work");
    expect(Object.keys(cfg.profiles)).toEqual(["work", "home"]);
  });

  it("documents every setting in the guide's Profiles section", () => {
    const readme = readFileSync(new URL("../../docs/guide.md", import.meta.url), "utf8");
    const section = readme.slice(
      readme.indexOf("## Profiles"),
      readme.indexOf("\n## ", readme.indexOf("## Profiles") + 3),
    );
    for (const name of SETTING_NAMES) expect(section, name).toContain(`\`${name}\``);
  });
});

describe("the profile used", () => {
  const cfg = checkConfigData(
    "/c.json",
    parseLocatedJson(JSON.stringify({ profile: "work", profiles: { work: {}, home: {}, default: {} } })),
  );
  const noDefault = checkConfigData(
    "/c.json",
    parseLocatedJson(JSON.stringify({ profiles: { work: {}, default: {} } })),
  );
  const none = checkConfigData("/c.json", parseLocatedJson(JSON.stringify({ profiles: { work: {} } })));

  it("is --profile, else MAILSEND_PROFILE, else the file's profile, else one named default", () => {
    expect(selectProfile(cfg, "home", { MAILSEND_PROFILE: "default" })?.name).toBe("home");
    expect(selectProfile(cfg, undefined, { MAILSEND_PROFILE: "default" })?.name).toBe("default");
    expect(selectProfile(cfg, undefined, {})?.name).toBe("work");
    expect(selectProfile(noDefault, undefined, {})?.name).toBe("default");
    expect(selectProfile(none, undefined, {})).toBeUndefined();
    expect(selectProfile(none, undefined, { MAILSEND_PROFILE: "" })).toBeUndefined();
  });

  it("must exist when asked for: 78 listing those there are", () => {
    const e = failureOf(() => selectProfile(cfg, "wrok", {}));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe('no profile "wrok" (from --profile) in /c.json');
    expect(e.hint).toMatch(/Profiles there: work, home, default/);
    expect(failureOf(() => selectProfile(cfg, undefined, { MAILSEND_PROFILE: "x" })).message).toMatch(
      /from MAILSEND_PROFILE/,
    );
    const missing = readConfigFile(join(tmp.dir, "none.json"));
    expect(failureOf(() => selectProfile(missing, "work", {})).message).toMatch(
      /there is no config file at .*none\.json/,
    );
  });
});

describe("precedence: flags > environment > profile > defaults", () => {
  const profile: ActiveProfile = {
    name: "work",
    file: "/c.json",
    settings: {
      transport: "smtp",
      base_url: "https://profile.example",
      smtp_host: "smtp.profile.example",
      smtp_port: 465,
      from: "profile@example.com",
      name: "Profile Sender",
      rate_limit: 7,
      retries: 1,
    },
  };

  it("the profile fills in what the environment leaves unset (or empty)", () => {
    const env = layeredEnv({ MAILSEND_BASE_URL: "https://env.example", MAILSEND_SMTP_HOST: "" }, profile);
    expect(env).toMatchObject({
      MAILSEND_TRANSPORT: "smtp",
      MAILSEND_BASE_URL: "https://env.example",
      MAILSEND_SMTP_HOST: "smtp.profile.example",
      MAILSEND_SMTP_PORT: "465",
      MAILSEND_RATE_LIMIT: "7",
      MAILSEND_RETRIES: "1",
      MAILSEND_FROM: "Profile Sender <profile@example.com>",
    });
  });

  it("the profile's display name never lands on a sender from the environment", () => {
    expect(layeredEnv({ MAILSEND_FROM: "env@example.com" }, profile).MAILSEND_FROM).toBe("env@example.com");
  });

  it("through resolveTransportConfig and resolveLimits", async () => {
    const io = { ...stdin(), needKey: false, profile };
    const fromProfile = await resolveTransportConfig({}, layeredEnv({}, profile), io);
    expect(fromProfile).toMatchObject({
      transport: "smtp",
      host: "smtp.profile.example",
      port: 465,
      tls: "implicit",
      user: "mailsend",
    });
    const envWins = await resolveTransportConfig({}, layeredEnv({ MAILSEND_TRANSPORT: "rest" }, profile), io);
    expect(envWins).toMatchObject({ transport: "rest", baseUrl: "https://profile.example" });
    const flagWins = await resolveTransportConfig(
      { transport: "rest", baseUrl: "https://flag.example" },
      layeredEnv({ MAILSEND_TRANSPORT: "smtp", MAILSEND_BASE_URL: "https://env.example" }, profile),
      io,
    );
    expect(flagWins).toMatchObject({ transport: "rest", baseUrl: "https://flag.example" });
    expect(resolveLimits({}, layeredEnv({}, profile)).limit).toBe(7);
    expect(resolveLimits({}, layeredEnv({ MAILSEND_RATE_LIMIT: "3" }, profile)).limit).toBe(3);
    expect(resolveLimits({ rateLimit: 1 }, layeredEnv({ MAILSEND_RATE_LIMIT: "3" }, profile)).limit).toBe(1);
    expect(resolveLimits({}, layeredEnv({}, undefined)).limit).toBe(60);
  });

  it("loadSettings reads the file MAILSEND_CONFIG names", () => {
    const path = configFile({
      profiles: { default: { base_url: "https://d.example" }, other: { base_url: "https://o.example" } },
    });
    expect(loadSettings(undefined, { MAILSEND_CONFIG: path }).env.MAILSEND_BASE_URL).toBe("https://d.example");
    expect(loadSettings("other", { MAILSEND_CONFIG: path }).env.MAILSEND_BASE_URL).toBe("https://o.example");
    expect(loadSettings(undefined, { MAILSEND_CONFIG: join(tmp.dir, "none.json") })).toEqual({
      env: { MAILSEND_CONFIG: join(tmp.dir, "none.json") },
    });
  });
});

describe("the key a profile points at", () => {
  const p = (settings: ActiveProfile["settings"]): ActiveProfile => ({
    name: "work",
    file: join(tmp.dir, "c.json"),
    settings,
  });

  it("comes from the environment variable it names", async () => {
    expect(await resolveApiKey({}, { WORK_KEY: KEY }, stdin(), p({ api_key_env: "WORK_KEY" }))).toBe(KEY);
  });

  it("comes from the file it names: ~ expanded, relative to the config file's directory", async () => {
    tmp.file("profile-key", `${KEY}\n`);
    expect(await resolveApiKey({}, {}, stdin(), p({ api_key_file: "profile-key" }))).toBe(KEY);
    const home = join(tmp.dir, "home");
    mkdirSync(join(home, ".secrets"), { recursive: true });
    writeFileSync(join(home, ".secrets", "mailsend"), KEY);
    expect(await resolveApiKey({}, { HOME: home }, stdin(), p({ api_key_file: "~/.secrets/mailsend" }))).toBe(KEY);
  });

  it("loses to MAILSEND_API_KEY and MAILSEND_API_KEY_FILE (the environment beats the profile)", async () => {
    expect(await resolveApiKey({}, { MAILSEND_API_KEY: "envkey" }, stdin(), p({ api_key_env: "UNSET_VAR" }))).toBe(
      "envkey",
    );
  });

  it("a missing variable: 78 naming the variable, the profile and the file", async () => {
    const e = await failure(resolveApiKey({}, {}, stdin(), p({ api_key_env: "WORK_KEY" })));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(
      `profile "work" (${join(tmp.dir, "c.json")}) takes the API key from $WORK_KEY, which is not set`,
    );
  });

  it("an unreadable file: 78 naming the file and the profile", async () => {
    const e = await failure(resolveApiKey({}, {}, stdin(), p({ api_key_file: "/nonexistent/key" })));
    expect(e.exitCode).toBe(78);
    expect(e.message).toMatch(
      /profile "work" .* takes the API key from \/nonexistent\/key, which cannot be read \(it does not exist\)/,
    );
    const dir = await failure(readProfileKey(p({ api_key_file: tmp.dir }), {}));
    expect(dir.message).toMatch(/it is a directory/);
  });

  it("an empty key file is refused like any other", async () => {
    tmp.file("profile-empty", "");
    const e = await failure(resolveApiKey({}, {}, stdin(), p({ api_key_file: "profile-empty" })));
    expect(e.exitCode).toBe(78);
    expect(e.message).toMatch(/empty/);
  });

  it("a profile without a key location: the usual 'no API key', naming the profile", async () => {
    const e = await failure(resolveApiKey({}, {}, stdin(), p({})));
    expect(e.message).toMatch(/no API key \(profile "work"/);
  });
});

describe("config set's values", () => {
  it("are parsed by type and checked like the file's", () => {
    expect(parseSettingValue("smtp_port", "465")).toBe(465);
    expect(parseSettingValue("base_url", "https://x.example")).toBe("https://x.example");
    expect(() => parseSettingValue("smtp_port", "x")).toThrow(/whole number/);
    expect(() => parseSettingValue("transport", "fax")).toThrow(/rest or smtp/);
    expect(failureOf(() => parseSettingValue("api_key_env", "sk-live-123")).exitCode).toBe(64);
  });

  it("a Redis or proxy URL with a password is refused, without repeating it; one without is taken", () => {
    for (const [name, value] of [
      ["rate_limit_url", "redis://:s3cret-x@redis.example:6379"],
      ["rate_limit_url", "rediss://budget:s3cret-x@redis.example"],
      ["rate_limit_url", "redis-sentinel://:s3cret-x@h1:26379,h2:26379/main"],
      ["rate_limit_url", "redis://:s3/cret-x@redis.example"],
      ["proxy", "http://alice:s3cret-x@proxy.example:3128"],
      ["proxy", "alice:s3cret-x@proxy.example:3128"],
    ] as const) {
      const e = failureOf(() => parseSettingValue(name, value));
      expect(e.exitCode, value).toBe(64);
      expect(e.message, value).toMatch(/must not hold a password/);
      expect(e.message).not.toMatch(/s3cret/);
    }
    expect(parseSettingValue("rate_limit_url", "rediss://budget@redis.example:6380/2")).toBe(
      "rediss://budget@redis.example:6380/2",
    );
    expect(parseSettingValue("rate_limit_url", "redis-sentinel://h1:26379,h2:26379/main")).toBe(
      "redis-sentinel://h1:26379,h2:26379/main",
    );
    expect(() => parseSettingValue("rate_limit_url", "http://redis.example")).toThrow(/must start with redis:\/\//);
    expect(parseSettingValue("proxy", "proxy.example:3128")).toBe("proxy.example:3128");
    expect(parseSettingValue("proxy", "none")).toBe("none");
  });

  it("rate_limit_url's bare user part (redis://word@host) is a password without rate_limit_password_file: refused; with one, a user name", () => {
    const check = (profile: Record<string, unknown>) => () =>
      checkConfigData("/c.json", parseLocatedJson(JSON.stringify({ profiles: { p: profile } })));
    const e = failureOf(check({ rate_limit_url: "redis://hunter2@redis.example:6379" }));
    expect(e.message).toMatch(/rate_limit_url has a user part and there is no rate_limit_password_file/);
    expect(`${e.message} ${e.hint}`).not.toMatch(/hunter2/);
    expect(check({ rate_limit_url: "redis://budget@redis.example", rate_limit_password_file: "pw" })).not.toThrow();
    expect(check({ rate_limit_url: "redis://budget:@redis.example" })).not.toThrow();
  });

  it("the profile's Redis password file goes only with the profile's Redis, not one the environment names", () => {
    const profile = {
      name: "p",
      file: "/etc/mailsend/config.json",
      settings: { rate_limit_url: "redis://budget@r.example", rate_limit_password_file: "pw" },
    };
    expect(layeredEnv({}, profile).MAILSEND_RATE_LIMIT_PASSWORD_FILE).toBe("/etc/mailsend/pw");
    const other = layeredEnv({ MAILSEND_RATE_LIMIT_URL: "redis://other.example" }, profile);
    expect(other.MAILSEND_RATE_LIMIT_URL).toBe("redis://other.example");
    expect(other.MAILSEND_RATE_LIMIT_PASSWORD_FILE).toBeUndefined();
  });

  it("a profile's paths are relative to the config file, ~ is the home, in the variables it fills", () => {
    const profile = {
      name: "p",
      file: "/etc/mailsend/config.json",
      settings: {
        ca_file: "ca.pem",
        rate_limit_url: "redis://r.example",
        rate_limit_password_file: "~/redis-pw",
        aliases: "/etc/aliases",
      },
    };
    const env = layeredEnv({ HOME: "/home/u" }, profile);
    expect(env.MAILSEND_CA_FILE).toBe("/etc/mailsend/ca.pem");
    expect(env.MAILSEND_RATE_LIMIT_PASSWORD_FILE).toBe("/home/u/redis-pw");
    expect(env.MAILSEND_ALIASES).toBe("/etc/aliases");
    // The environment's own value wins, as it is.
    expect(layeredEnv({ HOME: "/home/u", MAILSEND_CA_FILE: "rel.pem" }, profile).MAILSEND_CA_FILE).toBe("rel.pem");
  });

  it("every setting with an environment variable names one send/batch read", () => {
    for (const [name, spec] of Object.entries(PROFILE_SETTINGS)) {
      if ("env" in spec) expect(spec.env, name).toMatch(/^MAILSEND_[A-Z_]+$/);
    }
  });
});

describe("writing the file", () => {
  it("creates the directory 0700 and the file 0600, atomically (no temp file left)", () => {
    const dir = join(tmp.dir, "w", "mailsend");
    const path = join(dir, "config.json");
    writeConfigFile(path, { profiles: { a: { smtp_port: 465 } } });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ profiles: { a: { smtp_port: 465 } } });
    writeConfigFile(path, { profiles: {} });
    expect(readConfigFile(path).profiles).toEqual({});
    expect(readFileSync(path, "utf8")).toBe('{\n  "profiles": {}\n}\n');
  });
});
