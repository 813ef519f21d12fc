/**
 * Run the built CLI (bin/mailsend.js -> dist/) as a user would, in a clean
 * environment: nothing from the parent's MAILSEND_* or NODE_EXTRA_CA_CERTS
 * leaks in, nor the developer's config file, and stdin is either the given input or closed, so no run can hang
 * waiting for a terminal.
 */
import { execa } from "execa";
import { createHash } from "node:crypto";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, openSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Whether the program under test is MAILSEND_BIN's single executable: no Node to start, no bin/ or dist/ on disk. */
export const SINGLE_EXECUTABLE = Boolean(process.env.MAILSEND_BIN);
/** The program under test: bin/mailsend.js, or the executable MAILSEND_BIN names (`npm run test:dist`). */
export const BIN = SINGLE_EXECUTABLE
  ? resolve(ROOT, process.env.MAILSEND_BIN!)
  : fileURLToPath(new URL("../../bin/mailsend.js", import.meta.url));

/**
 * The command line that runs `file <args>`, where `file` is the program (BIN) or a link to it whose
 * name is its role (a `sendmail` symlink): Node (this one unless `node` is given) with the script, or
 * MAILSEND_BIN's executable itself.
 */
export function mailsendArgv(args: readonly string[], file = BIN, node = process.execPath): string[] {
  return SINGLE_EXECUTABLE ? [file, ...args] : [node, file, ...args];
}

/** mailsendArgv as the file and arguments execa and spawn take. */
export function mailsendCommand(args: readonly string[], file = BIN): [string, string[]] {
  const [cmd, ...rest] = mailsendArgv(args, file);
  return [cmd!, rest];
}

