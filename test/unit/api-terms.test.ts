/**
 * The library's errors in its own terms: an error that names a setting or a flag says it in the
 * words of the front end that reports it (the CLI's flags and variables, the library's options,
 * sendmail's callers' variables), each from the one settings table. Real errors of the code the
 * library runs, said by the library, name no CLI flag and no environment variable; and real
 * failures of send() say so in the options' names.
 */
import { describe, expect, it } from "vitest";
import { send } from "../../src/api/send.js";
import { noChannelError } from "../../src/core/config.js";
import { MailsendError, toMailsendError } from "../../src/core/errors.js";
import { checkHeaderName, checkNotIdempotencyHeader } from "../../src/core/headers.js";
import { maxMessageSize, tooLarge } from "../../src/core/size.js";
import { SAY, SETTINGS, type SettingWords } from "../../src/core/setting-names.js";
import { redisConfigFrom, type RedisConfig } from "../../src/limits/redis-config.js";
import { redisError } from "../../src/limits/redis-errors.js";
import { revokedKeyHint } from "../../src/transports/hints.js";
import { statusError } from "../../src/transports/rest.js";
import { afterResetFailure, failureOf, timeoutFailure } from "../../src/transports/rest-failure.js";
import { Journal } from "../../src/batch/journal.js";

/** A flag or a variable, outside a command to run (`mailsend sandbox keys add --save`) and options.env's `env.MAILSEND_...`. */
const CLI_WORDS_RE = /(?<![\w-])--[a-z][a-z-]+|(?<!env\.)\bMAILSEND_[A-Z_]+|\bNODE_EXTRA_CA_CERTS\b/;
const CLI_WORDS = { test: (s: string) => CLI_WORDS_RE.test(s.replace(/`mailsend [^`]*`/g, "")) };

const url = new URL("https://api.example.com");
const ctx = { url, headers: { "Idempotency-Key": "k1" }, timeoutMs: 5000 };
const untrusted = Object.assign(new Error("self-signed certificate"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" });

function thrown(f: () => unknown): MailsendError {
  try {
    f();
  } catch (e) {
    return toMailsendError(e);
  }
  throw new Error("expected a failure");
}

/** Redis at 127.0.0.1:6379, as the budget's settings give it. */
const redis = redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: "redis://127.0.0.1:6379" }) as RedisConfig;

/** Real errors of the code the library runs, each naming settings or flags in the CLI's words. */
async function errors(): Promise<Array<[string, MailsendError]>> {
  return [
    ["401", statusError(401, "", {}, url, (s) => s)],
    ["404", statusError(404, "", {}, url, (s) => s)],
    ["403 on this machine", new MailsendError("key_revoked", "revoked", { hint: revokedKeyHint("127.0.0.1") })],
    ["timeout", timeoutFailure({ connected: false, sent: false, answered: false }, ctx)],
    ["sent, no answer", timeoutFailure({ connected: true, sent: true, answered: false }, ctx)],
    [
      "refused",
      await failureOf(
        Object.assign(new Error("refused"), { code: "ECONNREFUSED" }),
        { connected: false, sent: false, answered: false },
        ctx,
      ),
    ],
    ["untrusted", await failureOf(untrusted, { connected: false, sent: false, answered: false }, ctx)],
    ["no channel", noChannelError()],
    ["reserved header", thrown(() => checkHeaderName("From"))],
    ["idempotency header", thrown(() => checkNotIdempotencyHeader("X-Idempotency-Key", "headers"))],
    ["max size", thrown(() => maxMessageSize({ MAILSEND_MAX_SIZE: "lots" }))],
    ["too large", tooLarge(1000)],
    ["bug", toMailsendError(new TypeError("oops"))],
    ["redis url", thrown(() => redisConfigFrom({ MAILSEND_RATE_LIMIT_URL: "redis://127.0.0.1:6379/?tls=1" }))],
    ["redis untrusted", redisError(untrusted, { ...redis, tls: true }, "connect", "take")],
    [
      "redis refused",
      redisError(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }), redis, "connect", "take"),
    ],
    [
      "journal",
      thrown(() => Journal.plan({ path: "/nonexistent/journal", resume: true } as Parameters<typeof Journal.plan>[0])),
    ],
  ];
}

describe("an error says its settings in each front end's words", () => {
  it.each([
    [
      "404",
      "Check --base-url / MAILSEND_BASE_URL: it is the address before /send.",
      "Check baseUrl: it is the address before /send.",
      "Check MAILSEND_BASE_URL: it is the address before /send.",
    ],
    [
      "401",
      "Check MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE): the key is wrong or missing.",
      "Check apiKey (or apiKeyFile): the key is wrong or missing.",
      "Check MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE): the key is wrong or missing.",
    ],
    [
      "timeout",
      "Check the network, or raise --timeout.",
      "Check the network, or raise timeoutMs.",
      "Check the network, or raise MAILSEND_TIMEOUT.",
    ],
    [
      "sent, no answer",
      "The message may have been sent. Check before sending again (resending with --idempotency-key k1 is safe).",
      "The message may have been sent. Check before sending again (resending with idempotencyKey k1 is safe).",
      "The message may have been sent. Check before sending again (resending with the header X-Idempotency-Key: k1 is safe).",
    ],
    [
      "untrusted",
      "If the server uses a private CA (the sandbox does), pass --ca-file <pem> or set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS. --insecure skips the check (not for production).",
      "If the server uses a private CA (the sandbox does), set caFile to its CA certificate (a PEM file). insecure skips the check (not for production).",
      "If the server uses a private CA (the sandbox does), set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file.",
    ],
    [
      "redis url",
      "TLS is chosen by the scheme (rediss://), the password may come from MAILSEND_RATE_LIMIT_PASSWORD_FILE, the CA from --ca-file or NODE_EXTRA_CA_CERTS.",
      "TLS is chosen by the scheme (rediss://), the password may come from env.MAILSEND_RATE_LIMIT_PASSWORD_FILE, the CA from caFile.",
      "TLS is chosen by the scheme (rediss://), the password may come from MAILSEND_RATE_LIMIT_PASSWORD_FILE, the CA from MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS.",
    ],
    [
      "no channel",
      "Set MAILSEND_BASE_URL or MAILSEND_SMTP_HOST (or --base-url / --smtp-host). For a local one, run `mailsend sandbox` and paste the export lines it prints.",
      "Set baseUrl or smtp.host. For a local one, run `mailsend sandbox` and paste the export lines it prints.",
      "Set MAILSEND_BASE_URL or MAILSEND_SMTP_HOST. For a local one, run `mailsend sandbox` and paste the export lines it prints.",
    ],
  ])("%s", async (name, cli, api, sendmail) => {
    const e = new Map(await errors()).get(name)!;
    expect(e.hint).toBe(cli);
    expect(e.in("api").hint).toBe(api);
    expect(e.in("sendmail").hint).toBe(sendmail);
  });

  it("a command to run keeps its flags; a variable names the library's option", async () => {
    const e = new Map(await errors()).get("403 on this machine")!;
    expect(e.hint).toContain("where its export lines point MAILSEND_API_KEY_FILE");
    expect(e.in("api").hint).toContain("`mailsend sandbox keys add --save` makes a new key");
    expect(e.in("api").hint).toContain("where its export lines point apiKeyFile");
  });

  it("a setting with a value, a pair of settings", () => {
    expect(SAY.cli.value("smtpTls", "implicit", true)).toBe("--smtp-tls implicit (MAILSEND_SMTP_TLS=implicit)");
    expect(SAY.api.value("smtpTls", "implicit", true)).toBe('smtp.tls: "implicit"');
    expect(SAY.sendmail.value("transport", "rest")).toBe("MAILSEND_TRANSPORT=rest");
    expect(SAY.cli.pair("smtpHost", "smtpPort", true)).toBe(
      "--smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT)",
    );
    expect(SAY.api.pair("smtpHost", "smtpPort", true)).toBe("smtp.host / smtp.port");
    expect(SAY.sendmail.pair("smtpHost", "smtpPort")).toBe("MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT");
    expect(SAY.api.flag("noWait")).toBe("wait: false");
  });

  it("an error that names no setting is itself in every front end", () => {
    const plain = new MailsendError("usage", "-t and -f are sendmail's", { hint: "see --help" });
    expect(plain.in("api")).toBe(plain);
    expect(plain.in("sendmail")).toBe(plain);
  });

  it("leaves no flag or variable name in the library's words of any of these errors", async () => {
    const left: string[] = [];
    for (const [name, e] of await errors()) {
      expect(CLI_WORDS.test(`${e.message} ${e.hint ?? ""}`), `${name} names a flag in the CLI's words`).toBe(true);
      const api = e.in("api");
      if (CLI_WORDS.test(`${api.message} ${api.hint ?? ""}`)) left.push(`${name}: ${api.message} / ${api.hint}`);
      // sendmail's callers set settings by variables only: no setting's flag.
      const sendmail = e.in("sendmail");
      for (const w of Object.values(SETTINGS) as SettingWords[]) {
        if (w.flag && new RegExp(`${w.flag}(?![a-z-])`).test(`${sendmail.message} ${sendmail.hint ?? ""}`))
          left.push(`${name} (sendmail): ${w.flag}`);
      }
    }
    expect(left).toEqual([]);
  });

  it("an error built on another keeps its words (a request made again)", () => {
    const first = new MailsendError("timeout", (s) => `no answer; raise ${s.flag("timeout")}`);
    const e = afterResetFailure(first, url, "k1");
    expect(e.message).toMatch(/sending it again failed: no answer; raise --timeout$/);
    expect(e.in("api").message).toMatch(/sending it again failed: no answer; raise timeoutMs$/);
    expect(e.in("api").hint).toContain("resending with idempotencyKey k1");
  });
});

