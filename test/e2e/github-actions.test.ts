/**
 * GitHub Actions, end to end: --github-output appends to the $GITHUB_OUTPUT
 * file in the runner's format; with GITHUB_ACTIONS=true errors are also
 * ::error annotations (escaped, never with the key), and only then.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BIN, baseEnv, runInProcess, stderrJson, stdoutJson, type RunOptions } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";
import { loadYaml } from "../helpers/yaml.js";
import { lacks, pyyaml } from "../helpers/tools.js";

const KEY = "msk_test_e2e_github_Hn52Kc";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
afterAll(() => tmp.remove());

const MSG = ["-f", "ci@example.com", "-t", "dev@example.com", "-s", "Build", "--text", "ok"];
let n = 0;
const outputFile = (initial = "") => tmp.file(`github-output-${++n}`, initial);

function send(args: string[], opts: RunOptions = {}) {
  return runInProcess(["send", ...MSG, ...args], {
    ...opts,
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...opts.env },
  });
}

/** Parse a $GITHUB_OUTPUT file the way the runner does. */
function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line) continue;
    const heredoc = /^([^=<]+)<<(.+)$/.exec(line);
    if (heredoc) {
      const value: string[] = [];
      while (lines[++i] !== heredoc[2]) {
        if (i >= lines.length) throw new Error(`unterminated ${heredoc[1]}`);
        value.push(lines[i]!);
      }
      out[heredoc[1]!] = value.join("\n");
    } else {
      const eq = line.indexOf("=");
      out[line.slice(0, eq)] = line.slice(eq + 1);
    }
  }
  return out;
}