/** mailsendArgv as one POSIX shell command line, each word quoted: for what takes a shell command (swaks --pipe, sh -c). */
export function mailsendShell(args: readonly string[], file = BIN): string {
  return mailsendArgv(args, file)
    .map((w) => `'${w.replace(/'/g, `'\\''`)}'`)
    .join(" ");
}

/**
 * A copy of the program under test in `dir`, as the file mailsendArgv runs: the executable, or bin/,
 * dist/ (without maps and types) and package.json with node_modules linked. For processes that must
 * not meet a rebuild of the checkout midway, or a user who cannot read the checkout.
 */
export function copyMailsend(dir: string): string {
  mkdirSync(dir, { recursive: true });
  if (SINGLE_EXECUTABLE) {
    const file = join(dir, "mailsend");
    copyFileSync(BIN, file);
    return file;
  }
  cpSync(join(ROOT, "bin"), join(dir, "bin"), { recursive: true });
  cpSync(join(ROOT, "dist"), join(dir, "dist"), {
    recursive: true,
    filter: (src) => !src.endsWith(".map") && !src.includes(join("dist", "types")),
  });
  cpSync(join(ROOT, "package.json"), join(dir, "package.json"));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return join(dir, "bin", "mailsend.js");
}

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** True when the run was killed by the helper's own time limit. */
  timedOut: boolean;
}

export interface RunOptions {
  /** Variables on top of the minimal base environment (undefined removes one). */
  env?: Record<string, string | undefined>;
  /** Bytes for stdin; without it stdin is closed ('ignore'). */
  input?: string | Buffer;
  cwd?: string;
  /** Kill the CLI after this long (default 20 s): a hang fails the test instead of the suite. */
  timeoutMs?: number;
}

/** One state dir per test process, so the shared rate-limit state of a developer's own runs never leaks in. */
let stateDir: string | undefined;
function testStateDir(): string {
  stateDir ??= mkdtempSync(join(tmpdir(), "mailsend-test-state-"));
  return stateDir;
}

/**
 * The few variables a Node process needs; everything else is given explicitly.
 * The local rate-limit budget and retries are off unless a test turns them on
 * (the limits tests do): a test of one send sees exactly one attempt.
 */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {
    NO_COLOR: "1",
    MAILSEND_STATE_DIR: testStateDir(),
    MAILSEND_RATE_LIMIT: "0",
    MAILSEND_RETRIES: "0",
    // HOME is passed through: without this, a developer's own ~/.config/mailsend profile would apply.
    MAILSEND_CONFIG: join(testStateDir(), "no-config.json"),
  };
  for (const name of ["PATH", "HOME", "TMPDIR", "LANG", "SYSTEMROOT"]) {
    const v = process.env[name];
    if (v !== undefined) env[name] = v;
  }
  return env;
}

/** baseEnv() with a test's own variables over it (undefined removes one). */
function cliEnv(extra: RunOptions["env"]): Record<string, string> {
  const env: Record<string, string> = baseEnv();
  for (const [k, v] of Object.entries(extra ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export async function runCli(args: readonly string[], opts: RunOptions = {}): Promise<CliResult> {
  const env = cliEnv(opts.env);
  const r = await execa(...mailsendCommand(args), {
    reject: false,
    extendEnv: false,
    env,
    cwd: opts.cwd ?? ROOT,
    ...(opts.input !== undefined ? { input: opts.input } : { stdin: "ignore" as const }),
    stripFinalNewline: false,
    timeout: opts.timeoutMs ?? 20_000,
    encoding: "utf8",
  });
  return {
    exitCode: r.exitCode ?? -1,
    stdout: String(r.stdout ?? ""),
    stderr: String(r.stderr ?? ""),
    timedOut: r.timedOut === true,
  };
}

/**
 * The same command line as runCli, run by the program in this process (`run(argv, io)`, from src/
 * where runCli runs the built dist/) with the same clean environment, given to it as its io.env: for what a process adds nothing to (a usage
 * error, an exit code for a bad setting, --dry-run output, help). Whatever needs a process stays
 * with runCli: signals, pipes, NODE_EXTRA_CA_CERTS itself, process.exit, the sendmail
 * personality, and a working directory of its own (this one runs in the test's, the repo root).
 * A run still going at the time limit is reported as timed out and left to finish unseen.
 */
export async function runInProcess(args: readonly string[], opts: Omit<RunOptions, "cwd"> = {}): Promise<CliResult> {
  // Against an executable (MAILSEND_BIN), every run is of that executable.
  if (SINGLE_EXECUTABLE) return runCli(args, opts);
  const env = cliEnv(opts.env);
  // Node reads NODE_EXTRA_CA_CERTS only when it starts: here the same CA (a sandbox's) is given as
  // MAILSEND_CA_FILE. A test of NODE_EXTRA_CA_CERTS itself uses runCli.
  if (env.NODE_EXTRA_CA_CERTS !== undefined) {
    if (env.MAILSEND_CA_FILE !== undefined) throw new Error("NODE_EXTRA_CA_CERTS beside MAILSEND_CA_FILE: use runCli");
    env.MAILSEND_CA_FILE = env.NODE_EXTRA_CA_CERTS;
    delete env.NODE_EXTRA_CA_CERTS;
  }
  // main() hands `mailsend sendmail` to the sendmail personality before the program sees it.
  if (args[0] === "sendmail") throw new Error("mailsend sendmail is not run by the program: runCli");
  if (mayStartRunner(args, env))
    throw new Error("a queued send starts a background runner from the process's entry script: runCli");
  const { run } = await import("../../src/cli/program.js");
  let out = "";
  let err = "";
  const stdout = collector((s) => (out += s));
  const stderr = collector((s) => (err += s));
  // Without input, stdin is what runCli gives: /dev/null, a device where nothing was ever piped.
  const stdin =
    opts.input !== undefined
      ? Readable.from([Buffer.from(opts.input)])
      : Object.assign(Readable.from([]), { fd: devNull() });
  const io = { stdout, stderr, stdin, env, stdinIsNull: () => opts.input === undefined };
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">(
    (resolve) => (timer = setTimeout(() => resolve("timeout"), opts.timeoutMs ?? 20_000)),
  );
  try {
    const code = await Promise.race([run([...args], io), timeout]);
    return { exitCode: code === "timeout" ? -1 : code, stdout: out, stderr: err, timedOut: code === "timeout" };
  } finally {
    clearTimeout(timer);
  }
}

/** Whether the command could queue mail and start `queue run --drain` from process.argv[1] (here, vitest's). */
function mayStartRunner(args: readonly string[], env: Record<string, string>): boolean {
  if (/^(0|false|no|off)$/i.test(env.MAILSEND_QUEUE_AUTORUN ?? "")) return false;
  const i = args.findIndex((a) => a === "--queue" || a.startsWith("--queue="));
  const flag = i < 0 ? undefined : args[i]!.includes("=") ? args[i]!.split("=")[1] : args[i + 1];
  return [flag, env.MAILSEND_QUEUE].some((mode) => mode !== undefined && mode.trim() !== "" && mode.trim() !== "never");
}

let devNullFd: number | undefined;
function devNull(): number {
  devNullFd ??= openSync("/dev/null", "r");
  return devNullFd;
}

/** A stream that hands each write to `add` as it is made, so nothing is still in flight when the run returns. */
function collector(add: (s: string) => void): Writable {
  const decoder = new TextDecoder();
  return new Writable({
    write(chunk: Buffer | string, _enc, done) {
      add(typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true }));
      done();
    },
  });
}

/** Parse stdout as exactly one JSON document (what --json promises). */
export function stdoutJson(r: CliResult): any {
  return JSON.parse(r.stdout);
}

/** The `{"error":{...}}` object --json writes on stderr when a send fails. */
export function stderrJson(r: CliResult): {
  error: { code: string; message: string; exit: number; hint?: string; status?: number };
} {
  const lines = r.stderr
    .trim()
    .split("\n")
    .filter((l) => l.startsWith("{"));
  if (lines.length !== 1) throw new Error(`expected one JSON line on stderr, got: ${r.stderr}`);
  return JSON.parse(lines[0]!);
}

/** Where `mailsend batch <input>` keeps its journal by default: the state dir's batches/, named after the input's path. */
export function defaultJournal(input: string, stateDir = baseEnv().MAILSEND_STATE_DIR!): string {
  const hash = createHash("sha256")
    .update(`file:${resolve(input)}`)
    .digest("hex")
    .slice(0, 24);
  return join(stateDir, "batches", `${hash}.journal`);
}
