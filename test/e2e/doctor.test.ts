/**
 * `mailsend doctor`, the built binary against an in-process sandbox (and a
 * small HTTPS endpoint for the certificate checks): all green, a revoked or
 * wrong key (77), port/TLS-mode mistakes with their hint (78), what is
 * skipped, the local budget, --json's shape, and that neither the key nor a
 * message ever comes out of it.
 *
 * The sandbox answers from this process: the CLI runs with execa, async.
 */
import https from "node:https";
import type { AddressInfo } from "node:net";
import { mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run } from "../../src/cli/program.js";
import { CHECK_NAMES } from "../../src/doctor/checks.js";
import { runCli, runInProcess, stdoutJson, type CliResult, type RunOptions } from "../helpers/cli.js";
import { startRedis } from "../helpers/redis.js";
import { addKey, revokeKey, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";
import { lacks, redisServer } from "../helpers/tools.js";

let t: TestSandbox;
const tmp = scratch("mailsend-doctor-");
/** Keys that must never appear in any output of these tests. */
const secrets: string[] = [];

useSandbox((sb) => (t = sb));
beforeAll(async () => {
  secrets.push(t.key);
});
afterAll(async () => {
  tmp.remove();
});

interface Check {
  name: string;
  ok: boolean;
  skipped?: boolean;
  detail: string;
  hint?: string;
  exit?: number;
  code?: string;
  certificate?: { subject: string; issuer: string; valid_to: string; days_left: number; trusted: boolean };
}

function assertNoSecrets(r: CliResult): void {
  for (const k of secrets) {
    for (const form of [k, Buffer.from(k).toString("base64")]) {
      expect(r.stdout).not.toContain(form);
      expect(r.stderr).not.toContain(form);
    }
  }
}

/** doctor with the sandbox's settings (no config file of the developer's leaks in). */
async function doctor(args: string[] = [], opts: RunOptions = {}): Promise<CliResult> {
  const r = await runInProcess(["doctor", ...args], {
    ...opts,
    env: { ...t.env, MAILSEND_CONFIG: join(tmp.dir, "no-config.json"), ...opts.env },
  });
  assertNoSecrets(r);
  expect(r.timedOut).toBe(false);
  return r;
}

async function doctorJson(
  args: string[] = [],
  opts: RunOptions = {},
): Promise<{ r: CliResult; report: { ok: boolean; checks: Check[] }; byName: Record<string, Check> }> {
  const r = await doctor([...args, "--json"], opts);
  const report = JSON.parse(r.stdout) as { ok: boolean; checks: Check[] };
  return { r, report, byName: Object.fromEntries(report.checks.map((c) => [c.name, c])) };
}

/** The line of one check in the human output. */
function line(r: CliResult, label: string): string {
  const found = r.stdout.split("\n").find((l) => new RegExp(`^(ok  |FAIL|skip) ${label}\\b`).test(l));
  if (!found) throw new Error(`no line for ${label} in:\n${r.stdout}`);
  return found;
}

describe("against a healthy sandbox", () => {
  it("passes every check, one readable line each, and sends nothing", async () => {
    const before = t.sb.store.count;
    const r = await doctor();
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    for (const label of [
      "API key",
      "transport",
      "REST config",
      "SMTP config",
      "REST connect",
      "REST key",
      "SMTP TLS",
      "SMTP AUTH",
    ]) {
      expect(line(r, label)).toMatch(/^ok {2}/);
    }
    // The budget is off in the test environment (MAILSEND_RATE_LIMIT=0), and there is no profile.
    expect(line(r, "rate limit")).toMatch(/^skip .*off/);
    expect(line(r, "profile")).toMatch(/^skip /);
    expect(r.stdout).toMatch(/all checks passed/);
    expect(r.stdout).not.toMatch(/FAIL/);
    // Not a terminal: words, no colour codes.
    expect(r.stdout).not.toContain("\u001b[");
    expect(line(r, "API key")).toMatch(/\d+ characters, fingerprint sha256:[0-9a-f]{12}/);
    expect(line(r, "SMTP TLS")).toMatch(
      /STARTTLS .*TLSv1\.[23], certificate CN=localhost \(issuer CN=mailsend sandbox CA\), expires \d{4}-\d\d-\d\d \(in \d+ days\)/,
    );
    expect(line(r, "SMTP AUTH")).toMatch(/AUTH LOGIN as mailsend accepted/);
    expect(line(r, "REST key")).toMatch(/HTTP 400/);
    expect(r.stderr).toBe("");
    expect(t.sb.store.count).toBe(before);
  });

  it("--json: one object {ok, checks[]} with every check in order", async () => {
    const { r, report, byName } = await doctorJson();
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toBe("");
    expect(Object.keys(report).sort()).toEqual(["checks", "ok"]);
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([...CHECK_NAMES]);
    for (const c of report.checks) {
      expect(typeof c.name).toBe("string");
      expect(c.ok).toBe(true);
      expect(typeof c.detail).toBe("string");
      expect(c.exit).toBeUndefined();
      if ("skipped" in c) expect(c.skipped).toBe(true);
      if ("hint" in c) expect(typeof c.hint).toBe("string");
    }
    const cert = byName["smtp.connect"]!.certificate!;
    expect(cert.subject).toBe("CN=localhost");
    expect(cert.trusted).toBe(true);
    expect(cert.days_left).toBeGreaterThan(0);
    expect(Date.parse(cert.valid_to)).toBeGreaterThan(Date.now());
  });

  it("checks both transports whichever is selected", async () => {
    const { r, byName } = await doctorJson(["--transport", "smtp"]);
    expect(r.exitCode).toBe(0);
    expect(byName["config.transport"]!.detail).toMatch(/^smtp \(from --transport\)/);
    for (const n of ["rest.connect", "rest.key", "smtp.connect", "smtp.auth"])
      expect(byName[n]!.skipped, n).toBeUndefined();
  });

  it("no transport named: send's default, auto with an SMTP host configured (neither selected), else rest", async () => {
    const both = await doctorJson();
    expect(both.r.exitCode).toBe(0);
    expect(both.byName["config.transport"]!.detail).toMatch(/^auto \(from the default, as an SMTP host is configured/);
    expect(both.byName["config.rest"]!.detail).not.toMatch(/selected/);
    const restAlone = await doctorJson([], { env: { MAILSEND_SMTP_HOST: undefined } });
    expect(restAlone.byName["config.transport"]!.detail).toMatch(/^rest \(from the default\)/);
    expect(restAlone.byName["config.rest"]!.detail).toMatch(/\(the selected transport\)/);
  });

  it("implicit TLS on the 465-role port", async () => {
    const { r, byName } = await doctorJson([], { env: t.envImplicit });
    expect(r.exitCode).toBe(0);
    expect(byName["smtp.connect"]!.detail).toMatch(/implicit TLS/);
    expect(byName["smtp.auth"]!.ok).toBe(true);
  });
});

describe("on a terminal", () => {
  /** The CLI in this process with terminal streams (NODE_EXTRA_CA_CERTS is read only at start: --ca-file instead). */
  async function onTty(env: Record<string, string | undefined>) {
    const tty = () => Object.assign(new PassThrough(), { isTTY: true });
    const stdout = tty();
    const stderr = tty();
    let out = "";
    let err = "";
    stdout.on("data", (d: Buffer) => (out += d.toString()));
    stderr.on("data", (d: Buffer) => (err += d.toString()));
    const code = await run(["doctor", "--ca-file", t.sb.tls.caPath], {
      stdout,
      stderr,
      stdin: tty(),
      env: {
        ...t.env,
        NODE_EXTRA_CA_CERTS: undefined,
        MAILSEND_CONFIG: join(tmp.dir, "no-config.json"),
        MAILSEND_RATE_LIMIT: "0",
        TERM: "xterm-256color",
        HOME: tmp.dir,
        ...env,
      },
    });
    for (const k of secrets) expect(out + err).not.toContain(k);
    return { code, out, err };
  }

  it("marks checks ✓ / – in colour", async () => {
    const r = await onTty({});
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(/✓.*SMTP AUTH/);
    expect(r.out).toMatch(/–.*rate limit/);
    expect(r.out).toContain("\u001b[");
    expect(r.out).not.toMatch(/^(ok {2}|FAIL|skip) /m);
  });

  it("with NO_COLOR: the words, no escape codes", async () => {
    const r = await onTty({ NO_COLOR: "1", MAILSEND_SMTP_TLS: "implicit" });
    expect(r.code).toBe(78);
    expect(r.out).toMatch(/^ok {3}SMTP config/m);
    expect(r.out).toMatch(/^FAIL SMTP TLS/m);
    expect(r.out).not.toContain("\u001b[");
    expect(r.out).not.toMatch(/[✓✗]/);
  });
});

describe("a key the service refuses", () => {
  it("a revoked key: the AUTH check fails with 77, and so does the REST key check", async () => {
    const { id, key } = await addKey(t.dir);
    secrets.push(key);
    await revokeKey(t.dir, id);
    const env = { MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: key };
    const human = await doctor([], { env });
    expect(human.exitCode).toBe(77);
    expect(line(human, "SMTP AUTH")).toMatch(/^FAIL SMTP AUTH .*(revoked).*\(exit 77\)/);
    expect(line(human, "REST key")).toMatch(/^FAIL REST key .*HTTP 403.*\(exit 77\)/);
    expect(line(human, "SMTP TLS")).toMatch(/^ok {2}/);
    // A sandbox on this machine: the hint says how to make a new key there.
    expect(human.stdout).toMatch(
      /-> The key is revoked or expired\. On a mailsend sandbox .*`mailsend sandbox keys add --save`/,
    );
    expect(human.stdout).toMatch(/exit 77 from the first: REST key/);
    // The first failure is said once: its FAIL line and hint, not again as an error on stderr.
    expect(human.stdout.match(/the API key is not allowed to send \(HTTP 403\)/g)).toHaveLength(1);
    expect(human.stderr).toBe("");

    const { r, byName } = await doctorJson([], { env });
    expect(r.exitCode).toBe(77);
    expect(byName["smtp.auth"]).toMatchObject({ ok: false, exit: 77, code: "key_revoked" });
    expect(byName["rest.key"]).toMatchObject({ ok: false, exit: 77, code: "key_revoked" });
    // The usual error line on stderr carries the first failure.
    const err = JSON.parse(r.stderr.trim()) as { error: { code: string; exit: number } };
    expect(err.error).toMatchObject({ code: "key_revoked", exit: 77 });
  });

  it("a key the service never issued: 77 with a hint to check the key", async () => {
    const wrong = "msk_not_a_real_key_0123456789abcdef";
    secrets.push(wrong);
    const { r, byName } = await doctorJson(["--transport", "smtp"], {
      env: { MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: wrong },
    });
    expect(r.exitCode).toBe(77);
    expect(byName["smtp.auth"]).toMatchObject({ ok: false, exit: 77, code: "auth_failed" });
    expect(byName["rest.key"]).toMatchObject({ ok: false, exit: 77, code: "auth_failed" });
    expect(byName["smtp.auth"]!.hint).toMatch(/Check the API key/);
  });
});

describe("port and TLS mode mistakes", () => {
  it("implicit TLS against the STARTTLS port: 78 with the TLS-mode hint", async () => {
    const r = await doctor(["--smtp-tls", "implicit"]);
    expect(r.exitCode).toBe(78);
    expect(line(r, "SMTP TLS")).toMatch(/^FAIL .*did not answer with TLS.*\(exit 78\)/);
    expect(r.stdout).toMatch(/-> .*use --smtp-tls starttls/);
    expect(line(r, "SMTP AUTH")).toMatch(/^skip /);
  });

  it("STARTTLS against the implicit-TLS port: 78 with the TLS-mode hint, in seconds", async () => {
    const { r, byName } = await doctorJson(["--smtp-port", String(t.sb.ports.smtps), "--smtp-tls", "starttls"]);
    expect(r.exitCode).toBe(78);
    expect(byName["smtp.connect"]).toMatchObject({ ok: false, exit: 78, code: "tls_mismatch" });
    expect(byName["smtp.connect"]!.hint).toMatch(/--smtp-tls implicit/);
    // Found by the TLS probe after a short wait, not by the 10 s greeting timeout running out.
    expect(JSON.stringify(byName["smtp.connect"])).toMatch(/expects TLS from the first byte/);
  });

  it("port 465 with STARTTLS is caught in the configuration", async () => {
    const { r, byName } = await doctorJson(["--smtp-port", "465", "--smtp-tls", "starttls"]);
    expect(r.exitCode).toBe(78);
    expect(byName["config.smtp"]).toMatchObject({ ok: false, exit: 78, code: "tls_mismatch" });
    expect(byName["config.smtp"]!.hint).toMatch(/587 with starttls or 465 with implicit/);
    expect(byName["smtp.connect"]!.skipped).toBe(true);
  });

  it("https:// on the sandbox's plain HTTP port: 78 with the scheme hint", async () => {
    const { r, byName } = await doctorJson(["--base-url", `https://127.0.0.1:${t.sb.ports.http}`]);
    expect(r.exitCode).toBe(78);
    expect(byName["rest.connect"]).toMatchObject({ ok: false, exit: 78, code: "tls_mismatch" });
    expect(byName["rest.connect"]!.hint).toMatch(/https:\/\/ for a TLS port, http:\/\/ for a plain one/);
    expect(byName["rest.key"]!.skipped).toBe(true);
  });

  it("http:// on a TLS port: the REST key check says so (78)", async () => {
    const { r, byName } = await doctorJson(["--base-url", `http://127.0.0.1:${t.sb.ports.smtps}`]);
    expect(r.exitCode).toBe(78);
    expect(byName["rest.key"]).toMatchObject({ ok: false, code: "tls_mismatch" });
    expect(byName["rest.key"]!.hint).toMatch(/Use https:\/\//);
  });

  it("nothing listening: 69, and the other transport is still checked", async () => {
    const { r, byName } = await doctorJson(["--base-url", "http://127.0.0.1:1"]);
    expect(r.exitCode).toBe(69);
    expect(byName["rest.connect"]).toMatchObject({ ok: false, exit: 69, code: "connection_failed" });
    expect(byName["smtp.auth"]!.ok).toBe(true);
  });
});

describe("what is not configured", () => {
  it("the other transport is skipped, not failed", async () => {
    const { r, byName } = await doctorJson([], { env: { MAILSEND_SMTP_HOST: undefined } });
    expect(r.exitCode).toBe(0);
    expect(byName["config.smtp"]).toMatchObject({ ok: true, skipped: true });
    expect(byName["smtp.connect"]).toMatchObject({ ok: true, skipped: true });
    expect(byName["smtp.auth"]).toMatchObject({ ok: true, skipped: true });
    expect(byName["rest.key"]!.skipped).toBeUndefined();
  });

  it("REST alone: a warning (not a failure) that mail from sendmail and the relay which REST cannot carry whole fails with 78", async () => {
    const { r, report, byName } = await doctorJson([], { env: { MAILSEND_SMTP_HOST: undefined } });
    expect(r.exitCode).toBe(0);
    expect(report.ok).toBe(true);
    expect(byName["config.smtp"]).toMatchObject({ ok: true, skipped: true });
    expect(byName["config.smtp"]!.detail).toMatch(/only REST/);
    const hint = byName["config.smtp"]!.hint!;
    expect(hint).toMatch(/^Warning: /);
    expect(hint).toMatch(/sendmail/);
    expect(hint).toMatch(/relay/);
    expect(hint).toMatch(/plain-text body/);
    expect(hint).toMatch(/exit 78/);
    // The relay's reply for such mail, as test/e2e/relay-intake.test.ts sees it.
    expect(hint).toMatch(/the relay refuses it at the end of DATA with 451 4\.3\.5 /);
    expect(hint).toMatch(/MAILSEND_SMTP_HOST/);
    // In the human output too, under the SMTP line, and the run still passes.
    const human = await doctor([], { env: { MAILSEND_SMTP_HOST: undefined, NO_COLOR: "1" } });
    expect(human.exitCode).toBe(0);
    expect(line(human, "SMTP config")).toMatch(/only REST/);
    expect(human.stdout).toMatch(/-> Warning: mail from other programs/);
    expect(human.stdout).toMatch(/all checks passed/);
  });

  it("no warning when SMTP is configured too, or when REST is not", async () => {
    const both = await doctorJson();
    expect(both.byName["config.smtp"]!.hint ?? "").not.toMatch(/Warning/);
    const smtpOnly = await doctorJson([], { env: { MAILSEND_BASE_URL: undefined } });
    for (const c of smtpOnly.report.checks) expect(c.hint ?? "", c.name).not.toMatch(/Warning/);
  });

  it("but the selected one fails (78)", async () => {
    const { r, byName } = await doctorJson(["--transport", "smtp"], { env: { MAILSEND_SMTP_HOST: undefined } });
    expect(r.exitCode).toBe(78);
    expect(byName["config.smtp"]).toMatchObject({ ok: false, exit: 78, code: "config_missing" });
    expect(byName["config.smtp"]!.hint).toMatch(/MAILSEND_SMTP_HOST/);
  });

  it("no key: 78 at the key, the network is still reached, the key checks are skipped", async () => {
    const { r, byName } = await doctorJson([], { env: { MAILSEND_API_KEY_FILE: undefined } });
    expect(r.exitCode).toBe(78);
    expect(byName["config.key"]).toMatchObject({ ok: false, exit: 78, code: "config_missing" });
    expect(byName["rest.connect"]!.ok).toBe(true);
    expect(byName["smtp.connect"]!.ok).toBe(true);
    expect(byName["rest.key"]!.skipped).toBe(true);
    expect(byName["smtp.auth"]!.skipped).toBe(true);
  });

  it("a malformed key (a space in it): 78, and the key is not repeated", async () => {
    const bad = "msk_has a_space_inside_0123456789";
    secrets.push(bad);
    const { r, byName } = await doctorJson([], { env: { MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: bad } });
    expect(r.exitCode).toBe(78);
    expect(byName["config.key"]).toMatchObject({ ok: false, code: "config_invalid" });
  });
});

describe("profiles", () => {
  it("uses the profile's settings and key file, and names the profile", async () => {
    const config = tmp.file(
      "config.json",
      JSON.stringify({
        profiles: {
          work: { base_url: t.env.MAILSEND_BASE_URL, api_key_file: t.sb.paths.apiKeyFile, transport: "rest" },
        },
      }),
    );
    const env = {
      MAILSEND_CONFIG: config,
      MAILSEND_BASE_URL: undefined,
      MAILSEND_API_KEY_FILE: undefined,
      MAILSEND_SMTP_HOST: undefined,
    };
    const { r, byName } = await doctorJson(["--profile", "work"], { env });
    expect(r.exitCode, r.stdout).toBe(0);
    expect(byName["config.profile"]).toMatchObject({ ok: true });
    expect(byName["config.profile"]!.detail).toBe(`profile "work" from ${config}`);
    expect(byName["config.key"]!.detail).toMatch(/^where profile "work" says: \d+ characters/);
    expect(byName["rest.key"]!.ok).toBe(true);
  });

  it("a config file that is not JSON: 78 at the profile, naming the file", async () => {
    const config = tmp.file("broken.json", '{ "profiles": { "work": { "base_url": } } }');
    const { r, byName } = await doctorJson([], { env: { MAILSEND_CONFIG: config } });
    expect(r.exitCode).toBe(78);
    expect(byName["config.profile"]).toMatchObject({ ok: false, exit: 78 });
    expect(byName["config.profile"]!.detail).toContain(config);
    // The rest is still checked, with the environment's settings.
    expect(byName["smtp.auth"]!.ok).toBe(true);
  });
});

describe("the outbox", () => {
  it("says what waits, since when and why, that no runner delivers it, and what failed; it reads only", async () => {
    const state = join(tmp.dir, "state-outbox");
    const env = { MAILSEND_STATE_DIR: state, MAILSEND_QUEUE_AUTORUN: "0" };
    const empty = await doctorJson([], { env });
    expect(empty.r.exitCode).toBe(0);
    expect(empty.byName.outbox).toMatchObject({ ok: true, detail: `nothing queued, in ${join(state, "outbox")}` });
    expect(empty.byName.outbox!.hint).toBeUndefined();
    // Queued for a service that is not there, and tried once: it waits, with that attempt's error.
    const away = { ...env, MAILSEND_BASE_URL: "http://127.0.0.1:9", MAILSEND_TRANSPORT: "rest" };
    const q = await runCli(
      [
        "send",
        "-f",
        "cron@example.com",
        "-t",
        "ops@example.com",
        "-s",
        "held back",
        "--text",
        "x",
        "--queue",
        "always",
      ],
      { env: { ...t.env, MAILSEND_CONFIG: join(tmp.dir, "no-config.json"), ...away } },
    );
    expect(q.exitCode, q.stderr).toBe(0);
    await runCli(["queue", "run"], { env: { ...t.env, MAILSEND_CONFIG: join(tmp.dir, "no-config.json"), ...away } });
    const held = await doctorJson([], { env });
    expect(held.r.exitCode).toBe(0);
    expect(held.byName.outbox!.ok).toBe(true);
    expect(held.byName.outbox!.detail).toMatch(
      /^1 message queued, the oldest \d+s ago \(attempt 1: .*127\.0\.0\.1:9.*; next in \d+[sm]\), in /,
    );
    expect(held.byName.outbox!.hint).toMatch(
      /No runner is delivering now: `mailsend queue run` delivers what is due .*MAILSEND_QUEUE_AUTORUN=0/,
    );
    // Moved to failed/: counted, with how to list and retry them.
    const id = (
      stdoutJson(await runInProcess(["queue", "--json"], { env: { ...t.env, ...env } })) as { id: string }[]
    )[0]!.id;
    const failed = join(state, "outbox", "failed");
    mkdirSync(failed, { recursive: true });
    for (const ext of [".msg", ".state"]) renameSync(join(state, "outbox", "queue", id + ext), join(failed, id + ext));
    const after = await doctor([], { env });
    expect(after.exitCode).toBe(0);
    expect(after.stdout).toMatch(/outbox\s+nothing queued, 1 failed, in /);
    expect(after.stdout).toContain("mailsend queue --failed");
    expect(readdirSync(failed).sort()).toEqual([`${id}.msg`, `${id}.state`]);
  });
});

describe("the local rate-limit budget", () => {
  it("shows the slots used, and the REST key check takes one", async () => {
    const env = { MAILSEND_RATE_LIMIT: "60", MAILSEND_STATE_DIR: join(tmp.dir, "state-a") };
    const first = await doctorJson([], { env });
    expect(first.r.exitCode).toBe(0);
    expect(first.byName.ratelimit!.detail).toMatch(/^0\/60 slots used in the last 60 s for this key; per machine, in /);
    expect(first.byName["rest.key"]!.detail).toMatch(/one slot of the local budget/);
    const second = await doctorJson([], { env });
    expect(second.byName.ratelimit!.detail).toMatch(/^1\/60 slots used/);
  });

  it("when the budget is used up, the REST key check waits its turn: 75, nothing sent to the service", async () => {
    const env = { MAILSEND_RATE_LIMIT: "1", MAILSEND_STATE_DIR: join(tmp.dir, "state-b") };
    expect((await doctorJson([], { env })).r.exitCode).toBe(0);
    const { r, byName } = await doctorJson([], { env });
    expect(r.exitCode).toBe(75);
    expect(byName.ratelimit).toMatchObject({ ok: true });
    expect(byName.ratelimit!.detail).toMatch(/^1\/1 slots used/);
    expect(byName["rest.key"]).toMatchObject({ ok: false, exit: 75, code: "rate_limited" });
    expect(byName["rest.key"]!.hint).toMatch(/The SMTP check uses no slot/);
    expect(byName["smtp.auth"]!.ok).toBe(true);
  });

  it("a shared Redis that cannot be reached: 69 at the rate limit, as send says it", async () => {
    const env = { MAILSEND_RATE_LIMIT: "60", MAILSEND_RATE_LIMIT_URL: "redis://:hunter2@127.0.0.1:1" };
    const { r, byName } = await doctorJson([], { env });
    expect(r.exitCode).toBe(69);
    expect(byName.ratelimit).toMatchObject({ ok: false, exit: 69, code: "connection_failed" });
    expect(byName.ratelimit!.detail).toMatch(/Redis at 127\.0\.0\.1:1: connection refused/);
    expect(byName.ratelimit!.hint).toMatch(/MAILSEND_RATE_LIMIT_URL \(redis:\/\/127\.0\.0\.1:1\) chose this Redis/);
    expect(r.stdout + r.stderr).not.toContain("hunter2");
    // The REST key check still runs (without a slot).
    expect(byName["rest.key"]!.ok).toBe(true);
  });
});

describe.skipIf(lacks(redisServer))("a shared Redis budget", () => {
  it("is named as reachable, with the slots used there", async () => {
    const redis = await startRedis();
    try {
      const env = { MAILSEND_RATE_LIMIT: "60", MAILSEND_RATE_LIMIT_URL: redis.url };
      const first = await doctorJson([], { env });
      expect(first.r.exitCode).toBe(0);
      expect(first.byName.ratelimit!.detail).toMatch(
        /^0\/60 slots used .*shared through Redis at redis:\/\/127\.0\.0\.1:\d+ \(MAILSEND_RATE_LIMIT_URL\): reachable in \d+ ms, no password, plain TCP \(no TLS\), round trip \d+\.\d ms, redis \d/,
      );
      const second = await doctorJson([], { env });
      expect(second.byName.ratelimit!.detail).toMatch(/^1\/60 slots used/);
    } finally {
      await redis.stop();
    }
  });
});

describe("an HTTPS endpoint", () => {
  let server: https.Server;
  let url: string;
  let caPath: string;

  beforeAll(async () => {
    const tls = await tmp.tls();
    caPath = tls.caPath;
    server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      req.resume();
      req.on("end", () => {
        const ok = req.headers.authorization === `Bearer ${t.key}`;
        res.writeHead(ok ? 400 : 401, { "Content-Type": "application/json" });
        res.end(
          JSON.stringify(
            ok
              ? { success: false, error: { code: "invalid_request", message: "from is required" } }
              : { success: false, error: { code: "invalid_api_key", message: "no" } },
          ),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `https://localhost:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server?.close(() => r()));
  });

  it("verifies the certificate and shows its subject and expiry", async () => {
    const { r, byName } = await doctorJson(["--base-url", url, "--ca-file", caPath], {
      env: { MAILSEND_SMTP_HOST: undefined },
    });
    expect(r.exitCode).toBe(0);
    const c = byName["rest.connect"]!;
    expect(c.detail).toMatch(
      /TLSv1\.[23], certificate CN=localhost \(issuer CN=mailsend sandbox CA\), expires \d{4}-\d\d-\d\d/,
    );
    expect(c.certificate).toMatchObject({ subject: "CN=localhost", trusted: true });
    expect(byName["rest.key"]!.ok).toBe(true);
  });

  it("an untrusted certificate: 78 with what to do, the subject shown, and the key not sent", async () => {
    const { r, byName } = await doctorJson(["--base-url", url], {
      env: { MAILSEND_SMTP_HOST: undefined, NODE_EXTRA_CA_CERTS: undefined },
    });
    expect(r.exitCode).toBe(78);
    expect(byName["rest.connect"]).toMatchObject({ ok: false, exit: 78, code: "tls_untrusted" });
    expect(byName["rest.connect"]!.detail).toMatch(/CN=localhost, issued by CN=mailsend sandbox CA/);
    expect(byName["rest.connect"]!.hint).toMatch(/--ca-file/);
    expect(byName["rest.key"]!.skipped).toBe(true);
  });

  it("--insecure accepts it, and says it was not trusted", async () => {
    const { r, byName } = await doctorJson(["--base-url", url, "--insecure"], {
      env: { MAILSEND_SMTP_HOST: undefined, NODE_EXTRA_CA_CERTS: undefined },
    });
    expect(r.exitCode).toBe(0);
    expect(byName["rest.connect"]!.detail).toMatch(/NOT trusted .*--insecure/);
  });
});
