/**
 * A body piped to `mailsend send` without a body flag: text is
 * sent as text (escaped in <pre> over REST, text/plain over SMTP) exactly as
 * `--text-file -` sends it, HTML stays HTML. Real output of real commands
 * (df -h, git log, a coverage.py HTML report), the built binary, a recording
 * REST server and an SMTP sink.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ROOT, baseEnv, runInProcess, stdoutJson, type RunOptions, mailsendCommand } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { headerSection, parseMessage, startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, pythonCoverage } from "../helpers/tools.js";

const KEY = "msk_test_e2e_stdin_Zr4Kp9";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
let sink: SmtpSink;
let caPath: string;

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  sink = await startSmtpSink({ mode: "starttls", tls, key: KEY });
});
afterAll(async () => {
  await sink?.close();
  tmp.remove();
});
beforeEach(() => sink.reset());

const MIN = ["-f", "cron@example.com", "-t", "ops@example.com", "-s", "disk"];

function rest(args: string[], opts: RunOptions = {}) {
  return runInProcess(["send", ...MIN, ...args], {
    ...opts,
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...opts.env },
  });
}

function smtp(args: string[], opts: RunOptions = {}) {
  return runInProcess(
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--ca-file",
      caPath,
      ...MIN,
      ...args,
    ],
    {
      ...opts,
      env: { MAILSEND_API_KEY: KEY, ...opts.env },
    },
  );
}

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");

/** The html field of the last REST request. */
const lastHtml = () => rec.requests.at(-1)!.json.html as string;

/** Send over REST once piped and once as --text-file -: the same request body. */
async function sameAsTextFile(input: string): Promise<string> {
  const piped = await rest([], { input });
  expect(piped.exitCode, piped.stderr).toBe(0);
  const a = lastHtml();
  const explicit = await rest(["--text-file", "-"], { input });
  expect(explicit.exitCode, explicit.stderr).toBe(0);
  expect(a).toBe(lastHtml());
  return a;
}

const DF = execFileSync("df", ["-h"], { encoding: "utf8" });
const GIT_LOG = execFileSync("git", ["log", "-n", "5", "--stat"], { cwd: ROOT, encoding: "utf8" });
const DOCKER_IMAGES = [
  "REPOSITORY               TAG       IMAGE ID       CREATED        SIZE",
  "registry.example/app     1.4.2     4f3c2a1b0e9d   2 days ago     212MB",
  "<none>                   <none>    9a8b7c6d5e4f   3 weeks ago    1.21GB",
  "<none>                   <none>    0f1e2d3c4b5a   5 weeks ago    1.19GB",
  "",
].join("\n");
const MARKDOWN =
  "# Build 42 passed\n\n- **311** tests, 0 failures\n- coverage: 91%\n\n| step | time |\n|------|------|\n| test | 41 s |\n\n> see <https://ci.example.com/42>\n";

/** A real HTML report: coverage.py's, of a two-line program. */
function coverageReport(): string {
  const tool = pythonCoverage.path!;
  const dir = join(tmp.dir, "cov");
  execFileSync("mkdir", ["-p", dir]);
  const prog = join(dir, "m.py");
  execFileSync("sh", ["-c", `printf 'def f(x):\\n    return x + 1\\nprint(f(1))\\n' > ${prog}`]);
  execFileSync(tool, ["run", "--data-file", join(dir, ".coverage"), prog], { cwd: dir, stdio: "ignore" });
  execFileSync(tool, ["html", "--data-file", join(dir, ".coverage"), "-d", join(dir, "html")], {
    cwd: dir,
    stdio: "ignore",
  });
  const index = join(dir, "html", "index.html");
  expect(existsSync(index)).toBe(true);
  return readFileSync(index, "utf8");
}

describe("text piped without a body flag is sent as text, as --text-file - would", () => {
  it("df -h: escaped inside <pre>, the columns kept", async () => {
    expect(DF).toMatch(/Filesystem/);
    const html = await sameAsTextFile(DF);
    expect(html).toBe(`<pre>${escapeHtml(DF)}</pre>`);
  });

  it("git log", async () => {
    expect(GIT_LOG).toMatch(/^commit [0-9a-f]{40}/);
    expect(await sameAsTextFile(GIT_LOG)).toBe(`<pre>${escapeHtml(GIT_LOG)}</pre>`);
  });

  it("docker images with <none>, also with the header row cut off", async () => {
    expect(await sameAsTextFile(DOCKER_IMAGES)).toContain("&lt;none&gt;                   &lt;none&gt;");
    const rows = DOCKER_IMAGES.split("\n").slice(2).join("\n");
    expect(rows.startsWith("<none>")).toBe(true);
    expect(await sameAsTextFile(rows)).toBe(`<pre>${escapeHtml(rows)}</pre>`);
  });

  it("Markdown-looking text", async () => {
    expect(await sameAsTextFile(MARKDOWN)).toBe(`<pre>${escapeHtml(MARKDOWN)}</pre>`);
  });

  it("over SMTP: a text/plain message and no HTML part", async () => {
    const r = await smtp([], { input: DOCKER_IMAGES });
    expect(r.exitCode, r.stderr).toBe(0);
    const raw = sink.messages[0]!.raw;
    expect(headerSection(raw)).toMatch(/^Content-Type: text\/plain; charset=utf-8$/im);
    const parsed = await parseMessage(raw);
    expect(parsed.text).toBe(DOCKER_IMAGES);
    expect(parsed.html).toBeUndefined();
  });
});

