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
import { startSandbox, type Sandbox, type SandboxOptions } from "../../src/sandbox/server.js";
import { baseEnv, BIN, ROOT, runCli } from "./cli.js";
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

/** `mailsend sandbox --json` as a child process, on free ports. */
export async function childSandbox(dir: string, args: string[] = []): Promise<ChildSandbox> {
  const child = execa(process.execPath, [BIN, "sandbox", "--dir", dir, "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0", "--json", ...args], {
    env: baseEnv(),
    extendEnv: false,
    cwd: ROOT,
    stdin: "ignore",
    reject: false,
    timeout: 120_000,
  });
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

/** A hand-driven SMTP session, for commands out of order and cut connections. */
export class SmtpDialog {
  #socket: import("node:net").Socket;
  #buf = "";
  #waiters: Array<() => void> = [];
  closed = false;

  private constructor(socket: import("node:net").Socket) {
    this.#socket = socket;
    this.#attach();
  }

  #attach(): void {
    this.#socket.setEncoding("latin1");
    this.#socket.on("data", (d: string) => {
      this.#buf += d;
      this.#wake();
    });
    this.#socket.on("close", () => {
      this.closed = true;
      this.#wake();
    });
    this.#socket.on("error", () => {});
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  /** The server's 220 line. */
  greeting = "";

  static async connect(port: number, opts: { implicit?: boolean; ca?: string } = {}): Promise<SmtpDialog> {
    const net = await import("node:net");
    const tls = await import("node:tls");
    const socket = opts.implicit
      ? tls.connect({ host: "127.0.0.1", port, ca: opts.ca, servername: "localhost" })
      : net.connect({ host: "127.0.0.1", port });
    await new Promise<void>((resolve, reject) => {
      socket.once(opts.implicit ? "secureConnect" : "connect", () => resolve());
      socket.once("error", reject);
    });
    const d = new SmtpDialog(socket);
    d.greeting = await d.reply();
    return d;
  }

  /** The next complete reply ("250-..." lines then "250 ..."); "" when the server closed. */
  async reply(timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = /^(?:\d{3}-[^\n]*\n)*\d{3}(?: [^\n]*)?\n/.exec(this.#buf);
      if (m) {
        this.#buf = this.#buf.slice(m[0].length);
        return m[0].trimEnd();
      }
      if (this.closed) return "";
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SMTP reply within ${timeoutMs} ms (have ${JSON.stringify(this.#buf)})`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  write(data: string | Buffer): void {
    this.#socket.write(data);
  }

  async cmd(line: string): Promise<string> {
    this.write(`${line}\r\n`);
    return this.reply();
  }

  async starttls(ca: string): Promise<void> {
    const r = await this.cmd("STARTTLS");
    if (!r.startsWith("220")) throw new Error(`STARTTLS refused: ${r}`);
    const tls = await import("node:tls");
    this.#socket.removeAllListeners("data");
    this.#socket.removeAllListeners("close");
    const secure = tls.connect({ socket: this.#socket, ca, servername: "localhost" });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", () => resolve());
      secure.once("error", reject);
    });
    this.#socket = secure;
    this.#attach();
  }

  async login(user: string, key: string): Promise<string> {
    const r1 = await this.cmd("AUTH LOGIN");
    if (!r1.startsWith("334")) return r1;
    const r2 = await this.cmd(Buffer.from(user).toString("base64"));
    if (!r2.startsWith("334")) return r2;
    return this.cmd(Buffer.from(key).toString("base64"));
  }

  destroy(): void {
    this.#socket.destroy();
  }

  async quit(): Promise<void> {
    if (!this.closed) {
      this.write("QUIT\r\n");
      await this.reply().catch(() => "");
    }
    this.#socket.destroy();
  }
}

/** Wait until `check` is true, polling; bounded. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 25));
  }
}
