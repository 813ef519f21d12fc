/**
 * Keys and the shared limit: revoked and expired keys fail on both channels
 * (as the CLI reports them: exit 77), keys are never shown again, and one
 * sliding-log budget per key covers REST and SMTP together.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runInProcess, stderrJson, stdoutJson } from "../helpers/cli.js";
import { addKey, post, revokeKey, sendRequest, overRest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { SmtpDialog } from "../helpers/smtp-dialog.js";

const sendArgs = (subject: string) => [
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
];

/**
 * These tests watch the sandbox refuse: the client's own budget (which the
 * sandbox's export lines set to its limit) is switched off so it does not wait.
 */
function withKey(env: Record<string, string>, key: string): Record<string, string> {
  const { MAILSEND_API_KEY_FILE: _f, ...rest } = env;
  return { ...rest, MAILSEND_API_KEY: key, MAILSEND_RATE_LIMIT: "0" };
}

describe("keys", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = overRest(sb)));

  it("keeps only hashes on disk and never lists a key", async () => {
    const { id, key } = await addKey(t.dir, ["--label", "ci"]);
    const onDisk = readFileSync(t.sb.paths.keys, "utf8");
    expect(onDisk).not.toContain(key);
    expect(onDisk).not.toContain(t.key);
    const list = await runInProcess(["sandbox", "keys", "list", "--dir", t.dir, "--json"]);
    expect(list.exitCode).toBe(0);
    expect(list.stdout).not.toContain("msk_");
    expect(list.stdout).not.toMatch(/hash/);
    const rows = stdoutJson(list) as Array<{ id: string; label: string; state: string }>;
    expect(rows.find((r) => r.id === id)).toMatchObject({ label: "ci", state: "active" });
    const human = await runInProcess(["sandbox", "keys", "list", "--dir", t.dir]);
    expect(human.stdout).toMatch(/^ID\s+STATE\s+LABEL/);
    expect(human.stdout).not.toContain("msk_");
  });

  it("a wrong key: 401 over REST, 535 over SMTP; both exit 77", async () => {
    const bad = "msk_not-a-real-key";
    const rest = await runInProcess(sendArgs("bad key"), { env: withKey(t.env, bad) });
    expect(rest.exitCode).toBe(77);
    expect(stderrJson(rest).error).toMatchObject({ code: "auth_failed", status: 401 });
    const smtp = await runInProcess([...sendArgs("bad key"), "--transport", "smtp"], { env: withKey(t.env, bad) });
    expect(smtp.exitCode).toBe(77);
    expect(stderrJson(smtp).error).toMatchObject({ code: "auth_failed", status: 535 });
    expect(`${rest.stderr}${smtp.stderr}`).not.toContain(bad);
  });

  it("a revoked key is refused on both channels from the next request on", async () => {
    const { id, key } = await addKey(t.dir, ["--label", "to-revoke"]);
    const env = withKey(t.env, key);
    expect((await runInProcess(sendArgs("before revoke"), { env })).exitCode).toBe(0);
    expect((await runInProcess([...sendArgs("before revoke"), "--transport", "smtp"], { env })).exitCode).toBe(0);
    await revokeKey(t.dir, id);
    const count = t.sb.store.count;
    const rest = await runInProcess(sendArgs("after revoke"), { env });
    expect(rest.exitCode).toBe(77);
    expect(stderrJson(rest).error).toMatchObject({ code: "key_revoked", status: 403 });
    const smtp = await runInProcess([...sendArgs("after revoke"), "--transport", "smtp"], {
      env: withKey(t.envImplicit, key),
    });
    expect(smtp.exitCode).toBe(77);
    expect(stderrJson(smtp).error).toMatchObject({ code: "key_revoked", status: 535 });
    expect(t.sb.store.count).toBe(count);
    const raw = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest()), {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
    });
    expect(raw.json).toEqual({
      success: false,
      error: { code: "key_revoked", message: `the API key ${id} has been revoked` },
    });
  });

  it("an expired key is refused on both channels", async () => {
    const { key } = await addKey(t.dir, ["--expires", "1s"]);
    const env = withKey(t.env, key);
    await new Promise((r) => setTimeout(r, 1100));
    const rest = await runInProcess(sendArgs("expired"), { env });
    expect(rest.exitCode).toBe(77);
    expect(stderrJson(rest).error.status).toBe(403);
    const raw = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest()), {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
    });
    expect(raw.json.error.code).toBe("key_expired");
    const smtp = await runInProcess([...sendArgs("expired"), "--transport", "smtp"], { env });
    expect(smtp.exitCode).toBe(77);
    expect(stderrJson(smtp).error).toMatchObject({ code: "key_revoked", status: 535 });
    expect(smtp.stderr).toContain("expired");
  });

  it("a key revoked during an SMTP session is refused at the end of DATA", async () => {
    const { id, key } = await addKey(t.dir);
    const d = await SmtpDialog.connect(t.sb.ports.smtp);
    await d.cmd("EHLO test");
    await d.starttls(t.sb.tls.ca);
    await d.cmd("EHLO test");
    expect(await d.login("mailsend", key)).toMatch(/^235/);
    await revokeKey(t.dir, id);
    // The sandbox looks at its keys file at most every 50 ms (KeyStore.refresh): a `keys revoke`
    // as quick as the single executable's can end before the next look is due.
    await new Promise((r) => setTimeout(r, 100));
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
    expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
    expect(await d.cmd("DATA")).toMatch(/^354/);
    const count = t.sb.store.count;
    expect(await d.cmd("Subject: x\r\n\r\nbody\r\n.")).toMatch(/^535 5\.7\.8 .*revoked/);
    expect(t.sb.store.count).toBe(count);
    await d.quit();
  });

  it("keys add: the key alone on stdout (for a pipe); on stderr how to keep it", async () => {
    const r = await runInProcess(["sandbox", "keys", "add", "--dir", t.dir, "--label", "piped"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/shown only this once; keep it in a 0600 file and point MAILSEND_API_KEY_FILE at it/);
    expect(r.stderr).not.toContain(r.stdout.trim());
  });

  it("keys add rejects a bad --expires", async () => {
    const r = await runInProcess(["sandbox", "keys", "add", "--dir", t.dir, "--expires", "yesterday"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toContain("--expires");
  });
});

describe("one limit per key across REST and SMTP", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = overRest(sb)), { rateLimit: 4 });

  it("with limit 4, the 5th request in the window is refused on either channel, and nothing is stored", async () => {
    const { key } = await addKey(t.dir);
    const env = withKey(t.env, key);
    expect((await runInProcess(sendArgs("r1"), { env })).exitCode).toBe(0);
    expect((await runInProcess([...sendArgs("s1"), "--transport", "smtp"], { env })).exitCode).toBe(0);
    expect((await runInProcess(sendArgs("r2"), { env })).exitCode).toBe(0);
    expect(
      (await runInProcess([...sendArgs("s2"), "--transport", "smtp"], { env: withKey(t.envImplicit, key) })).exitCode,
    ).toBe(0);
    const stored = t.sb.store.count;

    const rest = await runInProcess(sendArgs("r3"), { env });
    expect(rest.exitCode).toBe(75);
    expect(stderrJson(rest).error).toMatchObject({ code: "rate_limited", status: 429 });
    const smtp = await runInProcess([...sendArgs("s3"), "--transport", "smtp"], { env });
    expect(smtp.exitCode).toBe(75);
    expect(stderrJson(smtp).error).toMatchObject({ code: "rate_limited", status: 451 });
    expect(t.sb.store.count).toBe(stored);

    const raw = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest()), {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
    });
    expect(raw.status).toBe(429);
    expect(raw.json.error.code).toBe("rate_limited");
    const retryAfter = Number(raw.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(raw.headers["ratelimit-limit"]).toBe("4");
    expect(raw.headers["ratelimit-remaining"]).toBe("0");
    expect(Number(raw.headers["ratelimit-reset"])).toBe(retryAfter);

    const stats = (await (await fetch(`${t.sb.urls.baseUrl}/_sandbox/stats`)).json()) as any;
    expect(stats.rest.rateLimited).toBeGreaterThanOrEqual(2);
    expect(stats.smtp.rateLimited).toBeGreaterThanOrEqual(1);
  });

  it("other keys have their own budget", async () => {
    const { key } = await addKey(t.dir);
    expect((await runInProcess(sendArgs("other key"), { env: withKey(t.env, key) })).exitCode).toBe(0);
  });

  it("an idempotent replay is answered even when the window is full", async () => {
    const { key } = await addKey(t.dir);
    const env = withKey(t.env, key);
    const args = [...sendArgs("replay"), "--idempotency-key", "full-window"];
    const first = await runInProcess(args, { env });
    expect(first.exitCode).toBe(0);
    for (let i = 0; i < 3; i++) expect((await runInProcess(sendArgs(`fill ${i}`), { env })).exitCode).toBe(0);
    expect((await runInProcess(sendArgs("over"), { env })).exitCode).toBe(75);
    const again = await runInProcess(args, { env });
    expect(again.exitCode).toBe(0);
    expect(stdoutJson(again).message_id).toBe(stdoutJson(first).message_id);
  });
});