describe("HTML piped without a body flag stays HTML", () => {
  it.skipIf(lacks(pythonCoverage))("a coverage.py HTML report, byte for byte", async () => {
    const page = coverageReport();
    expect(page.trimStart().toLowerCase().startsWith("<!doctype html>")).toBe(true);
    // --no-embed: its local images (keybd_closed.png, ...) are not beside the test; over REST they could not be inline anyway.
    const r = await rest(["--no-embed"], { input: page });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(lastHtml()).toBe(page);
  });

  it.each([
    ["<p>hi</p>"],
    ["<table>\n  <tr><th>host</th><th>use</th></tr>\n  <tr><td>db1</td><td>91%</td></tr>\n</table>\n"],
  ])("a fragment: %s", async (fragment) => {
    const r = await rest([], { input: fragment });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(lastHtml()).toBe(fragment);
  });

  it("over SMTP: text/html", async () => {
    const r = await smtp([], { input: "<p>hi <b>there</b></p>" });
    expect(r.exitCode, r.stderr).toBe(0);
    const parsed = await parseMessage(sink.messages[0]!.raw);
    expect(parsed.html?.trim()).toBe("<p>hi <b>there</b></p>");
  });
});

describe("--stdin-type, -v and --json", () => {
  it("--stdin-type html sends text as HTML; --stdin-type text sends a page as text", async () => {
    expect((await rest(["--stdin-type", "html"], { input: DOCKER_IMAGES })).exitCode).toBe(0);
    expect(lastHtml()).toBe(DOCKER_IMAGES);
    expect((await rest(["--stdin-type", "text"], { input: "<p>hi</p>" })).exitCode).toBe(0);
    expect(lastHtml()).toBe("<pre>&lt;p&gt;hi&lt;/p&gt;</pre>");
  });

  it("--stdin-type with a body flag is a usage error", async () => {
    const r = await rest(["--text", "x", "--stdin-type", "text"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/--stdin-type applies only to a body piped on stdin/);
  });

  it("-v says which was chosen and why", async () => {
    const t = await rest(["-v"], { input: DF });
    expect(t.exitCode).toBe(0);
    expect(t.stderr).toMatch(
      /^\* the body piped on stdin is sent as plain text: it does not start with HTML markup .*--stdin-type html to change that/m,
    );
    const h = await rest(["-v"], { input: "<p>x</p>" });
    expect(h.stderr).toMatch(/^\* the body piped on stdin is sent as HTML: it starts with the HTML element <p>/m);
  });

  it("--json has stdin.type and stdin.reason; no stdin field when the body came from a flag", async () => {
    const r = await rest(["--json"], { input: DOCKER_IMAGES });
    expect(r.exitCode).toBe(0);
    expect(stdoutJson(r).stdin).toEqual({
      type: "text",
      reason: "it does not start with HTML markup (<!DOCTYPE html>, <html> or an element such as <p>, <table>, <div>)",
    });
    const f = await rest(["--json", "--stdin-type", "html"], { input: "x" });
    expect(stdoutJson(f).stdin).toEqual({ type: "html", reason: "--stdin-type html" });
    expect(stdoutJson(await rest(["--json", "--text", "x"])).stdin).toBeUndefined();
  });
});

describe("mistakes in a pipe are named", () => {
  it("an empty pipe: stdin was empty (0 bytes), exit 66, nothing sent", async () => {
    for (const args of [[], ["--text-file", "-"]]) {
      const r = await rest(args, { input: "" });
      expect(r.exitCode).toBe(66);
      expect(r.stderr).toMatch(/^error: stdin was empty \(0 bytes\)/m);
      expect(r.stderr).toMatch(/wrote nothing/);
    }
    expect(rec.requests).toHaveLength(0);
  });

  it("no body and stdin /dev/null is still 'missing a body' (64)", async () => {
    const r = await rest([]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/missing a body/);
  });

  it("binary stdin: to send a file, use --attach (65)", async () => {
    const pdf = Buffer.concat([Buffer.from("%PDF-1.7\n"), Buffer.from([0, 1, 2, 255])]);
    const r = await rest([], { input: pdf });
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/stdin is a PDF, not a message body/);
    expect(r.stderr).toMatch(/to send a file, use --attach/i);
    const n = await rest(["--text-file", "-"], { input: Buffer.from("abc\0def") });
    expect(n.exitCode).toBe(65);
    expect(n.stderr).toMatch(/NUL byte at offset 3/);
    expect(rec.requests).toHaveLength(0);
  });

  it("data piped to a send whose body came from a flag: a warning, and the flag's body is sent", async () => {
    const r = await rest(["--text", "see attached"], { input: DF });
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(
      /^warning: data on stdin is not read: the body comes from --text \(to send what is piped, use --text-file -/m,
    );
    expect(lastHtml()).toBe("<pre>see attached</pre>");
    const j = await rest(["--html", "<p>x</p>", "--json"], { input: "ignored" });
    expect(j.stderr).toMatch(/^\{"warning":"data on stdin is not read: the body comes from --html/m);
    const quiet = await rest(["--text", "x"]);
    expect(quiet.stderr).toBe("");
  });

  it("an idle pipe is never waited for when a body flag is given", async () => {
    const started = Date.now();
    const child = execa(...mailsendCommand(["send", ...MIN, "--text", "x"]), {
      reject: false,
      extendEnv: false,
      env: { ...baseEnv(), MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
      stdin: "pipe",
      timeout: 15_000,
    });
    const r = await child;
    child.stdin?.destroy();
    expect(r.timedOut).toBe(false);
    expect(r.exitCode).toBe(0);
    expect(String(r.stderr)).toBe("");
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
