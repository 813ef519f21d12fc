/**
 * A sandbox for a test: in this process (startSandbox, ports 0, a scratch
 * data dir) or as the built `mailsend sandbox --json` child process. Either
 * way `env` is what the CLI needs to use it, and `stop()` ends it.
 */
import { execa, type ResultPromise } from "execa";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import PostalMime, { type Email } from "postal-mime";
import { afterAll, beforeAll } from "vitest";
import { startSandbox, type Sandbox, type SandboxOptions } from "../../src/sandbox/server.js";
import { baseEnv, mailsendCommand, ROOT, runCli } from "./cli.js";
import { scratch, type Scratch } from "./tmp.js";

export interface TestSandbox {
  sb: Sandbox;
  dir: string;
  scratch: Scratch;
  /** The first key, read from the 0600 key file. */
  key: string;
  /** The variables for the CLI (STARTTLS port for SMTP). */
  env: Record<string, string>;
  /** The same for the implicit-TLS port. */
  envImplicit: Record<string, string>;
  stop(): Promise<void>;
}

export async function inProcessSandbox(opts: Partial<SandboxOptions> = {}, existing?: Scratch): Promise<TestSandbox> {
  const s = existing ?? scratch("mailsend-sandbox-");
  const dir = opts.dir ?? join(s.dir, "sb");
  const sb = await startSandbox({ host: "127.0.0.1", httpPort: 0, smtpPort: 0, smtpsPort: 0, ...opts, dir });
  const key = readFileSync(sb.paths.apiKeyFile, "utf8").trim();
  return {
    sb,
    dir,
    scratch: s,
    key,
    env: { ...sb.env },
    envImplicit: { ...sb.env, MAILSEND_SMTP_PORT: String(sb.ports.smtps), MAILSEND_SMTP_TLS: "implicit" },
    stop: () => sb.close(),
  };
}

/**
 * The same sandbox with MAILSEND_TRANSPORT=rest in its environments: for a test of REST that sends
 * without naming a transport (with the sandbox's SMTP host configured, send's default is auto, and a
 * text body goes over SMTP). A test that gives --transport still chooses.
 */
export function overRest(t: TestSandbox): TestSandbox {
  const rest = { MAILSEND_TRANSPORT: "rest" };
  return { ...t, env: { ...t.env, ...rest }, envImplicit: { ...t.envImplicit, ...rest } };
}

/**
 * A sandbox in this process for the file (or describe) it is called in: started before all, stopped
 * and its scratch dir removed after all. Its after hook runs after the ones registered later, so what
 * a test file builds on the sandbox is torn down first.
 */
export function useSandbox(set: (t: TestSandbox) => void, opts: Partial<SandboxOptions> = {}): void {
  let t: TestSandbox | undefined;
  beforeAll(async () => {
    t = await inProcessSandbox(opts);
    set(t);
  });
  afterAll(async () => {
    await t?.stop();
    t?.scratch.remove();
  });
}

export interface ReadyLine {
  ready: true;
  pid: number;
  dir: string;
  base_url: string;
  http_port: number;
  smtp: { host: string; port: number; tls: string };
  smtps: { host: string; port: number; tls: string };
  ca_file: string;
  api_key_file: string | null;
  key_created: string | null;
  env: Record<string, string>;
}

export interface ChildSandbox {
  ready: ReadyLine;
  child: ResultPromise;
  /** SIGTERM and wait; resolves to the exit code. */
  stop(): Promise<number | undefined>;
}

/** `mailsend sandbox --json` as a child process, on free ports; `env` adds to baseEnv(). */
export async function childSandbox(
  dir: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<ChildSandbox> {
  const child = execa(
    ...mailsendCommand([
      "sandbox",
      "--dir",
      dir,
      "--http-port",
      "0",
      "--smtp-port",
      "0",
      "--smtps-port",
      "0",
      "--json",
      ...args,
    ]),
    {
      env: { ...baseEnv(), ...env },
      extendEnv: false,
      cwd: ROOT,
      stdin: "ignore",
      reject: false,
      timeout: 120_000,
    },
  );
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<ReadyLine>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the sandbox did not print its ready line within 15 s")), 15_000);
    lines.once("line", (l) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(l) as ReadyLine);
      } catch (e) {
        reject(e);
      }
    });
    child.then((r) => {
      clearTimeout(timer);
      reject(new Error(`the sandbox exited (${r.exitCode}) before it was ready: ${r.stderr}`));
    });
  });
  return {
    ready,
    child,
    async stop() {
      child.kill("SIGTERM");
      const r = await child;
      return r.exitCode;
    },
  };
}

export async function parseEml(raw: Buffer): Promise<Email> {
  return PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
}

/** `mailsend sandbox keys add --json` in `dir`; returns id and key. */
export async function addKey(dir: string, extra: string[] = []): Promise<{ id: string; key: string }> {
  const r = await runCli(["sandbox", "keys", "add", "--dir", dir, "--json", ...extra]);
  if (r.exitCode !== 0) throw new Error(`keys add failed: ${r.stderr}`);
  const j = JSON.parse(r.stdout) as { id: string; key: string };
  return { id: j.id, key: j.key };
}

export async function revokeKey(dir: string, id: string): Promise<void> {
  const r = await runCli(["sandbox", "keys", "revoke", id, "--dir", dir]);
  if (r.exitCode !== 0) throw new Error(`keys revoke failed: ${r.stderr}`);
}

/** A raw POST /send with node:http (no client logic in the way). */
export async function post(
  baseUrl: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; json: any; text: string }> {
  const res = await fetch(`${baseUrl}/send`, { method: "POST", body, headers });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: Object.fromEntries(res.headers), json, text };
}

export function sendRequest(over: Record<string, unknown> = {}): Record<string, unknown> {
  return { from: "sender@example.com", to: "rcpt@example.com", subject: "Hello", html: "<p>Hello</p>", ...over };
}
