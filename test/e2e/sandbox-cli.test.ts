/**
 * `mailsend sandbox` as a user runs it: a child process that prints its
 * export lines (or one JSON ready line), serves until SIGTERM, stops cleanly,
 * and keeps its messages and keys for the next start. A start that fails on
 * a port leaves the data dir as it found it. Fault injection, from flags and
 * from the control endpoint.
 */
import { execa } from "execa";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, ROOT, runCli, runInProcess, stderrJson, stdoutJson, mailsendCommand } from "../helpers/cli.js";
import { createdByStart } from "../../src/sandbox/created.js";
import { sandboxPaths } from "../../src/sandbox/paths.js";
import { startSandbox } from "../../src/sandbox/server.js";
import { childSandbox, inProcessSandbox, overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

const send = (subject: string, extra: string[] = []) => [
  "send",
  "--json",
  "-f",
  "a@example.com",
  "-t",
  "b@example.com",
  "-s",
  subject,
  "--text",
  "hi",
  ...extra,
];

let s: Scratch;
beforeAll(() => {
  s = scratch("mailsend-sandbox-cli-");
});
afterAll(() => s?.remove());

describe("mailsend sandbox --json", () => {
  it("prints one ready line, serves both channels with its env, stops on SIGTERM, and restarts with its messages", async () => {
    const dir = join(s.dir, "json");
    const first = await childSandbox(dir);
    try {
      const ready = first.ready;
      expect(ready).toMatchObject({
        ready: true,
        dir,
        smtp: { host: "127.0.0.1", tls: "starttls" },
        smtps: { tls: "implicit" },
      });
      expect(ready.key_created).toMatch(/^key_/);
      expect(ready.api_key_file).toBe(join(dir, "api-key"));
      expect(readFileSync(ready.api_key_file!, "utf8")).toMatch(/^msk_\S+\n$/);
      expect((await import("node:fs")).statSync(ready.api_key_file!).mode & 0o777).toBe(0o600);
      expect(ready.env).toMatchObject({
        MAILSEND_BASE_URL: ready.base_url,
        MAILSEND_SMTP_PORT: String(ready.smtp.port),
        MAILSEND_SMTP_TLS: "starttls",
        NODE_EXTRA_CA_CERTS: ready.ca_file,
        MAILSEND_API_KEY_FILE: ready.api_key_file,
        MAILSEND_SANDBOX_DIR: dir,
      });
      expect((await runInProcess(send("json rest", ["--transport", "rest"]), { env: ready.env })).exitCode).toBe(0);
      const smtp = await runInProcess(send("json smtp", ["--transport", "smtp"]), { env: ready.env });
      expect(smtp.exitCode, smtp.stderr).toBe(0);
    } finally {
      expect(await first.stop()).toBe(0);
    }
    expect(existsSync(join(dir, "sandbox.lock"))).toBe(false);

    const second = await childSandbox(dir);
    try {
      expect(second.ready.key_created).toBeNull();
      const inbox = await runInProcess(["inbox", "--dir", dir, "--json"]);
      expect((stdoutJson(inbox) as Array<{ subject: string }>).map((m) => m.subject)).toEqual([
        "json smtp",
        "json rest",
      ]);
      expect((await runInProcess(send("after restart"), { env: second.ready.env })).exitCode).toBe(0);
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });

  it("refuses a second sandbox on the same data dir, and a port in use (exit 78)", async () => {
    const dir = join(s.dir, "twice");
    const first = await childSandbox(dir);
    try {
      const again = await runCli([
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
      ]);
      expect(again.exitCode).toBe(78);
      expect(stderrJson(again).error.message).toContain("already running");
      const busy = await runCli([
        "sandbox",
        "--dir",
        join(s.dir, "busy"),
        "--http-port",
        String(first.ready.http_port),
        "--smtp-port",
        "0",
        "--smtps-port",
        "0",
      ]);
      expect(busy.exitCode).toBe(78);
      expect(busy.stderr).toContain("already in use");
      expect(busy.stderr).toContain("--http-port");
    } finally {
      await first.stop();
    }
  });
});

describe("mailsend sandbox (human output)", () => {
  async function startHuman(dir: string, cwd = ROOT) {
    const child = execa(
      ...mailsendCommand(["sandbox", "--dir", dir, "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0"]),
      {
        env: baseEnv(),
        extendEnv: false,
        cwd,
        stdin: "ignore",
        reject: false,
        timeout: 60_000,
      },
    );
    const lines: string[] = [];
    const rl = createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner: ${lines.join("\n")}`)), 15_000);
      rl.on("line", (l) => {
        lines.push(l);
        if (l.startsWith("Press Ctrl+C")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    return { child, banner: lines.join("\n") };
  }

  it("prints export lines to paste; the key only on the start that made it; logs arrivals on stderr", async () => {
    const dir = join(s.dir, "human");
    const first = await startHuman(dir);
    const key = readFileSync(join(dir, "api-key"), "utf8").trim();
    expect(first.banner).toContain(key);
    expect(first.banner.split(key).length).toBe(2);
    const env: Record<string, string> = {};
    for (const m of first.banner.matchAll(/^ {2}export (\w+)=(\S+)$/gm)) env[m[1]!] = m[2]!;
    expect(Object.keys(env)).toEqual([
      "MAILSEND_BASE_URL",
      "MAILSEND_SMTP_HOST",
      "MAILSEND_SMTP_PORT",
      "MAILSEND_SMTP_TLS",
      "NODE_EXTRA_CA_CERTS",
      "MAILSEND_API_KEY_FILE",
      "MAILSEND_SANDBOX_DIR",
    ]);
    expect(env.MAILSEND_SANDBOX_DIR).toBe(dir);
    expect((await runInProcess(send("pasted env"), { env })).exitCode).toBe(0);
    // `mailsend inbox` in the other shell, with only the pasted lines and no --dir, finds the mail.
    const inbox = await runCli(["inbox", "--json"], { env, cwd: s.dir });
    expect(inbox.exitCode, inbox.stderr).toBe(0);
    expect((stdoutJson(inbox) as Array<{ subject: string }>).map((m) => m.subject)).toEqual(["pasted env"]);
    first.child.kill("SIGINT");
    const r1 = await first.child;
    expect(r1.exitCode).toBe(0);
    expect(r1.stderr).toContain('"pasted env"');
    expect(r1.stderr).not.toContain(key);

    const second = await startHuman(dir);
    expect(second.banner).not.toContain("msk_");
    expect(second.banner).toContain(`export MAILSEND_API_KEY_FILE=${join(dir, "api-key")}`);
    second.child.kill("SIGTERM");
    expect((await second.child).exitCode).toBe(0);
  });

  it("a relative --dir is printed as an absolute path, so the lines work from any directory", async () => {
    const started = await startHuman("rel-dir", s.dir);
    try {
      const abs = join(s.dir, "rel-dir");
      expect(started.banner).toContain(`export MAILSEND_SANDBOX_DIR=${abs}\n`);
      expect(started.banner).toContain(`export NODE_EXTRA_CA_CERTS=${join(abs, "tls", "ca.pem")}\n`);
      expect(started.banner).toContain(`export MAILSEND_API_KEY_FILE=${join(abs, "api-key")}\n`);
    } finally {
      started.child.kill("SIGTERM");
      expect((await started.child).exitCode).toBe(0);
    }
  });
});

describe("a start that fails on a port makes nothing in the data dir", () => {
  let busy: Server;
  let busyPort: number;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", () => resolve()));
    busyPort = (busy.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => busy.close(() => resolve()));
  });

  const start = (dir: string, ports: string[]) =>
    runCli(["sandbox", "--dir", dir, ...ports, "--json"], { timeoutMs: 30_000 });

  /** Every path under dir with its size and mtime: what an earlier start left. */
  function snapshot(dir: string): string[] {
    return readdirSync(dir, { recursive: true, encoding: "utf8" })
      .map((p) => {
        const st = statSync(join(dir, p));
        return `${p} ${st.isDirectory() ? "dir" : st.size} ${st.mtimeMs}`;
      })
      .sort();
  }

  it("a first start: no data dir, no parents, no key, no CA (78)", async () => {
    const top = join(s.dir, "never");
    const dir = join(top, "made", "sb");
    for (const ports of [
      ["--http-port", String(busyPort), "--smtp-port", "0", "--smtps-port", "0"],
      ["--http-port", "0", "--smtp-port", "0", "--smtps-port", String(busyPort)],
    ]) {
      const r = await start(dir, ports);
      expect(r.exitCode, r.stderr).toBe(78);
      expect(stderrJson(r).error.message).toContain(`port ${busyPort} on 127.0.0.1 is already in use`);
      expect(existsSync(top)).toBe(false);
    }
    // The next start is a real first start: it makes and prints the key.
    const sb = await childSandbox(dir);
    try {
      expect(sb.ready.key_created).toMatch(/^key_/);
    } finally {
      await sb.stop();
    }
  });

  it("an earlier start's dir is left exactly as it was: keys, CA, messages, no lock", async () => {
    const earlier = await inProcessSandbox({ dir: join(s.dir, "earlier") }, s);
    expect((await runInProcess(send("kept"), { env: earlier.env })).exitCode).toBe(0);
    await earlier.stop();
    const before = snapshot(earlier.dir);
    expect(before.some((l) => l.startsWith("api-key "))).toBe(true);
    const r = await start(earlier.dir, ["--http-port", "0", "--smtp-port", String(busyPort), "--smtps-port", "0"]);
    expect(r.exitCode, r.stderr).toBe(78);
    expect(snapshot(earlier.dir)).toEqual(before);
    expect(existsSync(join(earlier.dir, "sandbox.lock"))).toBe(false);
  });

  it("an empty dir made beforehand stays, and stays empty", async () => {
    const dir = join(s.dir, "made-by-user");
    mkdirSync(dir);
    const r = await start(dir, ["--http-port", String(busyPort), "--smtp-port", "0", "--smtps-port", "0"]);
    expect(r.exitCode).toBe(78);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("the same port for two roles is a usage error (64), found before anything is made", async () => {
    const dir = join(s.dir, "twice-the-port");
    const r = await start(dir, ["--http-port", "0", "--smtp-port", "45999", "--smtps-port", "45999"]);
    expect(r.exitCode).toBe(64);
    expect(stderrJson(r).error.message).toContain("--smtp-port and --smtps-port are both 45999");
    expect(existsSync(dir)).toBe(false);
  });

  it("a start that fails later (a damaged keys file) takes back the CA it made, and only that", async () => {
    const dir = join(s.dir, "damaged");
    mkdirSync(join(dir, "keys.json"), { recursive: true });
    await expect(startSandbox({ dir, httpPort: 0, smtpPort: 0, smtpsPort: 0 })).rejects.toMatchObject({
      code: "config_invalid",
    });
    expect(readdirSync(dir)).toEqual(["keys.json"]);
  });

  it("createdByStart removes the dirs mkdir -p made, deepest first, and nothing that was there or is not empty", () => {
    const top = join(s.dir, "undo");
    mkdirSync(top);
    const dir = join(top, "a", "b");
    const created = createdByStart(sandboxPaths(dir));
    mkdirSync(dir, { recursive: true });
    created.madeDir(join(top, "a"));
    mkdirSync(join(dir, "tls"));
    writeFileSync(join(dir, "tls", "ca.pem"), "x");
    writeFileSync(join(dir, "keys.json"), "{}");
    created.remove();
    expect(existsSync(join(top, "a"))).toBe(false);
    expect(existsSync(top)).toBe(true);

    const kept = join(top, "kept");
    mkdirSync(join(kept, "messages"), { recursive: true });
    writeFileSync(join(kept, "index.jsonl"), "");
    const again = createdByStart(sandboxPaths(kept));
    writeFileSync(join(kept, "api-key"), "k");
    mkdirSync(join(kept, "tls"));
    writeFileSync(join(kept, "tls", "someone-elses"), "x");
    again.remove();
    expect(readdirSync(kept).sort()).toEqual(["index.jsonl", "messages", "tls"]);
  });
});

describe("fault injection", () => {
  it("from flags: --fail-rate 1 --fail-status 503 fails every request, and stores nothing", async () => {
    const dir = join(s.dir, "faulty");
    const sb = await childSandbox(dir, ["--fail-rate", "1", "--fail-status", "503", "--fail-smtp-code", "452"]);
    try {
      const rest = await runInProcess(send("fails", ["--transport", "rest"]), { env: sb.ready.env });
      expect(rest.exitCode).toBe(69);
      expect(stderrJson(rest).error).toMatchObject({ code: "service_error", status: 503 });
      const smtp = await runInProcess(send("fails", ["--transport", "smtp"]), { env: sb.ready.env });
      expect(smtp.exitCode).toBe(75);
      expect(stderrJson(smtp).error.status).toBe(452);
      const stats = await (await fetch(`${sb.ready.base_url}/_sandbox/stats`)).json();
      expect(stats).toMatchObject({ stored: 0, rest: { faults: 1, accepted: 0 }, smtp: { faults: 1, accepted: 0 } });
    } finally {
      await sb.stop();
    }
  });

  describe("from the control endpoint", () => {
    let t: TestSandbox;
    useSandbox((sb) => (t = overRest(sb)));
    const faults = async (body: unknown, method = "POST") => {
      const r = await fetch(`${t.sb.urls.baseUrl}/_sandbox/faults`, {
        method,
        headers: { "Content-Type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: r.status, json: (await r.json()) as any };
    };

    it("sets, shows and clears faults; refuses nonsense", async () => {
      expect((await faults({ failRate: 0.5, failStatus: 502 })).json).toMatchObject({ failRate: 0.5, failStatus: 502 });
      expect((await faults(undefined, "GET")).json.failRate).toBe(0.5);
      expect((await faults({ failRate: 2 })).status).toBe(400);
      expect((await faults({ explode: true })).status).toBe(400);
      const form = await fetch(`${t.sb.urls.baseUrl}/_sandbox/faults`, {
        method: "POST",
        body: "failRate=1",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
      });
      expect(form.status).toBe(415);
      expect((await faults(undefined, "DELETE")).json).toMatchObject({ failRate: 0, dropRate: 0, latencyMs: 0 });
    });

    it("a connection dropped after storing: the CLI reports outcome unknown (76); a retry with the same key stores nothing new", async () => {
      await faults({ dropRate: 1, dropWhen: "after" });
      const args = send("dropped", ["--idempotency-key", "drop-1"]);
      const first = await runInProcess(args, { env: t.env });
      expect(first.exitCode).toBe(76);
      expect(stderrJson(first).error.code).toBe("outcome_unknown");
      expect(t.sb.store.count).toBe(1);
      await faults(undefined, "DELETE");
      const retry = await runInProcess(args, { env: t.env });
      expect(retry.exitCode).toBe(0);
      expect(stdoutJson(retry).message_id).toBe((await t.sb.store.list())[0]!.id);
      expect(t.sb.store.count).toBe(1);
    });

    it("a connection dropped before storing stores nothing; SMTP too", async () => {
      await faults({ dropRate: 1, dropWhen: "before" });
      const before = t.sb.store.count;
      const rest = await runInProcess(send("dropped before"), { env: t.env });
      expect(rest.exitCode).not.toBe(0);
      const smtp = await runInProcess(send("dropped before", ["--transport", "smtp"]), { env: t.env });
      expect(smtp.exitCode).not.toBe(0);
      expect(t.sb.store.count).toBe(before);
      await faults(undefined, "DELETE");
    });

    it("added latency delays the answer", async () => {
      await faults({ latencyMs: 600 });
      const t0 = Date.now();
      const r = await fetch(`${t.sb.urls.baseUrl}/send`, {
        method: "POST",
        headers: { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: "a@example.com", to: "b@example.com", subject: "slow", html: "<p>slow</p>" }),
      });
      expect(r.status).toBe(200);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(590);
      await faults(undefined, "DELETE");
    });
  });
});

describe("port helper sanity", () => {
  it("free ports really are free after stop", async () => {
    const dir = join(s.dir, "ports");
    const sb = await childSandbox(dir);
    const port = sb.ready.http_port;
    await sb.stop();
    await new Promise<void>((resolve, reject) => {
      const srv = createServer();
      srv.once("error", reject);
      srv.listen(port, "127.0.0.1", () => srv.close(() => resolve()));
    });
  });
});

describe("a shell that already trusts CAs of its own (NODE_EXTRA_CA_CERTS)", () => {
  it("is given a bundle of those and the sandbox's CA: the line to paste keeps both trusted", async () => {
    // Another sandbox's CA stands for the company's: a TLS server this shell must go on trusting.
    const company = await childSandbox(join(s.dir, "ca-company"));
    const dir = join(s.dir, "ca-bundled");
    const sandbox = await childSandbox(dir, [], { NODE_EXTRA_CA_CERTS: company.ready.ca_file });
    try {
      const { ready } = sandbox;
      const bundle = join(dir, "tls", "ca-bundle.pem");
      expect(ready.env.NODE_EXTRA_CA_CERTS).toBe(bundle);
      expect(ready.ca_file).toBe(join(dir, "tls", "ca.pem"));
      const pem = readFileSync(bundle, "utf8");
      expect(pem).toContain(readFileSync(company.ready.ca_file, "utf8").trim());
      expect(pem).toContain(readFileSync(ready.ca_file, "utf8").trim());
      // With the pasted line: this sandbox's TLS is trusted, and so is the company's still.
      const here = await runCli(send("bundle here", ["--transport", "smtp"]), { env: ready.env });
      expect(here.exitCode, here.stderr).toBe(0);
      const there = await runCli(send("bundle there", ["--transport", "smtp"]), {
        env: { ...company.ready.env, NODE_EXTRA_CA_CERTS: ready.env.NODE_EXTRA_CA_CERTS! },
      });
      expect(there.exitCode, there.stderr).toBe(0);
    } finally {
      await sandbox.stop();
    }
    // Started again in the shell that pasted that line: it names the bundle still.
    const again = await childSandbox(dir, [], { NODE_EXTRA_CA_CERTS: join(dir, "tls", "ca-bundle.pem") });
    try {
      const { ready } = again;
      expect(ready.env.NODE_EXTRA_CA_CERTS).toBe(join(dir, "tls", "ca-bundle.pem"));
      expect(readFileSync(join(dir, "tls", "ca-bundle.pem"), "utf8")).toContain(
        readFileSync(company.ready.ca_file, "utf8").trim(),
      );
    } finally {
      await again.stop();
      await company.stop();
    }
  });
});