describe("--github-output", () => {
  it("appends message_id=<id> to $GITHUB_OUTPUT, keeping what is there", async () => {
    rec.script({ body: { success: true, message_id: "msg_gh_1" } });
    const file = outputFile("earlier=step\n");
    const r = await send(["--github-output"], { env: { GITHUB_OUTPUT: file } });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(readFileSync(file, "utf8")).toBe("earlier=step\nmessage_id=msg_gh_1\n");
  });

  it("the same with --json (stdout stays the result object)", async () => {
    rec.script({ body: { success: true, message_id: "msg_gh_2" } });
    const file = outputFile();
    const r = await send(["--github-output", "--json"], { env: { GITHUB_OUTPUT: file } });
    expect(stdoutJson(r).message_id).toBe("msg_gh_2");
    expect(readFileSync(file, "utf8")).toBe("message_id=msg_gh_2\n");
  });

  it("uses the delimiter form when the id holds a line break, so it cannot add another output", async () => {
    rec.script({ body: { success: true, message_id: "msg_3\nexit_code=0" } });
    const file = outputFile();
    const r = await send(["--github-output"], { env: { GITHUB_OUTPUT: file } });
    expect(r.exitCode, r.stderr).toBe(0);
    const text = readFileSync(file, "utf8");
    expect(text).toMatch(/^message_id<<ghadelimiter_[0-9a-f-]{36}\nmsg_3\nexit_code=0\nghadelimiter_[0-9a-f-]{36}\n$/);
    expect(parseOutputs(text)).toEqual({ message_id: "msg_3\nexit_code=0" });
  });

  it("without GITHUB_OUTPUT: a warning, the send still succeeds", async () => {
    const r = await send(["--github-output"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(/^warning: --github-output: GITHUB_OUTPUT is not set/);
    const j = await send(["--github-output", "--json"]);
    expect(JSON.parse(j.stderr.trim())).toEqual({ warning: expect.stringMatching(/GITHUB_OUTPUT is not set/) });
  });

  it("an unwritable GITHUB_OUTPUT: a warning, exit 0 (the mail went out; failing would invite a resend)", async () => {
    const r = await send(["--github-output"], { env: { GITHUB_OUTPUT: join(tmp.dir, "no", "such", "dir", "out") } });
    expect(r.exitCode).toBe(0);
    expect(rec.requests).toHaveLength(1);
    expect(r.stderr).toMatch(/cannot append to GITHUB_OUTPUT \(ENOENT\)/);
  });

  it("without the flag nothing is written, even in Actions", async () => {
    const file = outputFile();
    const r = await send([], { env: { GITHUB_OUTPUT: file, GITHUB_ACTIONS: "true" } });
    expect(r.exitCode).toBe(0);
    expect(readFileSync(file, "utf8")).toBe("");
  });

  it("nothing is written when the send fails", async () => {
    rec.script({ status: 401, body: { success: false, error: { code: "unauthorized", message: "bad key" } } });
    const file = outputFile();
    const r = await send(["--github-output"], { env: { GITHUB_OUTPUT: file } });
    expect(r.exitCode).toBe(77);
    expect(readFileSync(file, "utf8")).toBe("");
  });

  it("batch: the counts", async () => {
    rec.script((req) =>
      req.json?.to === "bad@example.com"
        ? { status: 400, body: { success: false, error: { code: "invalid", message: "no" } } }
        : {},
    );
    const rows = tmp.file(
      "rows.jsonl",
      ['{"to":"a@example.com"}', '{"to":"b@example.com"}', '{"to":"bad@example.com"}', '{"to":"not an address"}'].join(
        "\n",
      ),
    );
    const file = outputFile();
    const r = await runInProcess(
      [
        "batch",
        rows,
        "-f",
        "ci@example.com",
        "-s",
        "x",
        "--text-file",
        tmp.file("t.txt", "hi"),
        "--github-output",
        "--results",
        join(tmp.dir, "gh-results.jsonl"),
      ],
      {
        env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, GITHUB_OUTPUT: file },
      },
    );
    expect(r.exitCode).toBe(65);
    expect(parseOutputs(readFileSync(file, "utf8"))).toEqual({
      sent: "2",
      already_sent: "0",
      failed: "1",
      unknown: "0",
      invalid: "1",
      total: "4",
      partial: "0",
    });
    expect(r.stderr).not.toContain("::error");
  });
});

describe("::error annotations", () => {
  const ANNOTATION = /^::error title=mailsend::/m;

  it("with GITHUB_ACTIONS=true: the normal error output, plus one annotation with the hint, escaped", async () => {
    const r = await runInProcess(["send", ...MSG], { env: { GITHUB_ACTIONS: "true", MAILSEND_BASE_URL: rec.url } });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/^error: no API key\nhint: /);
    const lines = r.stderr.split("\n").filter((l) => l.startsWith("::"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^::error title=mailsend::no API key%0ASet MAILSEND_API_KEY, /);
    expect(r.stdout).toBe("");
  });

  it("escape %, CR and LF as the runner requires", async () => {
    const config = tmp.file("pct.json", '{"profiles": {"w": {"x%y": 1}}}');
    const r = await runInProcess(["send", ...MSG], { env: { GITHUB_ACTIONS: "true", MAILSEND_CONFIG: config } });
    expect(r.exitCode).toBe(78);
    const line = r.stderr.split("\n").find((l) => l.startsWith("::error"))!;
    expect(line).toContain('unknown key "x%25y" (line 1)%0AA profile may hold');
  });

  it("never hold the key (a refused key)", async () => {
    rec.script({
      status: 401,
      body: { success: false, error: { code: "unauthorized", message: `key ${KEY} is wrong` } },
    });
    const r = await send([], { env: { GITHUB_ACTIONS: "true" } });
    expect(r.exitCode).toBe(77);
    expect(r.stderr).toMatch(ANNOTATION);
    expect(r.stderr).not.toContain(KEY);
  });

  it("under --json: stderr keeps its JSON error line, the annotation is a line of its own", async () => {
    const r = await runInProcess(["send", ...MSG, "--json"], {
      env: { GITHUB_ACTIONS: "true", MAILSEND_BASE_URL: rec.url },
    });
    expect(r.exitCode).toBe(78);
    expect(stderrJson(r).error).toMatchObject({ code: "config_missing", exit: 78 });
    expect(r.stderr).toMatch(ANNOTATION);
    expect(r.stdout).toBe("");
  });

  it("for usage errors commander reports too", async () => {
    const r = await runInProcess(["send", "--no-such-flag"], { env: { GITHUB_ACTIONS: "true" } });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/^::error title=mailsend::unknown option '--no-such-flag'$/m);
  });

  it("for a batch with failed items: one annotation with the summary", async () => {
    const rows = tmp.file("rows-ann.jsonl", '{"to":"a@example.com"}\n{"to":"not an address"}\n');
    const r = await runInProcess(
      [
        "batch",
        rows,
        "-f",
        "ci@example.com",
        "-s",
        "x",
        "--text-file",
        tmp.file("t2.txt", "hi"),
        "--results",
        join(tmp.dir, "ann-results.jsonl"),
      ],
      {
        env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, GITHUB_ACTIONS: "true" },
      },
    );
    expect(r.exitCode).toBe(65);
    const lines = r.stderr.split("\n").filter((l) => l.startsWith("::"));
    expect(lines).toEqual([
      expect.stringMatching(/^::error title=mailsend::batch: 1 sent, 1 invalid \(of 2\) in \d+\.\d s$/),
    ]);
  });

  it("absent without GITHUB_ACTIONS=true", async () => {
    for (const value of [undefined, "false", "1"]) {
      const r = await runInProcess(["send", ...MSG], { env: { GITHUB_ACTIONS: value, MAILSEND_BASE_URL: rec.url } });
      expect(r.exitCode).toBe(78);
      expect(r.stderr).not.toContain("::error");
    }
  });
});