describe("send() speaks in options", () => {
  const msg = { from: "a@example.com", to: "b@example.com", subject: "x", text: "x" };
  const failure = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (e) {
      return e as MailsendError;
    }
    throw new Error("expected a failure");
  };

  it("no API key, an unreachable baseUrl, an unreachable SMTP host", async () => {
    const cases = [
      await failure(send(msg, { baseUrl: "http://127.0.0.1:9", rateLimit: 0 })),
      await failure(
        send(msg, { baseUrl: "http://127.0.0.1:9", apiKey: "msk_test_api_terms_1", rateLimit: 0, retries: 0 }),
      ),
      await failure(
        send(msg, {
          transport: "smtp",
          smtp: { host: "127.0.0.1", port: 9 },
          apiKey: "msk_test_api_terms_1",
          rateLimit: 0,
          retries: 0,
        }),
      ),
    ];
    for (const e of cases) {
      expect(e).toBeInstanceOf(MailsendError);
      expect(CLI_WORDS.test(`${e.message} ${e.hint ?? ""}`), `${e.message} ${e.hint ?? ""}`).toBe(false);
    }
    expect(cases[0]!.hint).toMatch(/apiKey/);
    expect(cases[1]!.hint).toMatch(/baseUrl/);
    expect(cases[2]!.hint).toMatch(/smtp\.host/);
  });
});
