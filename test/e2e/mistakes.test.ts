/**
 * Messages that name the mistake: what a new user types wrong in
 * the first hour, run through the built binary, and the exact word or fix
 * each message names.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, runInProcess, stderrJson } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { addKey, inProcessSandbox, revokeKey, type TestSandbox } from "../helpers/sandbox.js";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_mistakes_Lq2Wc7";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
let sink: SmtpSink;
let caPath: string;
let t: TestSandbox;

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  [sink, t] = await Promise.all([startSmtpSink({ mode: "starttls", tls, key: KEY }), inProcessSandbox()]);
});
afterAll(async () => {
  await Promise.all([sink?.close(), t?.stop()]);
  t?.scratch.remove();
  tmp.remove();
});

const env = () => ({ MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url });

describe("a stray word names itself and shows the quoted form (64, nothing sent)", () => {
  it("-s Build failed", async () => {
    const r = await runInProcess(
      ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "Build", "failed", "--text", "x"],
      { env: env() },
    );
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/^error: unexpected argument "failed" after -s Build$/m);
    expect(r.stderr).toMatch(/^hint: A value with spaces must be quoted: -s 'Build failed'$/m);
    expect(r.stderr).not.toMatch(/too many arguments/);
    expect(rec.requests).toHaveLength(0);
  });

  it("a whole unquoted sentence, and --subject=...", async () => {
    const r = await runInProcess(
      ["send", "-f", "ci@example.com", "--subject=Build", "42", "failed", "again", "-t", "dev@example.com"],
      { env: env() },
    );
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/unexpected argument "42" after --subject Build/);
    expect(r.stderr).toMatch(/--subject 'Build 42 failed again'/);
  });

  it("-t a@x b@y: separate recipients with commas", async () => {
    const r = await runInProcess(
      ["send", "-f", "ci@example.com", "-t", "a@example.com", "b@example.com", "-s", "x", "--text", "x"],
      { env: env() },
    );
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(
      /^error: unexpected argument "b@example\.com" after -t a@example\.com: separate recipients with commas$/m,
    );
    expect(r.stderr).toMatch(
      /-t 'a@example\.com, b@example\.com' \(or repeat it: -t a@example\.com -t b@example\.com\)/,
    );
  });

  it("--json: the same as an error object", async () => {
    const r = await runInProcess(["send", "--json", "-s", "Build", "failed"], { env: env() });
    expect(r.exitCode).toBe(64);
    expect(stderrJson(r).error).toMatchObject({
      code: "usage",
      exit: 64,
      message: 'unexpected argument "failed" after -s Build',
    });
  });

  it("a word after a command that takes none, and a mistyped subcommand", async () => {
    const a = await runInProcess(["send", "report.html"], { env: env() });
    expect(a.exitCode).toBe(64);
    expect(a.stderr).toMatch(/unexpected argument "report\.html": mailsend send takes no arguments/);
    const b = await runInProcess(["inbox", "shwo", "x"]);
    expect(b.exitCode).toBe(64);
    expect(b.stderr).toMatch(/unknown command 'mailsend inbox shwo'/);
    expect(b.stderr).toMatch(/Did you mean `mailsend inbox show`\?/);
  });
});

describe("help for a command that does not exist", () => {
  it("mailsend help nosuch: unknown command, the commands listed (64)", async () => {
    const r = await runInProcess(["help", "nosuch"]);
    expect(r.exitCode).toBe(64);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^error: unknown command 'nosuch'$/m);
    expect(r.stderr).toMatch(/send, batch, run, sandbox/);
  });

  it("a near miss gets a suggestion; a real one still prints its help", async () => {
    const r = await runInProcess(["help", "sned"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/Did you mean `mailsend help send`\?/);
    const ok = await runInProcess(["help", "send"]);
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout).toMatch(/^Usage: mailsend send/);
  });
});

describe("values that are probably something else", () => {
  it("--html report.html when report.html exists: did you mean --html-file?", async () => {
    const path = tmp.file("report.html", "<p>the report</p>");
    const r = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--html", path],
      { env: env() },
    );
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain(
      `warning: --html ${path} sends these words as the body, but a file of that name exists: did you mean --html-file ${path}?`,
    );
    const notes = tmp.file("notes.txt", "notes");
    const t2 = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--text", notes],
      { env: env() },
    );
    expect(t2.stderr).toMatch(/did you mean --text-file /);
    const fine = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--text", "all good"],
      { env: env() },
    );
    expect(fine.stderr).toBe("");
  });

  it("an HTML report that is built by its <script> (an empty root div): sent, with a warning that it will look blank", async () => {
    const spa = tmp.file(
      "playwright-report.html",
      '<!DOCTYPE html><html><head><title>Test Report</title><script type="module">document.getElementById("root").textContent = "42 passed"</script></head><body><div id="root"></div><!-- built at run time --></body></html>',
    );
    const r = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--html-file", spa],
      { env: env() },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      "warning: the HTML body shows nothing until its <script> runs, and no mail client runs scripts",
    );
    expect(r.stderr).toContain(`--attach ${spa}`);
    const piped = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--json"],
      { env: env(), input: '<html><body><div id="app">&nbsp;</div><script src="app.js"></script></body></html>' },
    );
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect(JSON.parse(piped.stderr.trim()).warning).toMatch(/--attach report\.html/);
    // A page with words or an image of its own, scripts or not, is what it shows: no warning.
    for (const html of [
      "<html><body><h1>42 passed</h1><script>track()</script></body></html>",
      '<body><img src="https://ci.example.com/badge.svg"><script>x()</script></body>',
      "<p>no script here</p>",
    ]) {
      const ok = await runInProcess(
        ["send", "-n", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "x", "--html", html],
        { env: env() },
      );
      expect(ok.exitCode, ok.stderr).toBe(0);
      expect(ok.stderr).toBe("");
    }
  });

  it("a@x.com;b@y.com: separate recipients with commas (65)", async () => {
    const r = await runInProcess(
      ["send", "-n", "-f", "ci@example.com", "-t", "a@example.com;b@example.com", "-s", "x", "--text", "x"],
      { env: env() },
    );
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/separate recipients with commas, not semicolons/);
    expect(r.stderr).toMatch(/Write "a@example\.com, b@example\.com"/);
    expect(r.stderr).not.toMatch(/group/);
  });
});

describe("the same refusal reads the same over REST and SMTP", () => {
  it("SMTP 552 gets REST 413's hint", async () => {
    rec.script({ status: 413, body: { success: false, error: { code: "payload_too_large", message: "too big" } } });
    const rest = await runInProcess(["send", "-f", "a@example.com", "-t", "b@example.com", "-s", "x", "--text", "x"], {
      env: env(),
    });
    expect(rest.exitCode).toBe(65);
    sink.script({ data: { code: 552, message: "5.3.4 Message size exceeds fixed limit" } });
    const smtp = await runInProcess(
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
        "-f",
        "a@example.com",
        "-t",
        "b@example.com",
        "-s",
        "x",
        "--text",
        "x",
      ],
      { env: { MAILSEND_API_KEY: KEY } },
    );
    expect(smtp.exitCode).toBe(65);
    const hint = (r: { stderr: string }) => /^hint: (.*)$/m.exec(r.stderr)?.[1];
    expect(hint(smtp)).toBeDefined();
    expect(hint(smtp)).toBe(hint(rest));
  });

  it("a revoked key against the sandbox suggests `mailsend sandbox keys add`, over REST and SMTP", async () => {
    const { id, key } = await addKey(t.dir);
    await revokeKey(t.dir, id);
    for (const transport of ["rest", "smtp"]) {
      const r = await runCli(
        ["send", "--transport", transport, "-f", "a@example.com", "-t", "b@example.com", "-s", "x", "--text", "x"],
        {
          env: { ...t.env, MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: key },
        },
      );
      expect(r.exitCode, r.stderr).toBe(77);
      expect(r.stderr).toMatch(/^hint: .*`mailsend sandbox keys add --save`/m);
      expect(r.stderr).toMatch(
        /writes it to the sandbox.s own key file .*if MAILSEND_API_KEY_FILE names another file, put the new key there/,
      );
    }
  });
});
