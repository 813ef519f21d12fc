/**
 * Every bad input: its sysexits exit code, a clear message, and nothing
 * reaching the server (no connection at all to the REST recorder or the SMTP
 * sink).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, stderrJson } from "../helpers/cli.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_bad_Tz4Kp9Wd";
const tmp = scratch();
let rec: RestRecorder;
let sink: SmtpSink;
let caPath: string;
const paths: Record<string, string> = {};

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  [rec, sink] = await Promise.all([startRestRecorder(), startSmtpSink({ mode: "starttls", tls, key: KEY })]);
  paths.att = tmp.file("ok.txt", "fine");
  paths.dir = join(tmp.dir, "a-directory");
  mkdirSync(paths.dir);
  paths.fifo = join(tmp.dir, "a-fifo");
  execFileSync("mkfifo", [paths.fifo]);
  paths.badJson = tmp.file("bad.json", '{"from": "a@example.com", "to": ');
  paths.arrayJson = tmp.file("array.json", "[]");
  paths.unknownField = tmp.file(
    "unknown.json",
    JSON.stringify({ from: "a@example.com", to: "b@example.com", subject: "s", html: "h", cc: "c@example.com" }),
  );
  paths.nullField = tmp.file(
    "null.json",
    JSON.stringify({ from: "a@example.com", to: "b@example.com", subject: "s", html: "h", name: null }),
  );
  paths.noBlankEml = tmp.file("noblank.eml", "From: a@example.com\r\nTo: b@example.com\r\nSubject: s");
  paths.notEml = tmp.file("not.eml", "<html>this is not a message</html>\n\nbody");
  paths.noFromEml = tmp.file("nofrom.eml", "To: b@example.com\r\nSubject: s\r\n\r\nx");
  paths.ccEml = tmp.file(
    "cc.eml",
    "From: a@example.com\r\nTo: b@example.com\r\nCc: c@example.com\r\nSubject: s\r\n\r\nx",
  );
  paths.latin1 = tmp.file("latin1.html", Buffer.from([0x3c, 0x70, 0x3e, 0xe9, 0x74, 0xe9]));
  paths.emptyKey = tmp.file("empty.key", "");
  paths.goodKey = tmp.file("good.key", KEY);
});
afterAll(async () => {
  await Promise.all([rec?.close(), sink?.close()]);
  tmp.remove();
});
beforeEach(() => {
  rec.reset();
  sink.reset();
});

const P = (name: string) => `@@${name}`;
const resolve = (args: string[]) => args.map((a) => (a.startsWith("@@") ? paths[a.slice(2)]! : a));

const M = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi"];
const MB = [...M, "--html", "<p>x</p>"];

interface Case {
  why: string;
  args: string[];
  exit: number;
  smtp?: boolean;
  env?: Record<string, string | undefined>;
  /** A pattern the human-mode stderr must match. */
  says?: RegExp;
}

