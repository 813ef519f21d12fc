/**
 * Markdown bodies, end to end: over REST the rendered HTML is the html
 * field; over SMTP the Markdown source is the text part and the HTML its
 * alternative; raw HTML is escaped unless --allow-html; batch fills a
 * Markdown template per row.
 */
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess, type RunOptions } from "../helpers/cli.js";
import { startRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { headerSection, parseMessage, startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_markdown_Vb71Qs";
const tmp = scratch();
let rec: RestRecorder;
let sink: SmtpSink;
let caPath: string;

const SOURCE = [
  "# Build 42 passed",
  "",
  "- **311** tests, `0` failures",
  "- [the run](https://ci.example.com/runs/42)",
  "",
  "<script>alert('x')</script>",
  "",
  'Inline <img src=x onerror="alert(1)"> and [a trap](javascript:alert(1)).',
  "",
].join("\n");

const RENDERED = [
  "<h1>Build 42 passed</h1>",
  "<ul>",
  "<li><strong>311</strong> tests, <code>0</code> failures</li>",
  '<li><a href="https://ci.example.com/runs/42">the run</a></li>',
  "</ul>",
  "<p>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</p>",
  "<p>Inline &lt;img src=x onerror=&quot;alert(1)&quot;&gt; and a trap.</p>",
  "",
].join("\n");

beforeAll(async () => {
  const tls = await tmp.tls();
  caPath = tls.caPath;
  [rec, sink] = await Promise.all([startRestRecorder(), startSmtpSink({ mode: "starttls", tls, key: KEY })]);
});
afterAll(async () => {
  await Promise.all([rec.close(), sink.close()]);
  tmp.remove();
});
beforeEach(() => {
  rec.reset();
  sink.reset();
});

const md = () => tmp.file("notes.md", SOURCE);
const MSG = ["-f", "ci@example.com", "-t", "dev@example.com", "-s", "Build 42"];

function rest(args: string[], opts: RunOptions = {}) {
  return runInProcess(["send", ...MSG, ...args], {
    ...opts,
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...opts.env },
  });
}

function smtp(args: string[]) {
  return runInProcess(
    [
      "send",
      ...MSG,
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--smtp-tls",
      "starttls",
      "--ca-file",
      caPath,
      ...args,
    ],
    { env: { MAILSEND_API_KEY: KEY } },
  );
}

describe("over REST", () => {
  it("the html field is the rendering, raw HTML and script links escaped; no 'text not sent' warning", async () => {
    const r = await rest(["--markdown-file", md()]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(rec.requests[0]!.json).toStrictEqual({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "Build 42",
      html: RENDERED,
    });
  });

  it("--allow-html keeps raw HTML as written", async () => {
    // --no-embed: the raw <img src=x> is kept as written, not looked for as a local image.
    const r = await rest(["--markdown-file", md(), "--allow-html", "--no-embed"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const html: string = rec.requests[0]!.json.html;
    expect(html).toContain("<script>alert('x')</script>");
    expect(html).toContain('<img src=x onerror="alert(1)">');
  });

  it("from stdin with -", async () => {
    const r = await rest(["--markdown-file", "-"], { input: "**bold** <b>raw</b>" });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests[0]!.json.html).toBe("<p><strong>bold</strong> &lt;b&gt;raw&lt;/b&gt;</p>\n");
  });

  it("--dry-run shows the rendered body", async () => {
    const r = await rest(["--markdown-file", md(), "--dry-run"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(JSON.stringify(RENDERED));
  });
});

describe("over SMTP", () => {
  it("the text part is the Markdown source, the HTML part its rendering (multipart/alternative)", async () => {
    const r = await smtp(["--markdown-file", md()]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(sink.messages).toHaveLength(1);
    const raw = sink.messages[0]!.raw;
    expect(headerSection(raw)).toMatch(/^Content-Type: multipart\/alternative;/m);
    const parsed = await parseMessage(raw);
    // MIME adds a line break before the boundary; the source is there as written.
    expect(parsed.text?.trimEnd()).toBe(SOURCE.trimEnd());
    expect(raw.toString("utf8")).toContain(SOURCE.trimEnd().replace(/\n/g, "\r\n"));
    expect(parsed.html?.trimEnd()).toBe(RENDERED.trimEnd());
  });

  it("--allow-html: the script stays in the HTML part", async () => {
    const r = await smtp(["--markdown-file", md(), "--allow-html", "--no-embed"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const parsed = await parseMessage(sink.messages[0]!.raw);
    expect(parsed.html).toContain("<script>alert('x')</script>");
    expect(parsed.text?.trimEnd()).toBe(SOURCE.trimEnd());
  });
});

describe("--transport auto", () => {
  it("with only REST configured sends the rendering over REST (as --transport rest does), not 78: the source is its plain version", async () => {
    const r = await rest(["--markdown-file", md(), "--transport", "auto", "--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ transport: "rest", reason: "only REST is configured" });
    expect(rec.requests[0]!.json.html).toBe(RENDERED);
  });

  it("with both configured prefers SMTP, which carries the source as the text part, and says so", async () => {
    const r = await runInProcess(
      [
        "send",
        ...MSG,
        "--markdown-file",
        md(),
        "--transport",
        "auto",
        "--json",
        "--base-url",
        rec.url,
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(sink.port),
        "--smtp-tls",
        "starttls",
        "--ca-file",
        caPath,
      ],
      { env: { MAILSEND_API_KEY: KEY } },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ transport: "smtp", reason: "a text part (the Markdown source)" });
    expect(rec.requests).toHaveLength(0);
    expect((await parseMessage(sink.messages[0]!.raw)).text?.trimEnd()).toBe(SOURCE.trimEnd());
  });
});

describe("front matter", () => {
  it("a YAML (---) or TOML (+++) block at the start is the file's metadata: off the HTML and the text; a rule and a heading stay", async () => {
    const body = "# Build 42\n\nAll green.\n";
    const yaml = tmp.file(
      "fm.md",
      `---\r\ntitle: "Build 42"\r\ntags:\r\n  - ci\r\n- nightly\r\n# a comment\r\ndraft: false\r\n---\r\n\r\n${body}`,
    );
    const r = await smtp(["--markdown-file", yaml]);
    expect(r.exitCode, r.stderr).toBe(0);
    const parsed = await parseMessage(sink.messages[0]!.raw);
    expect(parsed.html?.trimEnd()).toBe("<h1>Build 42</h1>\n<p>All green.</p>");
    expect(parsed.text?.trimEnd()).toBe(body.trimEnd());

    const toml = tmp.file("fm.toml.md", `+++\ntitle = "Build 42"\n[params]\n  lang = "en"\n+++\n${body}`);
    const t = await rest(["--markdown-file", toml]);
    expect(t.exitCode, t.stderr).toBe(0);
    expect(rec.requests[0]!.json.html).toBe("<h1>Build 42</h1>\n<p>All green.</p>\n");

    // Not front matter: a rule, then a heading written with a --- underline; and a block never closed.
    const rule = await rest(["--markdown-file", "-"], { input: "---\nRelease notes\n---\n\nbody\n" });
    expect(rule.exitCode, rule.stderr).toBe(0);
    expect(rec.requests[1]!.json.html).toBe("<hr>\n<h2>Release notes</h2>\n<p>body</p>\n");
    const open = await rest(["--markdown-file", "-"], { input: "---\ntitle: x\n\nbody\n" });
    expect(open.exitCode, open.stderr).toBe(0);
    expect(rec.requests[2]!.json.html).toContain("title: x");
  });
});

describe("bad use", () => {
  it("with --html, --html-file, --text or --text-file: usage (64), nothing sent", async () => {
    const html = tmp.file("b.html", "<p>x</p>");
    for (const extra of [
      ["--html", "<p>x</p>"],
      ["--html-file", html],
      ["--text", "x"],
      ["--text-file", html],
    ]) {
      const r = await rest(["--markdown-file", md(), ...extra]);
      expect(r.exitCode, extra.join(" ")).toBe(64);
      expect(r.stderr).toMatch(
        new RegExp(`--markdown-file makes the HTML body and the text body; it cannot be combined with ${extra[0]}`),
      );
    }
    expect(rec.requests).toHaveLength(0);
  });

  it("--allow-html without --markdown-file: usage (64)", async () => {
    const r = await rest(["--html", "<p>x</p>", "--allow-html"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/--allow-html applies only to --markdown-file/);
  });

  it("a missing file: 66", async () => {
    const r = await rest(["--markdown-file", join(tmp.dir, "nope.md")]);
    expect(r.exitCode).toBe(66);
    expect(r.stderr).toMatch(/Markdown file not found: .*nope\.md/);
  });
});

describe("batch --markdown-file", () => {
  it("fills the template per row: values HTML-escaped in the HTML (also in URLs), as they are in the text", async () => {
    const tpl = tmp.file(
      "tpl.md",
      "Hi **{{name}}**,\n\nyour [plan](https://e.example/p/{{id}}) renews.\n\n<i>raw</i>\n",
    );
    const rows = tmp.file("rows.csv", 'to,name,id\na@example.com,"Ann <admin>",7\nb@example.com,Bob,8\n');
    const r = await runInProcess(
      [
        "batch",
        rows,
        "-f",
        "billing@example.com",
        "-s",
        "Renewal",
        "--markdown-file",
        tpl,
        "--results",
        join(tmp.dir, "md-results.jsonl"),
      ],
      {
        env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(rec.requests).toHaveLength(2);
    const byTo = new Map(rec.requests.map((q) => [q.json.to, q.json.html]));
    expect(byTo.get("a@example.com")).toBe(
      '<p>Hi <strong>Ann &lt;admin&gt;</strong>,</p>\n<p>your <a href="https://e.example/p/7">plan</a> renews.</p>\n<p>&lt;i&gt;raw&lt;/i&gt;</p>\n',
    );
    expect(byTo.get("b@example.com")).toContain("<strong>Bob</strong>");
  });

  it("a placeholder a row has no value for is that row's error, naming --markdown-file", async () => {
    const tpl = tmp.file("tpl2.md", "Hi {{missing}}\n");
    const rows = tmp.file("rows2.jsonl", '{"to":"a@example.com"}\n');
    const r = await runInProcess(
      ["batch", rows, "-f", "billing@example.com", "-s", "x", "--markdown-file", tpl, "--check"],
      { env: { MAILSEND_BASE_URL: rec.url } },
    );
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/--markdown-file: no value for \{\{missing\}\}/);
  });

  it("with --html-file: usage (64)", async () => {
    const tpl = tmp.file("tpl3.md", "x");
    const rows = tmp.file("rows3.jsonl", '{"to":"a@example.com"}\n');
    const r = await runInProcess(
      ["batch", rows, "-f", "b@example.com", "-s", "x", "--markdown-file", tpl, "--html-file", tpl, "--check"],
      { env: { MAILSEND_BASE_URL: rec.url } },
    );
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/cannot be combined with --html-file/);
  });
});
