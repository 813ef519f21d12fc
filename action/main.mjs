// The GitHub Action's entry point (action.yml: runs.using node24, main action/main.mjs).
//
// The runner runs this file with its own Node, the step's inputs as INPUT_<NAME>
// variables (the name upper-cased, spaces made "_", hyphens kept: INPUT_HTML-FILE),
// and GITHUB_OUTPUT / GITHUB_STEP_SUMMARY naming files to append to. It runs the
// mailsend of this checkout (bin/mailsend.js), building it first when dist/ is not
// there: dist/ is never committed, so the first use in a job runs `npm ci` (the npm
// registry is the only network it needs) and the build, and later steps reuse it.
//
// No dependency of its own (it runs before `npm ci`; the runner's formats come from the
// CLI's dependency-free src/cli/github-core.mjs), and no secret ever comes from an input:
// the key is MAILSEND_API_KEY (or MAILSEND_API_KEY_FILE) in the step's env.
import { spawn } from "node:child_process";
import { appendFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
// The runner's formats, as the CLI writes them (--github-output, ::error::); dependency-free, so
// it runs before the build.
import { annotation, appendOutputs } from "../src/cli/github-core.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "bin", "mailsend.js");
const BUILT = join(ROOT, "dist", "cli", "main.js");

/** What each exit status means for a workflow deciding what to do next (README: exit codes). */
const CLASSES = {
  64: "input",
  65: "input",
  66: "input",
  67: "partial",
  69: "unavailable",
  70: "internal",
  73: "local",
  74: "local",
  75: "retry",
  76: "unknown",
  77: "auth",
  78: "config",
  130: "cancelled",
  143: "cancelled",
};

/** Inputs that would carry a secret: refused, since an input's value can end up in logs. */
const SECRET_INPUTS = /^INPUT_(?:MAILSEND[-_])?(?:API[-_]?KEY|APIKEY|KEY|TOKEN|PASSWORD|SECRET)$/;

class ActionError extends Error {
  constructor(message, { hint, exit = 64, exitClass = "input" } = {}) {
    super(message);
    this.hint = hint;
    this.exit = exit;
    this.exitClass = exitClass;
  }
}

// ---- the runner's files and workflow commands ----

function command(kind, message, hint) {
  process.stdout.write(annotation(kind, message, hint));
}

/** The step's outputs, in GITHUB_OUTPUT. */
function setOutputs(outputs) {
  const file = process.env.GITHUB_OUTPUT;
  if (!file) {
    process.stderr.write("mailsend action: GITHUB_OUTPUT is not set; no outputs written\n");
    return;
  }
  // The mail is sent (or not) already: a lost output is said, never a reason to fail.
  const problem = appendOutputs(file, outputs);
  if (problem) command("warning", problem);
}

/** Text for the job summary's Markdown: no markup, no HTML, on one line. */
function md(s) {
  return String(s)
    .replace(/[\r\n]+/g, " ")
    .replace(/[\\`*_[\]<>|#!~]/g, (c) => `\\${c}`)
    .replace(/&/g, "&amp;");
}

/** The summary input, read before anything is sent (main): undefined until then. */
let wantSummary;

function summary(line) {
  const file = process.env.GITHUB_STEP_SUMMARY;
  if (!file || wantSummary === false) return;
  if (wantSummary === undefined) {
    try {
      wantSummary = bool("summary", true);
    } catch {
      // Said by the failure that follows; a bad value writes no summary.
      return;
    }
  }
  try {
    appendFileSync(file, `${line}\n\n`);
  } catch (e) {
    command("warning", `cannot append to GITHUB_STEP_SUMMARY (${e.code ?? e.message})`);
  }
}

// ---- inputs, as @actions/core reads them ----

function input(name) {
  const value = process.env[`INPUT_${name.replace(/ /g, "_").toUpperCase()}`];
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

/** One per line; a single line may be separated by commas instead. */
function list(name, { commas = true } = {}) {
  const value = input(name);
  if (!value) return [];
  const lines = value
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  if (lines.length === 1 && commas)
    return lines[0]
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean);
  return lines;
}

/** YAML 1.2's core booleans, as getBooleanInput takes them. */
function bool(name, fallback) {
  const value = input(name);
  if (value === undefined) return fallback;
  if (["true", "True", "TRUE"].includes(value)) return true;
  if (["false", "False", "FALSE"].includes(value)) return false;
  throw new ActionError(`the input ${name} must be true or false, got "${value}"`);
}

/** The command line for `mailsend send`, and the body for its stdin. */
function sendArguments() {
  for (const name of Object.keys(process.env)) {
    if (SECRET_INPUTS.test(name.toUpperCase())) {
      const given = name.slice("INPUT_".length).toLowerCase();
      throw new ActionError(
        `the action has no input "${given}": the API key is never an input (its value was not used and is not shown)`,
        {
          hint: "Give it through the step's environment from a secret: env: MAILSEND_API_KEY: ${{ secrets.MAILSEND_API_KEY }} (or MAILSEND_API_KEY_FILE).",
        },
      );
    }
  }
  const args = ["send", "--json"];
  const add = (flag, value) => {
    if (value !== undefined) args.push(flag, value);
  };
  add("--from", input("from"));
  for (const to of list("to", { commas: false })) add("--to", to);
  for (const cc of list("cc", { commas: false })) add("--cc", cc);
  for (const bcc of list("bcc", { commas: false })) add("--bcc", bcc);
  add("--reply-to", input("reply-to"));
  add("--subject", input("subject"));
  add("--html-file", input("html-file"));
  add("--text-file", input("text-file"));
  add("--markdown-file", input("markdown-file"));
  for (const file of list("attachments")) add("--attach", file);
  add("--transport", input("transport"));
  add("--base-url", input("base-url"));
  add("--smtp-host", input("smtp-host"));
  add("--smtp-port", input("smtp-port"));
  add("--idempotency-key", input("idempotency-key"));
  if (bool("dry-run", false)) args.push("--dry-run");

  // The body goes through stdin: no length limit, not in `ps`, and HTML or text is told apart as a pipe's is.
  const raw = process.env.INPUT_BODY;
  const body = raw !== undefined && raw.trim() !== "" ? raw : undefined;
  const files = ["html-file", "text-file", "markdown-file"].filter((n) => input(n) !== undefined);
  if (body !== undefined && files.length > 0) {
    throw new ActionError(`give the body as body or as ${files.join(" / ")}, not both`, {
      hint: "Remove one of them from the step's with:.",
    });
  }
  const type = input("body-type") ?? "auto";
  if (!["auto", "html", "text"].includes(type))
    throw new ActionError(`the input body-type must be auto, html or text, got "${type}"`);
  if (body !== undefined && type !== "auto") args.push("--stdin-type", type);
  return { args, body };
}

// ---- building this checkout's mailsend ----

/** The variables npm and the build get: never the key, the inputs or the runner's tokens. */
function buildEnv() {
  const keep =
    /^(?:PATH|HOME|USERPROFILE|APPDATA|LOCALAPPDATA|SYSTEMROOT|COMSPEC|PATHEXT|TEMP|TMP|TMPDIR|RUNNER_TEMP|LANG|LC_ALL|CI|(?:HTTPS?|ALL|NO)_PROXY|NPM_CONFIG_.*|NODE_EXTRA_CA_CERTS)$/i;
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => keep.test(k)));
}

function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: buildEnv(), stdio: ["ignore", 2, 2], ...opts });
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/** npm beside the Node that runs us (the runner's Node ships it), else npm from PATH. */
function npm() {
  const beside = [
    join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js"),
    join(dirname(process.execPath), "node_modules", "npm", "bin", "npm-cli.js"),
  ].find((p) => existsSync(p));
  if (beside) return { cmd: process.execPath, pre: [beside], shell: false };
  return { cmd: process.platform === "win32" ? "npm.cmd" : "npm", pre: [], shell: process.platform === "win32" };
}

async function build() {
  process.stdout.write("::group::mailsend: npm ci and build (first use in this job)\n");
  try {
    const n = npm();
    // Install scripts off: esbuild finds its binary in its platform package without one.
    const ci = await run(n.cmd, [...n.pre, "ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund"], {
      shell: n.shell,
    }).catch((e) => {
      throw new ActionError(`cannot run npm (${e.code ?? e.message})`, {
        exit: 1,
        exitClass: "setup",
        hint: "The action builds mailsend with npm; use a runner with Node.js and npm (actions/setup-node).",
      });
    });
    if (ci !== 0)
      throw new ActionError(`npm ci failed (exit ${ci}) in ${ROOT}`, {
        exit: 1,
        exitClass: "setup",
        hint: "See the log above; the runner must reach the npm registry (HTTPS_PROXY and npm_config_registry are passed on).",
      });
    const b = await run(process.execPath, [join(ROOT, "scripts", "build.mjs")]);
    if (b !== 0 || !existsSync(BUILT))
      throw new ActionError(`building mailsend failed (exit ${b})`, {
        exit: 1,
        exitClass: "setup",
        hint: "See the log above.",
      });
  } finally {
    process.stdout.write("::endgroup::\n");
  }
}

// ---- the send ----

function send(args, body) {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith("INPUT_")));
    const child = spawn(process.execPath, [BIN, ...args], {
      env,
      stdio: [body === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let error;
    let pending = "";
    const line = (l) => {
      if (l.startsWith("::")) return process.stdout.write(`${l}\n`); // the CLI's ::error annotation
      let j;
      try {
        j = JSON.parse(l);
      } catch {
        return process.stderr.write(`${l}\n`);
      }
      if (j?.error) error = j.error;
      else if (typeof j?.warning === "string") command("warning", j.warning);
      else if (j?.wait) {
        const w = j.wait;
        process.stderr.write(
          w.reason === "retry"
            ? `mailsend: ${w.error ?? "a failure"}; attempt ${w.attempt} in ${w.seconds} s\n`
            : `mailsend: waiting ${w.seconds} s for a slot of the rate-limit budget\n`,
        );
      } else process.stderr.write(`${l}\n`);
    };
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => {
      pending += d;
      const lines = pending.split("\n");
      pending = lines.pop();
      for (const l of lines) if (l) line(l);
    });
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (pending) line(pending);
      resolve({ code: code ?? (signal === "SIGTERM" ? 143 : signal === "SIGINT" ? 130 : 70), stdout, error });
    });
    if (body !== undefined) {
      child.stdin.on("error", () => {}); // a CLI that exits before reading it says why itself
      child.stdin.end(body);
    }
  });
}

function fail(e) {
  const exit = e instanceof ActionError ? e.exit : 70;
  const exitClass = e instanceof ActionError ? e.exitClass : "internal";
  command("error", e.message, e.hint);
  setOutputs({
    "message-id": "",
    "exit-code": exit,
    "exit-class": exitClass,
    "error-code": exitClass === "setup" ? "action_setup" : "action_input",
  });
  summary(`**mailsend**: not sent (${md(e.message)})`);
  process.exitCode = exit;
}

async function main() {
  const { args, body } = sendArguments();
  // Every input is checked before anything is sent: a bad one found after the send would fail a
  // step whose message went out, and a re-run would send it again.
  wantSummary = bool("summary", true);
  if (!existsSync(BUILT)) await build();
  const dryRun = args.includes("--dry-run");
  const r = await send(args, body);
  const subject = input("subject") ?? "";
  if (r.code === 0) {
    let result = {};
    try {
      result = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
    } catch {
      // A dry run prints the request, not a result.
    }
    if (dryRun) process.stdout.write(r.stdout);
    const id = result.message_id ?? "";
    const n = result.recipients?.length ?? 0;
    setOutputs({ "message-id": id, "exit-code": 0, "exit-class": "", "error-code": "" });
    if (dryRun) {
      process.stdout.write("mailsend: dry run, nothing was sent\n");
      summary(`**mailsend**: dry run of “${md(subject)}”, nothing was sent`);
    } else {
      process.stdout.write(
        `mailsend: sent ${id} over ${result.transport ?? "?"} to ${n} recipient${n === 1 ? "" : "s"}\n`,
      );
      summary(
        `**mailsend**: sent “${md(subject)}” to ${n} recipient${n === 1 ? "" : "s"} over ${md(result.transport ?? "?")} (message id \`${md(id)}\`)`,
      );
    }
    return;
  }
  const err = r.error ?? { code: "internal", message: `mailsend exited ${r.code}` };
  // The CLI printed the ::error annotation (message and hint); the log gets them as text too.
  process.stderr.write(
    `mailsend: ${r.code === 67 ? "sent, but refused for some recipients" : "not sent"}: ${err.message}\n${err.hint ? `hint: ${err.hint}\n` : ""}`,
  );
  setOutputs({
    "message-id": err.message_id ?? "",
    "exit-code": r.code,
    "exit-class": CLASSES[r.code] ?? "internal",
    "error-code": err.code ?? "",
  });
  // Not the error's text: it may name recipients, and a public repository's summaries are public.
  summary(
    `**mailsend**: “${md(subject)}” ${r.code === 67 ? "was refused for some recipients" : "was not sent"}: exit ${r.code} (${md(err.code ?? "")}); the step's log says why`,
  );
  process.exitCode = r.code;
}

main().catch(fail);