const CASES: Case[] = [
  // 64 usage
  {
    why: "--timeout 0 (out of range: usage, as --timeout abc)",
    args: [...MB, "--timeout", "0"],
    exit: 64,
    says: /--timeout must be a whole number from 1/,
  },
  { why: "missing --from", args: ["-t", "b@example.com", "-s", "Hi", "--html", "x"], exit: 64, says: /missing --from/ },
  { why: "missing --to", args: ["-f", "a@example.com", "-s", "Hi", "--html", "x"], exit: 64, says: /missing --to/ },
  {
    why: "missing --subject",
    args: ["-f", "a@example.com", "-t", "b@example.com", "--html", "x"],
    exit: 64,
    says: /missing --subject/,
  },
  { why: "missing body (stdin closed)", args: M, exit: 64, says: /missing a body/ },
  { why: "empty --subject", args: [...M.slice(0, 4), "-s", "", "--html", "x"], exit: 64 },
  { why: "empty --html", args: [...M, "--html", ""], exit: 64, says: /body is empty/ },
  { why: "--html and --html-file", args: [...MB, "--html-file", P("att")], exit: 64 },
  { why: "cc over REST", args: [...MB, "--cc", "c@example.com"], exit: 64, says: /cc and bcc/ },
  { why: "bcc over REST", args: [...MB, "--bcc", "c@example.com"], exit: 64, says: /hint:.*--transport smtp/ },
  { why: "cc in an .eml over REST", args: ["--eml", P("ccEml")], exit: 64 },
  { why: "--eml with --subject", args: ["--eml", P("ccEml"), "-s", "x"], exit: 64, says: /--eml/ },
  { why: "an unknown flag", args: [...MB, "--frobnicate"], exit: 64, says: /unknown option/ },
  { why: "a header without a colon", args: [...MB, "-H", "X-No-Colon"], exit: 64 },
  { why: "a bad --idempotency-key", args: [...MB, "--idempotency-key", "has space"], exit: 64 },
  {
    why: "X-Idempotency-Key as a custom header (SMTP)",
    args: [...MB, "-H", "X-Idempotency-Key: mine"],
    exit: 64,
    smtp: true,
    says: /hint:.*--idempotency-key/,
  },
  // 65 bad data
  {
    why: "invalid --from",
    args: ["-f", "not-an-address", "-t", "b@example.com", "-s", "Hi", "--html", "x"],
    exit: 65,
    says: /--from/,
  },
  {
    why: "an addr-spec before an angle address in --to",
    args: ["-f", "a@example.com", "-t", "a@x.com <b@y.com>", "-s", "Hi", "--html", "x"],
    exit: 65,
  },
  {
    why: "a group without its ending ; in --to",
    args: ["-f", "a@example.com", "-t", "team: b@example.com", "-s", "Hi", "--html", "x"],
    exit: 65,
    says: /must end with ";"/,
  },
  {
    why: "a group in --from",
    args: ["-f", "team: a@example.com;", "-t", "b@example.com", "-s", "Hi", "--html", "x"],
    exit: 65,
    says: /group/,
  },
  {
    why: "an unquoted comma in a display name",
    args: ["-f", "a@example.com", "-t", "Doe, John <j@example.com>", "-s", "Hi", "--html", "x"],
    exit: 65,
  },
  { why: "invalid --reply-to", args: [...MB, "--reply-to", "help"], exit: 65 },
  { why: "invalid --cc (SMTP)", args: [...MB, "--cc", "c@@example.com"], exit: 65, smtp: true },
  { why: "invalid --bcc (SMTP)", args: [...MB, "--bcc", "x@y.com <z@w.com>"], exit: 65, smtp: true },
  {
    why: "CR/LF in --to",
    args: ["-f", "a@example.com", "-t", "b@example.com\r\nBcc: evil@example.com", "-s", "Hi", "--html", "x"],
    exit: 65,
  },
  {
    why: "CR/LF in --from's name",
    args: ["-f", '"A\r\nBcc: evil@example.com" <a@example.com>', "-t", "b@example.com", "-s", "Hi", "--html", "x"],
    exit: 65,
  },
  {
    why: "CR/LF in --subject",
    args: ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi\r\nBcc: evil@example.com", "--html", "x"],
    exit: 65,
  },
  {
    why: "LF in --subject (SMTP)",
    args: ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi\nBcc: evil@example.com", "--html", "x"],
    exit: 65,
    smtp: true,
  },
  { why: "CR/LF in --name", args: [...MB, "--name", "A\r\nBcc: evil@example.com"], exit: 65 },
  { why: "CR/LF in a header value", args: [...MB, "-H", "X-A: 1\r\nBcc: evil@example.com"], exit: 65 },
  { why: "CR/LF in a header value (SMTP)", args: [...MB, "-H", "X-A: 1\nBcc: evil@example.com"], exit: 65, smtp: true },
  { why: "an invalid header name", args: [...MB, "-H", "X Bad Name: 1"], exit: 65 },
  {
    why: "a header colliding with From",
    args: [...MB, "-H", "From: evil@example.com"],
    exit: 65,
    says: /cannot be set as a custom header/,
  },
  { why: "a header colliding with To", args: [...MB, "-H", "to: evil@example.com"], exit: 65 },
  { why: "a header colliding with Subject (SMTP)", args: [...MB, "-H", "Subject: other"], exit: 65, smtp: true },
  { why: "a header colliding with Bcc (SMTP)", args: [...MB, "-H", "Bcc: evil@example.com"], exit: 65, smtp: true },
  { why: "CR/LF in an attachment's new name", args: [...MB, "-a", "@@att#evil\r\nX-Injected: 1.txt"], exit: 65 },
  { why: "malformed JSON", args: ["--json-file", P("badJson")], exit: 65, says: /not valid JSON/ },
  { why: "JSON that is not an object", args: ["--json-file", P("arrayJson")], exit: 65 },
  { why: "JSON with an unknown field", args: ["--json-file", P("unknownField")], exit: 65, says: /unknown field/ },
  { why: "JSON with a null", args: ["--json-file", P("nullField")], exit: 65 },
  { why: "malformed JSON on stdin", args: ["--json-file", "-"], exit: 65 },
  { why: "an EML without a blank line", args: ["--eml", P("noBlankEml")], exit: 65 },
  { why: "something that is not an EML", args: ["--eml", P("notEml")], exit: 65 },
  { why: "an EML without From (SMTP)", args: ["--eml", P("noFromEml")], exit: 65, smtp: true },
  { why: "a body file that is not UTF-8", args: [...M, "--html-file", P("latin1")], exit: 65 },
  // 66 input missing
  { why: "a missing attachment", args: [...MB, "-a", "/nonexistent/report.pdf"], exit: 66, says: /not found/ },
  { why: "a missing attachment (SMTP)", args: [...MB, "-a", "/nonexistent/report.pdf"], exit: 66, smtp: true },
  { why: "a directory as attachment", args: [...MB, "-a", P("dir")], exit: 66, says: /directory/ },
  { why: "a FIFO as attachment", args: [...MB, "-a", P("fifo")], exit: 66, says: /not a regular file/ },
  { why: "a missing --html-file", args: [...M, "--html-file", "/nonexistent/body.html"], exit: 66 },
  { why: "a directory as --text-file", args: [...M, "--text-file", P("dir")], exit: 66, says: /directory/ },
  { why: "a missing --json-file", args: ["--json-file", "/nonexistent/req.json"], exit: 66 },
  { why: "a missing --eml (SMTP)", args: ["--eml", "/nonexistent/m.eml"], exit: 66, smtp: true },
  // 78 configuration
  { why: "no key", args: MB, exit: 78, env: { MAILSEND_API_KEY: undefined }, says: /hint:.*MAILSEND_API_KEY/ },
  { why: "no key (SMTP)", args: MB, exit: 78, env: { MAILSEND_API_KEY: undefined }, smtp: true },
  { why: "an empty MAILSEND_API_KEY", args: MB, exit: 78, env: { MAILSEND_API_KEY: "" } },
  {
    why: "an empty key file",
    args: MB,
    exit: 78,
    env: { MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: P("emptyKey") },
  },
  {
    why: "a missing key file",
    args: MB,
    exit: 78,
    env: { MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: "/nonexistent/key" },
  },
  { why: "a key with a space", args: MB, exit: 78, env: { MAILSEND_API_KEY: `${KEY} ` }, says: /whitespace/ },
  { why: "a key with a newline inside (SMTP)", args: MB, exit: 78, env: { MAILSEND_API_KEY: `${KEY}\nX` }, smtp: true },
  { why: "both key variables", args: MB, exit: 78, env: { MAILSEND_API_KEY_FILE: P("goodKey") }, says: /both/ },
  { why: "an empty key on stdin", args: [...MB, "--api-key-stdin"], exit: 78, env: { MAILSEND_API_KEY: undefined } },
  { why: "no base URL", args: MB, exit: 78, env: { MAILSEND_BASE_URL: undefined }, says: /hint:.*MAILSEND_BASE_URL/ },
  { why: "a base URL that is not http(s)", args: [...MB, "--base-url", "ftp://127.0.0.1/"], exit: 78 },
  {
    why: "no SMTP host",
    args: MB,
    exit: 78,
    env: { MAILSEND_SMTP_HOST: undefined },
    smtp: true,
    says: /hint:.*MAILSEND_SMTP_HOST/,
  },
  {
    why: "a timeout out of range in the environment",
    args: MB,
    exit: 78,
    env: { MAILSEND_TIMEOUT: "0" },
    says: /MAILSEND_TIMEOUT must be a whole number/,
  },
  {
    why: "port 465 with STARTTLS",
    args: [...MB, "--smtp-port", "465", "--smtp-tls", "starttls"],
    exit: 78,
    smtp: true,
  },
  { why: "an unknown transport in the environment", args: MB, exit: 78, env: { MAILSEND_TRANSPORT: "fax" } },
  { why: "a missing --ca-file", args: [...MB, "--ca-file", "/nonexistent/ca.pem"], exit: 78, smtp: true },
];