describe("the recipes in docs/ci.md", () => {
  it("GitHub Actions and GitLab CI jobs are there and use MAILSEND_API_KEY from the secret store and --github-output", () => {
    const guide = readFileSync(new URL("../../docs/ci.md", import.meta.url), "utf8");
    const section = guide.slice(0, guide.indexOf("\n## The GitHub Action"));
    expect(section).toContain("MAILSEND_API_KEY: ${{ secrets.MAILSEND_API_KEY }}");
    expect(section).toContain("--github-output");
    expect(section).toContain("steps.mail.outputs.message_id");
    expect(section).toMatch(/stage: \.post/);
    expect(section).toContain("--attach build.log");
  });
});

describe("the CI recipes of docs/ci.md, run", () => {
  const readme = () => readFileSync(new URL("../../docs/ci.md", import.meta.url), "utf8");
  /** A PATH on which `mailsend` is the built binary, as after the recipes' install. */
  const pathWithMailsend = () => {
    const dir = join(tmp.dir, "bin");
    mkdirSync(dir, { recursive: true });
    if (!existsSync(join(dir, "mailsend"))) symlinkSync(BIN, join(dir, "mailsend"));
    return `${dir}:${process.env.PATH}`;
  };

  /** A recipe's shell, in cwd, with mailsend on PATH and pointed at the recorder, plus the CI system's variables. */
  const runRecipe = ([shell, ...args]: string[], cwd: string, ciEnv: Record<string, string>) =>
    execa(shell!, args, {
      cwd,
      reject: false,
      extendEnv: false,
      env: { ...baseEnv(), PATH: pathWithMailsend(), ...ciEnv, MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
      timeout: 30_000,
    });

  /** The `run: |` block of the "Mail the build log" step, dedented. */
  function githubStep(): string {
    const text = readme();
    const step = text.indexOf("- name: Mail the build log");
    const lines = text.slice(text.indexOf("run: |", step)).split("\n").slice(1);
    const body = lines.slice(
      0,
      lines.findIndex((l) => /^\s*- /.test(l) || l.startsWith("```")),
    );
    const indent = Math.min(...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
    return body.map((l) => l.slice(indent)).join("\n");
  }

  /** The GitLab job's script lines as GitLab reads the YAML, without the install. */
  function gitlabScript(): string[] {
    const text = readme();
    const yaml = text.slice(text.indexOf("notify:"), text.indexOf("```", text.indexOf("notify:")));
    const script = loadYaml(yaml).notify.script as unknown[];
    // GitLab refuses a job whose script has anything but strings (a line with ": " in it is a mapping).
    for (const line of script) expect(typeof line, JSON.stringify(line)).toBe("string");
    return (script as string[]).filter((l) => !l.startsWith("npm install"));
  }

  for (const withLog of [true, false]) {
    it(`GitHub Actions: the mail step as written sends the summary and ${withLog ? "the build log" : "a placeholder when there is no log"}; message_id reaches $GITHUB_OUTPUT`, async () => {
      const cwd = join(tmp.dir, `gh-run-${withLog}`);
      mkdirSync(cwd, { recursive: true });
      if (withLog) writeFileSync(join(cwd, "build.log"), "compiling...\nerror: it broke\n");
      const out = outputFile();
      rec.script({ body: { success: true, message_id: "msg_recipe_gh" } });
      const r = await runRecipe(["bash", "-eo", "pipefail", "-c", githubStep()], cwd, {
        GITHUB_ACTIONS: "true",
        GITHUB_OUTPUT: out,
        GITHUB_REPOSITORY: "acme/app",
        GITHUB_SHA: "0123abc",
        GITHUB_RUN_NUMBER: "42",
        GITHUB_RUN_ID: "9001",
        GITHUB_SERVER_URL: "https://github.example",
        STATUS: withLog ? "failure" : "cancelled",
      });
      expect(r.exitCode, String(r.stderr)).toBe(0);
      expect(parseOutputs(readFileSync(out, "utf8")).message_id).toBe("msg_recipe_gh");
      const req = rec.requests[0]!;
      expect(req.json.subject).toBe(`acme/app #42: ${withLog ? "failure" : "cancelled"}`);
      expect(req.json.html).toContain("acme/app");
      expect(req.json.html).toContain('href="https://github.example/acme/app/actions/runs/9001"');
      const log = Buffer.from(req.json.attachments[0].content, "base64").toString();
      expect(req.json.attachments[0].filename).toBe("build.log");
      expect(log).toContain(withLog ? "error: it broke" : "stopped before the build wrote a log");
    });
  }

  it.skipIf(lacks(pyyaml))(
    "GitLab CI: the notify job's script lines as written send the pipeline summary with the log",
    async () => {
      const cwd = join(tmp.dir, "gl-run");
      mkdirSync(cwd, { recursive: true });
      writeFileSync(join(cwd, "build.log"), "gitlab build output\n");
      rec.script({ body: { success: true, message_id: "msg_recipe_gl" } });
      const r = await runRecipe(["sh", "-ec", gitlabScript().join("\n")], cwd, {
        CI_PROJECT_PATH: "acme/app",
        CI_PIPELINE_ID: "777",
        CI_PIPELINE_URL: "https://gitlab.example/acme/app/-/pipelines/777",
        CI_COMMIT_REF_NAME: "main",
      });
      expect(r.exitCode, String(r.stderr)).toBe(0);
      const req = rec.requests[0]!;
      expect(req.json.subject).toBe("acme/app pipeline 777 (main)");
      expect(req.json.html).toContain("https://gitlab.example/acme/app/-/pipelines/777");
      expect(Buffer.from(req.json.attachments[0].content, "base64").toString()).toBe("gitlab build output\n");
    },
  );
});

// Keep the helper honest: a file written by hand in the runner's format parses back.
it("parseOutputs reads both forms", () => {
  writeFileSync(join(tmp.dir, "fmt"), "a=1\nb<<EOF\nx\ny\nEOF\n");
  expect(parseOutputs(readFileSync(join(tmp.dir, "fmt"), "utf8"))).toEqual({ a: "1", b: "x\ny" });
});
