/**
 * The GitHub Action (action.yml + action/main.mjs), run the way the runner
 * runs a node action: `node action/main.mjs` in the workspace, each input as
 * INPUT_<NAME> (upper-cased, hyphens kept), the declared defaults filled in,
 * GITHUB_OUTPUT and GITHUB_STEP_SUMMARY naming files, GITHUB_ACTIONS=true,
 * the key in the step's env. Against the sandbox: what it stored, the outputs
 * in the runner's format, the summary, the annotation of a failure.
 * dist/ exists here (the e2e tests run the build), so the entry point does
 * not build; its build path is described in the README.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { baseEnv, ROOT } from "../helpers/cli.js";
import { parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { loadYaml } from "../helpers/yaml.js";
import { lacks, pyyaml } from "../helpers/tools.js";

const ENTRY = join(ROOT, "action", "main.mjs");
const ACTION_YML = readFileSync(join(ROOT, "action.yml"), "utf8");

interface Declared {
  inputs: Map<string, { required: boolean; default?: string }>;
  outputs: string[];
  using?: string;
  main?: string;
}

/** The parts of action.yml the runner reads, from its two-space-indented layout. */
function parseActionYml(text: string): Declared {
  const d: Declared = { inputs: new Map(), outputs: [] };
  let section = "";
  let current: string | undefined;
  for (const line of text.split("\n")) {
    if (/^\s*#/.test(line) || !line.trim()) continue;
    const top = /^(\w[\w-]*):/.exec(line);
    if (top) {
      section = top[1]!;
      current = undefined;
      continue;
    }
    const key = /^ {2}([\w-]+):\s*(.*)$/.exec(line);
    if (key) {
      if (section === "inputs") d.inputs.set((current = key[1]!), { required: false });
      if (section === "outputs") d.outputs.push(key[1]!);
      if (section === "runs" && key[1] === "using") d.using = key[2];
      if (section === "runs" && key[1] === "main") d.main = key[2];
      continue;
    }
    const prop = /^ {4}(required|default):\s*(.*)$/.exec(line);
    if (prop && section === "inputs" && current) {
      const input = d.inputs.get(current)!;
      if (prop[1] === "required") input.required = prop[2] === "true";
      else input.default = prop[2]!.replace(/^"(.*)"$/, "$1");
    }
  }
  return d;
}

const declared = parseActionYml(ACTION_YML);

/** The runner's variable for an input: INPUT_ + the name upper-cased, spaces as "_" (hyphens stay). */
const inputVariable = (name: string) => `INPUT_${name.replace(/ /g, "_").toUpperCase()}`;

/** Parse a $GITHUB_OUTPUT file as the runner does (name=value and name<<DELIM … DELIM). */
function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const heredoc = /^([^=<]+)<<(.+)$/.exec(l);
    if (heredoc) {
      const end = lines.indexOf(heredoc[2]!, i + 1);
      out[heredoc[1]!] = lines.slice(i + 1, end).join("\n");
      i = end;
    } else if (l.includes("=")) out[l.slice(0, l.indexOf("="))] = l.slice(l.indexOf("=") + 1);
  }
  return out;
}

let t: TestSandbox;
let tmp: Scratch;
let runs = 0;
useSandbox((sb) => (t = sb));
beforeAll(async () => {
  tmp = scratch("mailsend-action-");
});
afterAll(async () => {
  tmp?.remove();
});

interface StepResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  summary: string;
}

/** One step: `uses: ./` with these `with:` inputs and this `env:`. */
async function step(
  withInputs: Record<string, string>,
  env: Record<string, string | undefined> = {},
): Promise<StepResult> {
  const n = ++runs;
  const workspace = join(tmp.dir, `workspace-${n}`);
  mkdirSync(workspace, { recursive: true });
  const outputFile = tmp.file(`output-${n}`, "");
  const summaryFile = tmp.file(`summary-${n}`, "");
  const inputs: Record<string, string> = {};
  for (const [name, spec] of declared.inputs)
    if (spec.default !== undefined) inputs[inputVariable(name)] = spec.default;
  for (const [name, value] of Object.entries(withInputs)) inputs[inputVariable(name)] = value;
  const r = await execa(process.execPath, [ENTRY], {
    cwd: env.WORKSPACE ?? workspace,
    env: {
      ...baseEnv(),
      GITHUB_ACTIONS: "true",
      CI: "true",
      GITHUB_WORKSPACE: workspace,
      GITHUB_OUTPUT: outputFile,
      GITHUB_STEP_SUMMARY: summaryFile,
      RUNNER_TEMP: tmp.dir,
      MAILSEND_API_KEY: t.key,
      ...inputs,
      ...env,
    },
    extendEnv: false,
    reject: false,
    stdin: "ignore",
    timeout: 60_000,
  });
  return {
    exitCode: r.exitCode ?? -1,
    stdout: String(r.stdout),
    stderr: String(r.stderr),
    outputs: parseOutputs(readFileSync(outputFile, "utf8")),
    summary: readFileSync(summaryFile, "utf8"),
  };
}