function argsFor(c: Case): string[] {
  // "@@att#name": the ok.txt attachment renamed.
  const args = c.args.map((a) => (a.startsWith("@@att#") ? `${paths.att}#${a.slice(6)}` : a));
  const resolved = resolve(args);
  if (!c.smtp) return ["send", ...resolved];
  // Explicit ports/TLS come after the case's own flags only when the case does not set them.
  const own = (f: string) => resolved.includes(f);
  return [
    "send",
    "--transport",
    "smtp",
    ...(own("--smtp-port") ? [] : ["--smtp-port", String(sink.port), "--smtp-tls", "starttls"]),
    ...(own("--ca-file") ? [] : ["--ca-file", caPath]),
    ...resolved,
  ];
}

function envFor(c: Case): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {
    MAILSEND_API_KEY: KEY,
    MAILSEND_BASE_URL: rec.url,
    MAILSEND_SMTP_HOST: "127.0.0.1",
    // The REST cases stay REST (with an SMTP host, send's default is auto); an SMTP case gives --transport smtp.
    MAILSEND_TRANSPORT: "rest",
  };
  for (const [k, v] of Object.entries(c.env ?? {})) env[k] = v?.startsWith("@@") ? paths[v.slice(2)] : v;
  return env;
}

function nothingReached() {
  expect(rec.connections).toBe(0);
  expect(rec.requests).toHaveLength(0);
  expect(sink.connections).toBe(0);
  expect(sink.messages).toHaveLength(0);
}

