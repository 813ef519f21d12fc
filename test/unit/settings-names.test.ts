/**
 * One resolver, three ways of saying a setting: an error about a setting carries its name
 * (MailsendError.setting), and its text names it as the front end that asked does.
 */
import { describe, expect, it } from "vitest";
import type { MailsendError } from "../../src/core/errors.js";
import { settingName } from "../../src/core/setting-names.js";
import { cliLayers, resolveConfig, transportOf } from "../../src/settings/resolve.js";
import { resolveConnection } from "../../src/api/options.js";
import { budgetOf } from "../../src/settings/budget.js";

const failure = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return e as MailsendError;
  }
  throw new Error("expected a failure");
};

describe("settingName", () => {
  it.each([
    ["baseUrl", "cli", undefined, "--base-url / MAILSEND_BASE_URL"],
    ["baseUrl", "cli", "given", "--base-url"],
    ["baseUrl", "cli", "env", "MAILSEND_BASE_URL"],
    ["baseUrl", "api", "given", "options.baseUrl"],
    ["baseUrl", "api", "env", "options.env.MAILSEND_BASE_URL"],
    ["smtpPort", "api", undefined, "options.smtp.port"],
    ["smtpPort", "sendmail", undefined, "MAILSEND_SMTP_PORT"],
    ["apiKeyFile", "cli", undefined, "MAILSEND_API_KEY_FILE"],
    ["insecure", "cli", undefined, "--insecure"],
  ] as const)("%s in the %s's words (%s)", (setting, front, source, words) => {
    expect(settingName(setting, front, source)).toBe(words);
  });
});

describe("the resolver's errors name the setting", () => {
  const io = { stdin: process.stdin, needKey: false };

  it("a flag's bad value is a usage error naming the flag; a variable's a configuration error naming the variable", async () => {
    const flag = await failure(resolveConfig(cliLayers({ baseUrl: "http://x.example", timeout: 0 }, {}), io));
    expect(flag).toMatchObject({
      code: "usage",
      setting: "timeout",
      message: "--timeout must be a whole number from 1 to 3600, got 0",
    });
    const variable = await failure(
      resolveConfig(cliLayers({ baseUrl: "http://x.example" }, { MAILSEND_TIMEOUT: "soon" }), io),
    );
    expect(variable).toMatchObject({
      code: "config_invalid",
      setting: "timeout",
      message: 'MAILSEND_TIMEOUT must be a whole number from 1 to 3600, got "soon"',
    });
  });

  it("the library says the option, or options.env's variable", async () => {
    const option = await failure(resolveConnection({ baseUrl: "http://x.example", timeoutMs: 0 }, { needKey: false }));
    expect(option).toMatchObject({
      code: "config_invalid",
      setting: "timeout",
      message: "options.timeoutMs must be a whole number from 1 to 3600000, got 0",
    });
    const variable = await failure(
      resolveConnection(
        {
          env: { MAILSEND_BASE_URL: "http://x.example", MAILSEND_SMTP_PORT: "0" },
          transport: "smtp",
          smtp: { host: "h" },
        },
        { needKey: false },
      ),
    );
    expect(variable).toMatchObject({
      setting: "smtpPort",
      message: 'options.env.MAILSEND_SMTP_PORT must be a whole number from 1 to 65535, got "0"',
    });
    const proxy = await failure(
      resolveConnection({ baseUrl: "https://x.example", proxy: "ftp://p.example" }, { needKey: false }),
    );
    expect(proxy.message).toMatch(/^the proxy in options\.proxy /);
  });

  it("an unset address is config_missing with the address's setting, in each front end's words", async () => {
    const cli = await failure(resolveConfig(cliLayers({}, {}), io));
    expect(cli).toMatchObject({ code: "config_missing", setting: "baseUrl", message: "no REST base URL" });
    expect(cli.hint).toMatch(/^Set --base-url or MAILSEND_BASE_URL/);
    const api = await failure(resolveConnection({ transport: "smtp" }, { needKey: false }));
    expect(api).toMatchObject({
      code: "config_missing",
      setting: "smtpHost",
      hint: "Pass options.smtp.host. createSandbox() gives a local one.",
    });
  });

  it("auto is a choice where a run chooses per message, and refused where one transport is needed", () => {
    expect(transportOf(cliLayers({ transport: "auto" }, {}), true)).toBe("auto");
    expect(() => transportOf(cliLayers({}, { MAILSEND_TRANSPORT: "auto" }), false)).toThrow(
      /^MAILSEND_TRANSPORT=auto: this command needs one transport/,
    );
    expect(() => transportOf(cliLayers({ transport: "pigeon" }, {}), true)).toThrow(
      'transport must be rest, smtp or auto, got "pigeon"',
    );
  });

  it("unnamed: auto where a run chooses per message and an SMTP host is configured, else rest; a named one wins", () => {
    const both = { MAILSEND_BASE_URL: "http://127.0.0.1:1", MAILSEND_SMTP_HOST: "127.0.0.1" };
    expect(transportOf(cliLayers({}, both), true)).toBe("auto");
    expect(transportOf(cliLayers({}, { MAILSEND_SMTP_HOST: "127.0.0.1" }), true)).toBe("auto");
    expect(transportOf(cliLayers({ smtpHost: "127.0.0.1" }, {}), true)).toBe("auto");
    expect(transportOf(cliLayers({}, { MAILSEND_BASE_URL: "http://127.0.0.1:1" }), true)).toBe("rest");
    expect(transportOf(cliLayers({}, both), false)).toBe("rest");
    expect(transportOf(cliLayers({}, { ...both, MAILSEND_TRANSPORT: "rest" }), true)).toBe("rest");
    expect(transportOf(cliLayers({ transport: "smtp" }, both), true)).toBe("smtp");
  });
});

describe("the budget settings, read once for the CLI and the library", () => {
  it("durations: the CLI's seconds, the library's milliseconds, a variable's seconds in both", () => {
    expect(budgetOf("cli", { maxWait: 5, deadline: 7 }, {})).toMatchObject({
      maxWaitMs: 5000,
      deadlineMs: 7000,
      retries: 3,
      noWait: false,
    });
    expect(budgetOf("api", { maxWaitMs: 5, deadlineMs: 7, wait: false }, {})).toMatchObject({
      maxWaitMs: 5,
      deadlineMs: 7,
      noWait: true,
    });
    expect(budgetOf("api", {}, { MAILSEND_MAX_WAIT: "2", MAILSEND_RATE_WINDOW: "5" })).toMatchObject({
      maxWaitMs: 2000,
      limits: { limit: 60, windowMs: 5000 },
    });
  });

  it("a bad value is named where it came from", () => {
    expect(() => budgetOf("cli", { retries: 1000 }, {})).toThrow(
      "--retries must be a whole number from 0 to 100, got 1000",
    );
    expect(() => budgetOf("cli", {}, { MAILSEND_RATE_LIMIT: "ten" })).toThrow(
      'MAILSEND_RATE_LIMIT must be a whole number from 0 up, got "ten"',
    );
    expect(() => budgetOf("api", { rateWindowMs: 10 }, {})).toThrow(
      "options.rateWindowMs must be a whole number from 1000 up, got 10",
    );
    expect(() => budgetOf("api", {}, { MAILSEND_DEADLINE: "-1" })).toThrow(
      'options.env.MAILSEND_DEADLINE must be a whole number from 0 up, got "-1"',
    );
  });
});
