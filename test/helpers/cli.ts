/**
 * Run the built CLI (bin/mailsend.js -> dist/) as a user would, in a clean
 * environment: nothing from the parent's MAILSEND_* or NODE_EXTRA_CA_CERTS
 * leaks in, nor the developer's config file, and stdin is either the given input or closed, so no run can hang
 * waiting for a terminal.
 */
import { execa } from "execa";
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** The program under test: bin/mailsend.js, or the executable MAILSEND_BIN names (`npm run test:dist`). */
export const BIN = process.env.MAILSEND_BIN ? resolve(ROOT, process.env.MAILSEND_BIN) : fileURLToPath(new URL("../../bin/mailsend.js", import.meta.url));

/** The file and arguments that run `mailsend <args>`: this Node with bin/mailsend.js, or MAILSEND_BIN's executable itself. */
export function mailsendCommand(args: readonly string[]): [string, string[]] {
  return process.env.MAILSEND_BIN ? [BIN, [...args]] : [process.execPath, [BIN, ...args]];
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

export async function runCli(args: readonly string[], opts: RunOptions = {}): Promise<CliResult> {
  const env: Record<string, string> = baseEnv();
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
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

/** Parse stdout as exactly one JSON document (what --json promises). */
export function stdoutJson(r: CliResult): any {
  return JSON.parse(r.stdout);
}

/** The `{"error":{...}}` object --json writes on stderr when a send fails. */
export function stderrJson(r: CliResult): { error: { code: string; message: string; exit: number; hint?: string; status?: number } } {
  const lines = r.stderr.trim().split("\n").filter((l) => l.startsWith("{"));
  if (lines.length !== 1) throw new Error(`expected one JSON line on stderr, got: ${r.stderr}`);
  return JSON.parse(lines[0]!);
}

/** Where `mailsend batch <input>` keeps its journal by default: the state dir's batches/, named after the input's path. */
export function defaultJournal(input: string, stateDir = baseEnv().MAILSEND_STATE_DIR!): string {
  const hash = createHash("sha256").update(`file:${resolve(input)}`).digest("hex").slice(0, 24);
  return join(stateDir, "batches", `${hash}.journal`);
}