describe("bad input sends nothing", () => {
  it.each(CASES.map((c) => [c.why, c.exit, c] as const))("%s -> %i", async (_why, exit, c) => {
    const input =
      c.args.includes("--json-file") && c.args.includes("-")
        ? "{not json"
        : c.args.includes("--api-key-stdin")
          ? ""
          : undefined;
    const r = await runInProcess(argsFor(c), { env: envFor(c), ...(input !== undefined ? { input } : {}) });
    expect(r.exitCode, r.stderr).toBe(exit);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^error: /);
    if (c.says) expect(r.stderr).toMatch(c.says);
    expect(r.stderr).not.toContain(KEY);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    nothingReached();
  });
});

describe("--json errors", () => {
  it.each([
    ["usage", ["-t", "b@example.com", "-s", "x", "--html", "x"], 64],
    ["invalid_address", ["-f", "nope", "-t", "b@example.com", "-s", "x", "--html", "x"], 65],
    ["file_not_found", [...MB, "-a", "/nonexistent/x"], 66],
  ] as const)("%s: stderr is exactly one error object, stdout empty", async (code, args, exit) => {
    const r = await runInProcess(["send", ...args, "--json"], {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
    });
    expect(r.exitCode).toBe(exit);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    const e = stderrJson(r).error;
    expect(e).toMatchObject({ code, exit });
    expect(typeof e.message).toBe("string");
    nothingReached();
  });

  it("a commander usage error under --json is a JSON object too", async () => {
    const r = await runInProcess(["send", ...MB, "--json", "--no-such-flag"], {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
    });
    expect(r.exitCode).toBe(64);
    expect(stderrJson(r).error).toMatchObject({ code: "usage", exit: 64 });
    nothingReached();
  });

  // commander's "(run with --help for usage)" after the object would make stderr more than JSON.
  it("under --json a commander usage error leaves only the JSON object on stderr", async () => {
    const r = await runInProcess(["send", ...MB, "--json", "--no-such-flag"], {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
    });
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});