async function stored(subject: string) {
  const m = (await t.sb.store.list({ limit: 1000 })).find((x) => x.subject === subject);
  if (!m) return undefined;
  return { meta: m, email: await parseEml((await t.sb.store.raw(m.id))!) };
}

describe("action.yml", () => {
  test("a node24 action whose entry point exists; the inputs it reads are the ones declared, none of them a key", () => {
    expect(declared.using).toBe("node24");
    expect(existsSync(join(ROOT, declared.main!))).toBe(true);
    const source = readFileSync(ENTRY, "utf8");
    const read = new Set([...source.matchAll(/\b(?:input|list|bool)\("([\w-]+)"/g)].map((m) => m[1]!));
    read.add("body");
    expect([...read].sort()).toEqual([...declared.inputs.keys()].sort());
    expect(
      [...declared.inputs.keys()].filter(
        (n) => /(?:^|-)(?:api-?key|key|token|password|secret)$/.test(n) && n !== "idempotency-key",
      ),
    ).toEqual([]);
    expect(declared.outputs.sort()).toEqual(["error-code", "exit-class", "exit-code", "message-id"]);
    // The key's way in is the environment, and the file says so.
    expect(ACTION_YML).toMatch(/MAILSEND_API_KEY: \$\{\{ secrets\.MAILSEND_API_KEY \}\}/);
  });
});

describe("the action against the sandbox", () => {
  test("markdown-file, two recipients on two lines, attachments (one renamed): sent; message-id and exit-code in GITHUB_OUTPUT; the summary names no address", async () => {
    const ws = join(tmp.dir, "ws-md");
    mkdirSync(join(ws, "out"), { recursive: true });
    tmp.file("ws-md/report.md", "# Build 42\n\n| job | result |\n|---|---|\n| test | **failed** |\n");
    tmp.file("ws-md/out/build.log", "line 1\nline 2\n");
    tmp.file("ws-md/out/junit.xml", "<testsuites/>");
    const r = await step(
      {
        from: "CI <ci@example.com>",
        to: "dev@example.com\nops@example.com\n",
        subject: "Build 42 failed",
        "markdown-file": "report.md",
        attachments: "out/build.log\nout/junit.xml#results.xml",
        "base-url": t.env.MAILSEND_BASE_URL!,
      },
      { WORKSPACE: ws },
    );
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const m = await stored("Build 42 failed");
    expect(m).toBeDefined();
    expect(m!.meta.to.sort()).toEqual(["dev@example.com", "ops@example.com"]);
    expect(m!.meta.attachments.map((a) => a.filename).sort()).toEqual(["build.log", "results.xml"]);
    expect(m!.email.html).toMatch(/<h1[^>]*>Build 42<\/h1>/);
    expect(m!.email.html).toMatch(/<strong>failed<\/strong>/);
    expect(r.outputs).toEqual({
      "message-id": m!.meta.messageId,
      "exit-code": "0",
      "exit-class": "",
      "error-code": "",
    });
    expect(r.stdout).toContain(`mailsend: sent ${m!.meta.messageId} over rest to 2 recipients`);
    expect(r.summary).toMatch(/\*\*mailsend\*\*: sent “Build 42 failed” to 2 recipients over rest/);
    expect(r.summary).not.toMatch(/example\.com/);
    expect(r.stdout + r.stderr).not.toContain(t.key);
  });

  test("body: plain text (df -h) goes as text, HTML as HTML; body-type forces it", async () => {
    const df = "Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        50G   45G  5.0G  90% /\n<none>\n";
    const a = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "disk",
      body: df,
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(a.exitCode, a.stderr).toBe(0);
    expect((await stored("disk"))!.email.html).toMatch(/<pre[^>]*>Filesystem {6}Size[\s\S]*&lt;none&gt;/);
    const b = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "html body",
      body: "<p>Deployed <b>v1.2</b></p>",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(b.exitCode, b.stderr).toBe(0);
    expect((await stored("html body"))!.email.html).toContain("<b>v1.2</b>");
    const c = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "forced text",
      body: "<p>x</p>",
      "body-type": "text",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(c.exitCode, c.stderr).toBe(0);
    expect((await stored("forced text"))!.email.html).toContain("&lt;p&gt;x&lt;/p&gt;");
  });

  test("dry-run: nothing sent, the key redacted", async () => {
    const before = t.sb.store.count;
    const r = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "dry",
      body: "hi",
      "dry-run": "true",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain("mailsend: dry run, nothing was sent");
    expect(t.sb.store.count).toBe(before);
    expect(r.stdout + r.stderr).not.toContain(t.key);
  });
});

describe("a failing step", () => {
  test("a key the service refuses: the step fails with the CLI's exit (77), an ::error annotation, exit-class auth; the key never printed", async () => {
    const wrong = "msk_test_wrong_key_for_action_1";
    const r = await step(
      {
        from: "ci@example.com",
        to: "dev@example.com",
        subject: "refused",
        body: "hi",
        "base-url": t.env.MAILSEND_BASE_URL!,
      },
      { MAILSEND_API_KEY: wrong },
    );
    expect(r.exitCode).toBe(77);
    expect(r.stdout).toMatch(/^::error title=mailsend::.+/m);
    expect(r.outputs).toMatchObject({
      "exit-code": "77",
      "exit-class": "auth",
      "error-code": "auth_failed",
      "message-id": "",
    });
    expect(r.summary).toMatch(/“refused” was not sent: exit 77 \(auth\\_failed\); the step's log says why/);
    expect(r.stdout + r.stderr + r.summary).not.toContain(wrong);
    expect(await stored("refused")).toBeUndefined();
  });

  test("a summary input that is not true or false fails the step before anything is sent", async () => {
    const r = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "summary yes",
      body: "hi",
      "base-url": t.env.MAILSEND_BASE_URL!,
      summary: "yes",
    });
    expect(r.exitCode).toBe(64);
    expect(r.stdout).toMatch(/^::error title=mailsend::the input summary must be true or false, got "yes"/m);
    expect(r.stdout + r.stderr).not.toMatch(/at .*main\.mjs|sent 0/);
    expect(r.outputs).toMatchObject({ "exit-code": "64", "message-id": "" });
    expect(await stored("summary yes")).toBeUndefined();
  });

  test("a failure's line in the job summary names no address (summaries of public repositories are public)", async () => {
    const r = await step({
      from: "ci@example.com",
      to: "good@example.com, secret-person@@example.com",
      subject: "bad address",
      body: "hi",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(r.exitCode).toBe(65);
    expect(r.summary).toMatch(/“bad address” was not sent: exit 65 \(invalid\\_address\); the step's log says why/);
    expect(r.summary).not.toMatch(/@/);
    expect(r.stderr).toContain("secret-person@@example.com");
  });

  test("nothing listening at base-url: 69, exit-class unavailable", async () => {
    const r = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "down",
      body: "hi",
      "base-url": "http://127.0.0.1:1",
    });
    expect(r.exitCode).toBe(69);
    expect(r.outputs).toMatchObject({
      "exit-code": "69",
      "exit-class": "unavailable",
      "error-code": "connection_failed",
    });
    expect(r.stdout).toMatch(/^::error title=mailsend::/m);
  });

  test("no key at all: 78, exit-class config", async () => {
    const r = await step(
      {
        from: "ci@example.com",
        to: "dev@example.com",
        subject: "nokey",
        body: "hi",
        "base-url": t.env.MAILSEND_BASE_URL!,
      },
      { MAILSEND_API_KEY: undefined },
    );
    expect(r.exitCode).toBe(78);
    expect(r.outputs).toMatchObject({ "exit-class": "config", "error-code": "config_missing" });
  });

  test("a key given as an input (with: api-key: …): refused, its value never shown, nothing sent", async () => {
    const secret = "msk_live_pasted_into_with_9Qz";
    const before = t.sb.store.count;
    for (const name of ["api-key", "token", "password", "MAILSEND_API_KEY"]) {
      const r = await step({
        from: "ci@example.com",
        to: "dev@example.com",
        subject: "as input",
        body: "hi",
        "base-url": t.env.MAILSEND_BASE_URL!,
        [name]: secret,
      });
      expect(r.exitCode).toBe(64);
      expect(r.stdout).toMatch(
        new RegExp(
          `^::error title=mailsend::the action has no input "${name.toLowerCase()}": the API key is never an input`,
          "m",
        ),
      );
      expect(r.stdout).toContain("MAILSEND_API_KEY");
      // 64 is input in the table of exit classes (the CLI's --api-key is refused 64 too).
      expect(r.outputs).toMatchObject({ "exit-code": "64", "exit-class": "input" });
      expect(r.stdout + r.stderr + r.summary + JSON.stringify(r.outputs)).not.toContain(secret);
    }
    expect(t.sb.store.count).toBe(before);
  });

  test("body and html-file together: 64, input", async () => {
    const r = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "both",
      body: "hi",
      "html-file": "x.html",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(r.exitCode).toBe(64);
    expect(r.stdout).toMatch(/::error title=mailsend::give the body as body or as html-file, not both/);
    expect(r.outputs).toMatchObject({ "exit-class": "input" });
  });

  test("a missing attachment: 66, nothing sent", async () => {
    const r = await step({
      from: "ci@example.com",
      to: "dev@example.com",
      subject: "noattach",
      body: "hi",
      attachments: "nope.log",
      "base-url": t.env.MAILSEND_BASE_URL!,
    });
    expect(r.exitCode).toBe(66);
    expect(r.outputs).toMatchObject({ "exit-code": "66", "exit-class": "input" });
    expect(await stored("noattach")).toBeUndefined();
  });
});

describe.skipIf(lacks(pyyaml))("the workflow of docs/ci.md, run", () => {
  const readme = readFileSync(join(ROOT, "docs", "ci.md"), "utf8");
  const section = readme.slice(readme.indexOf("## The GitHub Action"));
  const yaml = section.slice(section.indexOf("```yaml") + 7, section.indexOf("```", section.indexOf("```yaml") + 7));
  const lines = yaml.split("\n");
  const GITHUB = {
    "github.repository": "acme/app",
    "github.run_number": "42",
    "job.status": "failure",
    "github.run_id": "9001",
    "github.run_attempt": "1",
  };
  const expand = (text: string) =>
    text.replace(/\$\{\{\s*([\w.]+)\s*\}\}/g, (_, e: string) => {
      const v = (GITHUB as Record<string, string>)[e];
      if (v === undefined) throw new Error(`docs/ci.md's workflow uses \${{ ${e} }}, which this test does not know`);
      return v;
    });

  /** The lines under `key:` of the step named `name`, dedented (a block scalar or a mapping). */
  function block(name: string, key: string): string[] {
    const at = lines.findIndex((l) => l.trim() === `- name: ${name}`);
    const k = lines.findIndex((l, i) => i > at && l.trim().startsWith(`${key}:`));
    const indent = lines[k]!.length - lines[k]!.trimStart().length;
    const out: string[] = [];
    for (const l of lines.slice(k + 1)) {
      if (l.trim() && l.length - l.trimStart().length <= indent) break;
      out.push(l);
    }
    const min = Math.min(...out.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
    return out.map((l) => l.slice(min));
  }

  /** The step's `with:` mapping as the runner reads the YAML (a " #" in a plain value starts a comment). */
  function withInputs(): Record<string, string> {
    const steps = loadYaml(yaml).jobs.build.steps as Array<{ name?: string; with?: Record<string, unknown> }>;
    const given = steps.find((s) => s.name === "Mail the report")!.with!;
    return Object.fromEntries(Object.entries(given).map(([k, v]) => [k, String(v)]));
  }

  test("the report step and the action step as written: the mail goes out with the log; every with: is a declared input; the key comes from env", async () => {
    const inputs = withInputs();
    for (const name of Object.keys(inputs))
      expect(declared.inputs.has(name), `with: ${name} is not an input of action.yml`).toBe(true);
    expect(block("Mail the report", "env").join("\n")).toContain("MAILSEND_API_KEY: ${{ secrets.MAILSEND_API_KEY }}");
    expect(yaml).toMatch(/uses: <owner>\/mailsend@v1/);

    const ws = join(tmp.dir, "ws-readme");
    mkdirSync(ws, { recursive: true });
    writeFileSync(join(ws, "build.log"), "cc -o app main.c\nmain.c:3: error: it broke\n");
    const report = await execa("bash", ["-eo", "pipefail", "-c", expand(block("Write the report", "run").join("\n"))], {
      cwd: ws,
      reject: false,
      extendEnv: false,
      env: {
        ...baseEnv(),
        STATUS: "failure",
        GITHUB_REPOSITORY: "acme/app",
        GITHUB_SHA: "0123abc",
        GITHUB_RUN_NUMBER: "42",
        GITHUB_RUN_ID: "9001",
        GITHUB_SERVER_URL: "https://github.example",
      },
    });
    expect(report.exitCode, String(report.stderr)).toBe(0);

    const given = Object.fromEntries(
      Object.entries(inputs).map(([k, v]) => [k, k === "base-url" ? t.env.MAILSEND_BASE_URL! : expand(v)]),
    );
    const r = await step(given, { WORKSPACE: ws });
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const m = await stored("acme/app #42: failure");
    expect(m).toBeDefined();
    expect(m!.meta.to.sort()).toEqual(["dev@example.com", "ops@example.com"]);
    expect(m!.meta.idempotencyKey).toBe("9001-1");
    expect(m!.meta.attachments.map((a) => a.filename)).toEqual(["build.log"]);
    expect(m!.email.html).toContain('href="https://github.example/acme/app/actions/runs/9001"');
    expect(r.outputs["message-id"]).toBe(m!.meta.messageId);
  });
});
