/**
 * REST through an HTTP proxy, with the built CLI: a proxy of the test's own
 * (it logs what it saw, may want credentials or refuse a target) and
 * tinyproxy. The service is the sandbox, over http:// (absolute-form
 * requests) and behind an https:// front with the sandbox's certificate
 * (CONNECT, TLS verified with the sandbox's CA inside the tunnel).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { runInProcess, type CliResult } from "../helpers/cli.js";
import { startProxy, startSocks5, startTinyproxy, startTlsFront, type TestProxy } from "../helpers/proxy.js";
import { overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { lacks, tinyproxy } from "../helpers/tools.js";

let t: TestSandbox;
let front: { url: string; port: number; stop(): Promise<void> };
let proxy: TestProxy;
let guarded: TestProxy;
let strict: TestProxy;
const PASSWORD = "proxy-pass-7d1";

useSandbox((sb) => (t = overRest(sb)));
beforeAll(async () => {
  front = await startTlsFront(t.sb.ports.http, t.sb.tls);
  proxy = await startProxy();
  guarded = await startProxy({ auth: `alice:${PASSWORD}` });
  strict = await startProxy({ deny: (target) => target.startsWith("127.0.0.1:") });
});
afterAll(async () => {
  await Promise.all([proxy?.stop(), guarded?.stop(), strict?.stop(), front?.stop()]);
});
beforeEach(() => {
  for (const p of [proxy, guarded, strict]) p.log.length = 0;
});

const https = () => ({ ...t.env, MAILSEND_BASE_URL: front.url });

async function send(subject: string, env: Record<string, string>, extra: string[] = []): Promise<CliResult> {
  const r = await runInProcess(
    ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", subject, "--text", "hi", ...extra],
    { env },
  );
  expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  expect(r.stdout + r.stderr).not.toContain(Buffer.from(`alice:${PASSWORD}`).toString("base64"));
  return r;
}

async function stored(subject: string): Promise<number> {
  return (await t.sb.store.list({ limit: 100_000 })).filter((m) => m.subject === subject).length;
}

describe("REST through an HTTP proxy", () => {
  test("HTTPS_PROXY: an https:// service through a CONNECT tunnel, the certificate verified with the sandbox's CA", async () => {
    const r = await send("px https", { ...https(), HTTPS_PROXY: proxy.url });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(proxy.log).toEqual([
      expect.objectContaining({ method: "CONNECT", target: `127.0.0.1:${front.port}`, status: 200 }),
    ]);
    expect(await stored("px https")).toBe(1);
  });

  test("http_proxy (lower case): an http:// service in the absolute form", async () => {
    const r = await send("px http", { ...t.env, http_proxy: proxy.url.replace("http://", "") });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(proxy.log).toEqual([
      expect.objectContaining({ method: "POST", target: `http://127.0.0.1:${t.sb.ports.http}/send`, status: 200 }),
    ]);
    expect(await stored("px http")).toBe(1);
  });

  test("NO_PROXY exempts the host (also as a CIDR range): the proxy sees nothing", async () => {
    for (const noProxy of ["127.0.0.1", "example.com, 127.0.0.0/8"]) {
      const r = await send(`px direct ${noProxy}`, { ...https(), HTTPS_PROXY: proxy.url, NO_PROXY: noProxy });
      expect(r.exitCode, r.stderr).toBe(0);
    }
    expect(proxy.log).toEqual([]);
  });

  test("--proxy overrides HTTPS_PROXY; --proxy none goes direct; -v says which", async () => {
    const env = { ...https(), HTTPS_PROXY: "http://127.0.0.1:1" };
    const via = await send("px flag", env, ["--proxy", proxy.url, "-v"]);
    expect(via.exitCode, via.stderr).toBe(0);
    expect(via.stderr).toMatch(
      new RegExp(`\\* through the proxy http://127\\.0\\.0\\.1:${proxy.port} \\(from --proxy\\): CONNECT tunnel`),
    );
    expect(proxy.log).toHaveLength(1);
    const direct = await send("px none", env, ["--proxy", "none", "-v"]);
    expect(direct.exitCode, direct.stderr).toBe(0);
    expect(direct.stderr).toMatch(/\* direct, not through the proxy: --proxy none/);
    expect(proxy.log).toHaveLength(1);
  });

  test("a proxy that wants credentials: 77 naming the proxy; the right ones get through; the password is never printed", async () => {
    const none = await send("px 407", { ...https(), HTTPS_PROXY: guarded.url }, ["--json"]);
    expect(none.exitCode).toBe(77);
    const err = JSON.parse(none.stderr.trim()).error;
    expect(err).toMatchObject({ code: "auth_failed", exit: 77 });
    expect(err.message).toBe(
      `the proxy http://127.0.0.1:${guarded.port} (from HTTPS_PROXY) requires a user and password (HTTP 407 Proxy Authentication Required)`,
    );
    // Read as written: no URL in the hint for the printing redactor to cut the user:password@ out of.
    expect(err.hint).toBe(
      "Give the proxy's credentials in HTTPS_PROXY, as the user:password@ before the proxy's host in that URL (%-encode special characters). Nothing was sent.",
    );

    const wrong = await send("px 407 wrong", {
      ...https(),
      HTTPS_PROXY: `http://alice:nope@127.0.0.1:${guarded.port}`,
    });
    expect(wrong.exitCode).toBe(77);
    expect(wrong.stderr).toMatch(/refused its user and password \(HTTP 407/);

    const right = await send(
      "px 407 right",
      { ...https(), HTTPS_PROXY: `http://alice:${PASSWORD}@127.0.0.1:${guarded.port}` },
      ["-v"],
    );
    expect(right.exitCode, right.stderr).toBe(0);
    expect(right.stderr).toMatch(/through the proxy http:\/\/127\.0\.0\.1:\d+ \(from HTTPS_PROXY, as alice\)/);
    // Over http:// the same refusal comes back as an answer: still the proxy's, not the service's.
    const plain = await send("px 407 http", { ...t.env, HTTP_PROXY: guarded.url });
    expect(plain.exitCode).toBe(77);
    expect(plain.stderr).toMatch(
      /the proxy http:\/\/127\.0\.0\.1:\d+ \(from HTTP_PROXY\) requires a user and password/,
    );
    // A body over 1 MB, which the proxy refuses before it has all of it: the same 77, tried once.
    const report = t.scratch.file("px-report.html", `<p>${"r".repeat(1_200_000)}</p>`);
    const large = await runInProcess(
      [
        "send",
        "-f",
        "ci@example.com",
        "-t",
        "dev@example.com",
        "-s",
        "px 407 large",
        "--html-file",
        report,
        "--transport",
        "rest",
        "--json",
      ],
      {
        env: { ...t.env, HTTP_PROXY: guarded.url, MAILSEND_RETRIES: "2" },
      },
    );
    expect(large.exitCode, large.stderr).toBe(77);
    expect(JSON.parse(large.stderr.trim()).error).toMatchObject({ code: "auth_failed", exit: 77, attempts: 1 });
    expect(large.stderr).toMatch(
      /the proxy http:\/\/127\.0\.0\.1:\d+ \(from HTTP_PROXY\) requires a user and password/,
    );
    expect(await stored("px 407")).toBe(0);
    expect(await stored("px 407 large")).toBe(0);
  });

  test("a proxy that refuses the target (403): 77, naming the proxy and the target, not a revoked key", async () => {
    const r = await send("px 403", { ...https(), HTTPS_PROXY: strict.url });
    expect(r.exitCode).toBe(77);
    expect(r.stderr).toMatch(
      new RegExp(
        `the proxy http://127\\.0\\.0\\.1:${strict.port} \\(from HTTPS_PROXY\\) does not allow connections to 127\\.0\\.0\\.1:${front.port} \\(HTTP 403\\)`,
      ),
    );
    expect(r.stderr).not.toMatch(/revoked/);
  });

  test("a proxy that is down: 69 naming it; one that cannot reach the service (502): 69; nothing sent", async () => {
    const down = await send("px down", { ...https(), HTTPS_PROXY: "http://127.0.0.1:1" });
    expect(down.exitCode).toBe(69);
    expect(down.stderr).toMatch(
      /cannot reach the proxy http:\/\/127\.0\.0\.1:1 \(from HTTPS_PROXY\): connection refused/,
    );
    const gone = await send("px 502", { ...t.env, MAILSEND_BASE_URL: "https://127.0.0.1:1", HTTPS_PROXY: proxy.url });
    expect(gone.exitCode).toBe(69);
    expect(gone.stderr).toMatch(
      /the proxy http:\/\/127\.0\.0\.1:\d+ \(from HTTPS_PROXY\) could not connect to 127\.0\.0\.1:1 \(HTTP 502\)/,
    );
    expect(await stored("px down")).toBe(0);
  });

  test('a proxy password with a "/", "?" or "#" not %-encoded: 78, and no part of it is printed or used as the host', async () => {
    for (const sep of ["/", "?", "#"]) {
      const r = await runInProcess(
        ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "px cut", "--text", "hi", "--json"],
        {
          env: { ...https(), HTTPS_PROXY: `http://alice:2024${sep}cutpass@127.0.0.1:${guarded.port}` },
        },
      );
      expect(r.exitCode, r.stderr).toBe(78);
      expect(JSON.parse(r.stderr.trim()).error.message).toMatch(/HTTPS_PROXY has its user or password cut/);
      expect(r.stdout + r.stderr).not.toContain("2024");
      expect(r.stdout + r.stderr).not.toContain("cutpass");
      expect(r.stdout + r.stderr).not.toContain("alice");
    }
    expect(guarded.log).toEqual([]);
  });

  test("--proxy with a password in it: 64, and the value is not repeated", async () => {
    const r = await send("px flagpw", https(), ["--proxy", `http://alice:${PASSWORD}@127.0.0.1:${guarded.port}`]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/--proxy must not hold a password/);
  });

  test("the batch's pooled connections and a body over 1 MB go through the proxy too", async () => {
    const rows = join(t.scratch.dir, "px-rows.jsonl");
    const lines = [0, 1, 2, 3].map((i) =>
      JSON.stringify({ from: "ci@example.com", to: "dev@example.com", subject: `px batch ${i}`, html: "<p>hi</p>" }),
    );
    t.scratch.file("px-rows.jsonl", `${lines.join("\n")}\n`);
    const b = await runInProcess(
      ["batch", rows, "--concurrency", "2", "--journal", join(t.scratch.dir, "px-journal"), "--quiet"],
      { env: { ...https(), HTTPS_PROXY: proxy.url } },
    );
    expect(b.exitCode, b.stderr).toBe(0);
    expect(proxy.log.length).toBeGreaterThanOrEqual(1);
    expect(proxy.log.every((e) => e.method === "CONNECT" && e.status === 200)).toBe(true);
    for (let i = 0; i < 4; i++) expect(await stored(`px batch ${i}`)).toBe(1);

    proxy.log.length = 0;
    const big = t.scratch.file("px-big.bin", Buffer.alloc(1_200_000, 7));
    const r = await send("px big", { ...https(), HTTPS_PROXY: proxy.url }, ["-a", big]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(proxy.log).toEqual([expect.objectContaining({ method: "CONNECT", status: 200 })]);
    // Through the batch's engine, a refusing proxy is named too. (--fresh: a new journal for rows
    // px-journal records as sent is otherwise refused before anything is tried.)
    const refused = await runInProcess(
      ["batch", rows, "--concurrency", "2", "--journal", join(t.scratch.dir, "px-journal-2"), "--fresh", "--json"],
      { env: { ...https(), HTTPS_PROXY: guarded.url } },
    );
    expect(refused.exitCode).toBe(77);
    expect(refused.stdout + refused.stderr).toMatch(
      /the proxy http:\/\/127\.0\.0\.1:\d+ \(from HTTPS_PROXY\) requires a user and password/,
    );
  });

  test("doctor names the proxy for the base URL and reaches the service through it", async () => {
    const r = await runInProcess(["doctor", "--json"], {
      env: {
        ...https(),
        HTTPS_PROXY: `http://alice:${PASSWORD}@127.0.0.1:${guarded.port}`,
        MAILSEND_CONFIG: join(t.scratch.dir, "none.json"),
      },
    });
    expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    const checks = Object.fromEntries(
      (JSON.parse(r.stdout).checks as Array<{ name: string; detail: string; ok: boolean }>).map((c) => [c.name, c]),
    );
    expect(checks["config.rest"]!.detail).toMatch(
      new RegExp(`through the proxy http://127\\.0\\.0\\.1:${guarded.port} \\(from HTTPS_PROXY, as alice; CONNECT\\)`),
    );
    expect(checks["rest.connect"]!.detail).toMatch(
      /reached through the proxy http:\/\/127\.0\.0\.1:\d+ in \d+ ms, TLSv1\.[23], certificate CN=localhost/,
    );
    expect(checks["rest.key"]!.ok).toBe(true);
    const direct = await runInProcess(["doctor", "--json"], {
      env: {
        ...https(),
        HTTPS_PROXY: proxy.url,
        NO_PROXY: "127.0.0.1",
        MAILSEND_CONFIG: join(t.scratch.dir, "none.json"),
      },
    });
    expect(JSON.parse(direct.stdout).checks.find((c: { name: string }) => c.name === "config.rest").detail).toMatch(
      /direct \(a proxy is set, but NO_PROXY \(127\.0\.0\.1\) exempts this host\)/,
    );
  });
});

describe.skipIf(lacks(tinyproxy))("through tinyproxy", () => {
  test("https:// by CONNECT and http:// in the absolute form, both seen in its log", async () => {
    const tp = await startTinyproxy();
    try {
      const a = await send("tiny https", { ...https(), HTTPS_PROXY: tp.url });
      expect(a.exitCode, a.stderr).toBe(0);
      const b = await send("tiny http", { ...t.env, HTTP_PROXY: tp.url });
      expect(b.exitCode, b.stderr).toBe(0);
      const log = readFileSync(tp.logFile, "utf8");
      expect(log).toMatch(new RegExp(`CONNECT 127\\.0\\.0\\.1:${front.port}`));
      expect(log).toMatch(new RegExp(`POST http://127\\.0\\.0\\.1:${t.sb.ports.http}/send`));
      expect(await stored("tiny https")).toBe(1);
      expect(await stored("tiny http")).toBe(1);
    } finally {
      await tp.stop();
    }
  });

  test("tinyproxy refusing the credentials given (it answers 401, not 407): 77 naming the proxy, not retried, not the API key", async () => {
    const tp = await startTinyproxy({ basicAuth: "alice tinypass42" });
    try {
      const wrongUrl = tp.url.replace("http://", "http://alice:wrongpass42@");
      // https:// service: tinyproxy answers the CONNECT itself; the service never saw anything.
      const tunnel = await send("tiny 401 https", { ...https(), HTTPS_PROXY: wrongUrl }, ["--json"]);
      expect(tunnel.exitCode, tunnel.stderr).toBe(77);
      const e1 = JSON.parse(tunnel.stderr.trim().split("\n").at(-1)!).error;
      expect(e1.code).toBe("auth_failed");
      expect(e1.message).toContain(`the proxy ${tp.url}`);
      expect(e1.message).toContain("refused its user and password (HTTP 401");
      expect(tunnel.stderr).not.toContain('"wait"');
      // http:// service: tinyproxy's 401 page comes back as the answer to the request.
      const plain = await send("tiny 401 http", { ...t.env, HTTP_PROXY: wrongUrl }, ["--json"]);
      expect(plain.exitCode, plain.stderr).toBe(77);
      const e2 = JSON.parse(plain.stderr.trim().split("\n").at(-1)!).error;
      expect(e2.message).toContain(`the proxy ${tp.url} (from HTTP_PROXY) refused its user and password`);
      expect(e2.hint).toContain("HTTP_PROXY");
      expect(e2.hint).not.toContain("MAILSEND_API_KEY");
      for (const r of [tunnel, plain]) expect(r.stdout + r.stderr).not.toContain("wrongpass42");
      expect(await stored("tiny 401 https")).toBe(0);
      expect(await stored("tiny 401 http")).toBe(0);
      // The right ones get through.
      const right = await send("tiny 401 right", {
        ...https(),
        HTTPS_PROXY: tp.url.replace("http://", "http://alice:tinypass42@"),
      });
      expect(right.exitCode, right.stderr).toBe(0);
      expect(await stored("tiny 401 right")).toBe(1);
    } finally {
      await tp.stop();
    }
  });

  test("a send that waits for its slot (its tunnel prepared ahead) uses one tunnel, as the first does, and each is stored once", async () => {
    const tp = await startTinyproxy();
    const state = mkdtempSync(join(tmpdir(), "mailsend-proxy-wait-"));
    try {
      const env = {
        ...https(),
        HTTPS_PROXY: tp.url,
        MAILSEND_RATE_LIMIT: "1",
        MAILSEND_RATE_WINDOW: "2",
        MAILSEND_STATE_DIR: state,
      };
      const a = await send("tiny wait 1", env);
      expect(a.exitCode, a.stderr).toBe(0);
      const b = await send("tiny wait 2", env, ["--json"]);
      expect(b.exitCode, b.stderr).toBe(0);
      expect(JSON.parse(b.stdout).waited_ms).toBeGreaterThan(0);
      expect(await stored("tiny wait 1")).toBe(1);
      expect(await stored("tiny wait 2")).toBe(1);
      const connects =
        readFileSync(tp.logFile, "utf8").match(new RegExp(`CONNECT 127\\.0\\.0\\.1:${front.port}`, "g")) ?? [];
      expect(connects).toHaveLength(2);
    } finally {
      await tp.stop();
      rmSync(state, { recursive: true, force: true });
    }
  });
});

describe("SMTP through --smtp-proxy", () => {
  test("socks5:// with a user and password, STARTTLS and implicit TLS inside it; HTTPS_PROXY alone is not used for SMTP", async () => {
    const socks = await startSocks5({ auth: { user: "bob", password: PASSWORD } });
    try {
      const env = { ...t.env, MAILSEND_TRANSPORT: "smtp", HTTPS_PROXY: "http://127.0.0.1:1" };
      const plain = await send("smtp direct", env);
      expect(plain.exitCode, plain.stderr).toBe(0);
      expect(socks.log).toEqual([]);
      const viaSocks = { ...env, MAILSEND_SMTP_PROXY: `socks5://bob:${PASSWORD}@127.0.0.1:${socks.port}` };
      const a = await send("smtp socks starttls", viaSocks);
      expect(a.exitCode, a.stderr).toBe(0);
      const b = await send("smtp socks implicit", {
        ...viaSocks,
        ...t.envImplicit,
        MAILSEND_TRANSPORT: "smtp",
        HTTPS_PROXY: "http://127.0.0.1:1",
      });
      expect(b.exitCode, b.stderr).toBe(0);
      expect(socks.log).toEqual([`127.0.0.1:${t.sb.ports.smtp}`, `127.0.0.1:${t.sb.ports.smtps}`]);
      expect(await stored("smtp socks starttls")).toBe(1);
      expect(await stored("smtp socks implicit")).toBe(1);
      const wrong = await send("smtp socks wrong", {
        ...env,
        MAILSEND_SMTP_PROXY: `socks5://bob:nope@127.0.0.1:${socks.port}`,
      });
      expect(wrong.exitCode).toBe(77);
      expect(wrong.stderr).toMatch(
        new RegExp(
          `the proxy socks5://127\\.0\\.0\\.1:${socks.port} \\(from MAILSEND_SMTP_PROXY\\) refused its user and password`,
        ),
      );
      const down = await send("smtp socks down", { ...env }, ["--smtp-proxy", "socks5://127.0.0.1:1"]);
      expect(down.exitCode).toBe(69);
      expect(down.stderr).toMatch(
        /cannot reach the proxy socks5:\/\/127\.0\.0\.1:1 \(from --smtp-proxy\): connection refused/,
      );
    } finally {
      await socks.stop();
    }
  });

  test("http:// as --smtp-proxy: a CONNECT tunnel to the SMTP port", async () => {
    const r = await send("smtp connect", { ...t.env, MAILSEND_TRANSPORT: "smtp" }, ["--smtp-proxy", proxy.url]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(proxy.log).toEqual([
      expect.objectContaining({ method: "CONNECT", target: `127.0.0.1:${t.sb.ports.smtp}`, status: 200 }),
    ]);
  });
});
