/**
 * The library's errors and warnings in its own terms (issue 13): every text
 * the code the API runs can put in an error, a hint or a warning, run through
 * inApiTerms, names no CLI flag and no environment variable; and real
 * failures of send() say so in the options' names.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { send } from "../../src/api/send.js";
import { inApiTerms } from "../../src/api/terms.js";
import { MailsendError } from "../../src/core/errors.js";
import { ROOT } from "../helpers/cli.js";

/** The code the API runs (not the CLI's commands, profiles or the sandbox). */
const DIRS = ["src/core", "src/transports", "src/limits", "src/batch", "src/api"];
const FILES = ["src/settings/resolve.ts", "src/settings/proxy.ts", "src/core/read.ts", "src/sendmail/eml.ts"];

/** A flag or a variable, outside a command to run (`mailsend sandbox keys add --save`) and options.env's `env.MAILSEND_...`. */
const CLI_WORDS_RE = /(?<![\w-])--[a-z][a-z-]+|(?<!env\.)\bMAILSEND_[A-Z_]+|\bNODE_EXTRA_CA_CERTS\b/;
const CLI_WORDS = { test: (s: string) => CLI_WORDS_RE.test(s.replace(/`mailsend [^`]*`/g, "")) };

/** The string and template literals of a file, parsed as TypeScript (template holes kept as ${...}). */
function literals(path: string): string[] {
  const file = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (n: ts.Node) => {
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) out.push(n.text);
    else if (ts.isTemplateExpression(n)) {
      out.push(n.head.text + n.templateSpans.map((sp) => `\${...}${sp.literal.text}`).join(""));
    }
    if (!ts.isImportDeclaration(n)) ts.forEachChild(n, visit);
  };
  visit(file);
  return out;
}

function sources(): string[] {
  const files = [...FILES];
  for (const d of DIRS) for (const f of readdirSync(join(ROOT, d))) if (f.endsWith(".ts") && f !== "terms.ts") files.push(`${d}/${f}`);
  return files;
}

describe("inApiTerms", () => {
  it.each([
    ["Check --base-url / MAILSEND_BASE_URL: it is the address before /send.", "Check baseUrl: it is the address before /send."],
    ["Check MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE): the key is wrong or missing.", "Check apiKey (or apiKeyFile): the key is wrong or missing."],
    ["Use --smtp-tls implicit (MAILSEND_SMTP_TLS=implicit) for this port, or the STARTTLS port (587).", 'Use smtp.tls: "implicit" for this port, or the STARTTLS port (587).'],
    ["Nothing was sent; check --smtp-host / --smtp-port.", "Nothing was sent; check smtp.host / smtp.port."],
    ["Check --smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT).", "Check smtp.host / smtp.port."],
    ["Check the network, or raise --timeout.", "Check the network, or raise timeoutMs."],
    ["Without --no-wait, mailsend waits for the slot.", "Without wait: false, mailsend waits for the slot."],
    ["pass --ca-file <pem> or set NODE_EXTRA_CA_CERTS.", "set caFile to its CA certificate (a PEM file)."],
    [
      "If the server uses a private CA (the sandbox does), pass --ca-file <pem> or set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS. --insecure skips the check (not for production).",
      "If the server uses a private CA (the sandbox does), set caFile to its CA certificate (a PEM file). insecure skips the check (not for production).",
    ],
    [
      "If the server's certificate comes from a private CA, set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file, or pass --ca-file <pem>.",
      "If the server's certificate comes from a private CA, set caFile to its PEM file.",
    ],
    ["the password may come from MAILSEND_RATE_LIMIT_PASSWORD_FILE", "the password may come from env.MAILSEND_RATE_LIMIT_PASSWORD_FILE"],
    ["On a sandbox, `mailsend sandbox keys add --save` makes one for MAILSEND_API_KEY_FILE.", "On a sandbox, `mailsend sandbox keys add --save` makes one for apiKeyFile."],
  ])("%s", (cli, api) => {
    expect(inApiTerms(cli)).toBe(api);
  });

  it("leaves no flag or variable name in any text the API's code can say", () => {
    const left: string[] = [];
    for (const file of sources()) {
      for (const text of literals(join(ROOT, file))) {
        if (!CLI_WORDS.test(text)) continue;
        const out = inApiTerms(text);
        if (CLI_WORDS.test(out)) left.push(`${file}: ${out}`);
      }
    }
    expect(left).toEqual([]);
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
      await failure(send(msg, { baseUrl: "http://127.0.0.1:9", apiKey: "msk_test_api_terms_1", rateLimit: 0, retries: 0 })),
      await failure(send(msg, { transport: "smtp", smtp: { host: "127.0.0.1", port: 9 }, apiKey: "msk_test_api_terms_1", rateLimit: 0, retries: 0 })),
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