describe("the default limit of 60", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = overRest(sb)));

  it("30 over REST and 30 over SMTP pass; the 61st in the minute is refused on both", async () => {
    const h = { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" };
    const d = await SmtpDialog.connect(t.sb.ports.smtp);
    await d.cmd("EHLO test");
    await d.starttls(t.sb.tls.ca);
    await d.cmd("EHLO test");
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    for (let i = 0; i < 30; i++) {
      expect((await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest({ subject: `rest ${i}` })), h)).status).toBe(
        200,
      );
      expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250/);
      expect(await d.cmd("RCPT TO:<b@example.com>")).toMatch(/^250/);
      expect(await d.cmd("DATA")).toMatch(/^354/);
      expect(await d.cmd(`Subject: smtp ${i}\r\n\r\nbody\r\n.`)).toMatch(/^250/);
    }
    expect(t.sb.store.count).toBe(60);
    const rest = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest({ subject: "61st" })), h);
    expect(rest.status).toBe(429);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^451 /);
    await d.quit();
    expect(t.sb.store.count).toBe(60);
  });
});

describe("the window slides", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = overRest(sb)), { rateLimit: 2, rateWindowMs: 4000 });

  it("a refused request passes once the oldest one has left the window", async () => {
    const h = { Authorization: `Bearer ${t.key}`, "Content-Type": "application/json" };
    const body = JSON.stringify(sendRequest());
    expect((await post(t.sb.urls.baseUrl, body, h)).status).toBe(200);
    // Counted from the first answer: the sandbox logged that request no later than this (a loaded
    // machine's first request can take over 100 ms to arrive after it was started).
    const t0 = Date.now();
    expect((await post(t.sb.urls.baseUrl, body, h)).status).toBe(200);
    const refused = await post(t.sb.urls.baseUrl, body, h);
    expect(refused.status).toBe(429);
    // Whole seconds until the oldest request leaves the 4 s window (how many depends on the machine's speed).
    const retryAfter = Number(refused.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(4);
    // SMTP is refused too, already at MAIL FROM.
    const d = await SmtpDialog.connect(t.sb.ports.smtps, { implicit: true, ca: t.sb.tls.ca });
    await d.cmd("EHLO test");
    expect(await d.login("mailsend", t.key)).toMatch(/^235/);
    expect(await d.cmd("MAIL FROM:<a@example.com>")).toMatch(/^451 4\.7\.1 Rate limit exceeded, try again in \d+ s/);
    await d.quit();
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + 4100 - Date.now())));
    expect((await post(t.sb.urls.baseUrl, body, h)).status).toBe(200);
    expect(t.sb.store.count).toBe(3);
  });
});
