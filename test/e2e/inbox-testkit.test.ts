/**
 * The sandbox's test kit against a real sandbox: `mailsend inbox --query`, `inbox wait` (over the
 * running sandbox's /api/wait), `inbox show --link/--extract/--text/--html` and `latest`; the HTTP
 * long poll answering on arrival and at its timeout; createSandbox()'s search, waitFor and latest.
 */
import { existsSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createSandbox, send, type SandboxWaitError } from "../../src/index.js";
import { runCli, stderrJson, stdoutJson } from "../helpers/cli.js";
import { post, sendRequest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let t: TestSandbox;
useSandbox((s) => (t = s));

/** A message to the sandbox: over REST (HTML only, as the service takes it), or over SMTP when it has a text part. */
async function deliver(over: Record<string, unknown>): Promise<string> {
  if (over.text !== undefined) {
    const smtp = { host: "127.0.0.1", port: t.sb.ports.smtp, tls: "starttls" as const };
    const sent = await send({ from: "app@example.com", ...over } as never, {
      transport: "smtp",
      smtp,
      apiKey: t.key,
      caFile: t.sb.tls.caPath,
      rateLimit: 0,
      retries: 0,
      stateDir: t.scratch.dir,
    });
    return t.sb.store.findByMessageId(sent.messageId)[0]!.id;
  }
  const r = await post(t.sb.urls.baseUrl, JSON.stringify(sendRequest(over)), {
    Authorization: `Bearer ${t.key}`,
    "Content-Type": "application/json",
  });
  expect(r.status, r.text).toBe(200);
  return r.json.message_id as string;
}

const RESET_HTML =
  '<p>Hi Alice,</p><p><a href="https://app.example.com/help">Help</a> <a href="https://app.example.com/reset?token=t0k&amp;u=7">Reset your password</a></p><p>Your code: 482913</p>';

describe("mailsend inbox --query and show", () => {
  it("lists what matches, as a table and as JSON with each message's text and links", async () => {
    const id = await deliver({
      to: "query-alice@example.com",
      subject: "Reset your password",
      html: RESET_HTML,
      text: "Reset: https://app.example.com/reset?token=t0k&u=7\nYour code: 482913",
    });
    await deliver({ to: "query-bob@example.com", subject: "Reset your password", html: "<p>not yours</p>" });
    const table = await runCli(["inbox", "--query", "to:query-alice subject:reset"], { env: t.env });
    expect(table.exitCode, table.stderr).toBe(0);
    expect(table.stdout).toContain(id);
    expect(table.stdout).not.toContain("query-bob");
    const json = await runCli(["inbox", "--query", 'to:query-alice "your code" -has:attachment', "--json"], {
      env: t.env,
    });
    expect(json.exitCode, json.stderr).toBe(0);
    const list = stdoutJson(json);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      id,
      text: expect.stringContaining("Your code: 482913"),
      links: ["https://app.example.com/help", "https://app.example.com/reset?token=t0k&u=7"],
    });
  });

  it("an unknown term is a usage error (64) listing the known ones", async () => {
    const r = await runCli(["inbox", "--query", "to:x size:big"], { env: t.env });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toContain("unknown term size:");
    expect(r.stderr).toContain("has:attachment");
  });

  it("show latest --link [--match], --extract, --text, --html", async () => {
    await deliver({
      to: "show@example.com",
      subject: "Your sign-in code",
      html: RESET_HTML,
      text: "Your code: 482913\nhttps://app.example.com/reset?token=t0k&u=7",
    });
    const run = (args: string[]) => runCli(["inbox", "show", "latest", ...args], { env: t.env });
    const links = await run(["--link"]);
    expect(links.exitCode, links.stderr).toBe(0);
    expect(links.stdout).toBe("https://app.example.com/help\nhttps://app.example.com/reset?token=t0k&u=7\n");
    expect((await run(["--link", "--match", "/reset\\?"])).stdout).toBe(
      "https://app.example.com/reset?token=t0k&u=7\n",
    );
    expect((await run(["--extract", "code: (\\d{6})"])).stdout).toBe("482913\n");
    expect((await run(["--text"])).stdout).toContain("Your code: 482913");
    expect(stdoutJson(await run(["--json"])).links).toEqual([
      "https://app.example.com/help",
      "https://app.example.com/reset?token=t0k&u=7",
    ]);
    expect((await run(["--html"])).stdout).toContain('<a href="https://app.example.com/reset?token=t0k&amp;u=7">');
    const none = await run(["--link", "--match", "nowhere"]);
    expect(none.exitCode).toBe(1);
    expect(none.stderr).toContain("no links matching /nowhere/");
    expect((await run(["--extract", "("])).exitCode).toBe(64);
  });
});

describe("mailsend inbox wait", () => {
  it("returns as soon as the message arrives, printing it", async () => {
    const started = Date.now();
    const waiting = runCli(
      ["inbox", "wait", "--query", "to:wait-carol@example.com subject:welcome", "--timeout", "20s", "--json"],
      { env: t.env },
    );
    await new Promise((r) => setTimeout(r, 800));
    const id = await deliver({
      to: "wait-carol@example.com",
      subject: "Welcome aboard",
      text: "Confirm: https://app.example.com/confirm?c=1",
    });
    const r = await waiting;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(stdoutJson(r)).toEqual([expect.objectContaining({ id, links: ["https://app.example.com/confirm?c=1"] })]);
  });

  it("--count N waits for N", async () => {
    const waiting = runCli(
      ["inbox", "wait", "--query", "to:wait-count@example.com", "--count", "2", "--timeout", "20s", "--json"],
      { env: t.env },
    );
    const a = await deliver({ to: "wait-count@example.com", subject: "one" });
    await new Promise((r) => setTimeout(r, 500));
    const b = await deliver({ to: "wait-count@example.com", subject: "two" });
    const r = await waiting;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(stdoutJson(r).map((m: { id: string }) => m.id)).toEqual([b, a]);
  });

  it("exits 1 at the timeout, saying what it waited for and the closest messages it saw", async () => {
    const near = await deliver({ to: "wait-dave@example.com", subject: "Invoice 7" });
    const r = await runCli(
      ["inbox", "wait", "--query", "to:wait-dave@example.com subject:receipt", "--timeout", "700ms"],
      { env: t.env },
    );
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(
      'waited 700ms for a message matching "to:wait-dave@example.com subject:receipt"; none arrived',
    );
    expect(r.stderr).toContain("closest (same recipient or subject):");
    expect(r.stderr).toContain(near);
    const j = await runCli(
      ["inbox", "wait", "--query", "to:nobody-at-all@example.com", "--timeout", "300ms", "--json"],
      { env: t.env },
    );
    expect(j.exitCode).toBe(1);
    expect(stderrJson(j).error).toMatchObject({ code: "timeout", exit: 1 });
  });

  it("without a running sandbox on the dir it says so (69), a stale address too", async () => {
    const dir = `${t.scratch.dir}/stopped`;
    const stopped = await createSandbox({ dir });
    await stopped.close();
    expect(existsSync(`${dir}/sandbox.url`)).toBe(false);
    const gone = await runCli(["inbox", "wait", "--query", "to:x", "--dir", dir], { env: t.env });
    expect(gone.exitCode).toBe(69);
    expect(gone.stderr).toContain(`no sandbox is running with the data dir ${dir}`);
    writeFileSync(`${dir}/sandbox.url`, `${stopped.baseUrl}\n`);
    const stale = await runCli(["inbox", "wait", "--query", "to:x", "--dir", dir], { env: t.env });
    expect(stale.exitCode).toBe(69);
    expect(stale.stderr).toContain("no sandbox is running");
  });
});

describe("GET /api/wait and /api/messages", () => {
  const api = (path: string) => fetch(`${t.sb.urls.baseUrl}${path}`);

  it("answers 200 on arrival, not at its timeout", async () => {
    const started = Date.now();
    const answer = api(`/api/wait?${new URLSearchParams({ query: "to:poll-erin@example.com", timeout: "20s" })}`);
    await new Promise((r) => setTimeout(r, 300));
    const id = await deliver({ to: "poll-erin@example.com", subject: "Hello Erin" });
    const res = await answer;
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(10_000);
    const body = (await res.json()) as { messages: Array<{ id: string; links: string[]; text: unknown }> };
    expect(body.messages.map((m) => m.id)).toEqual([id]);
  });

  it("answers 408 at its timeout with what it waited for and the closest", async () => {
    await deliver({ to: "poll-frank@example.com", subject: "Hello Frank" });
    const started = Date.now();
    const res = await api(
      `/api/wait?${new URLSearchParams({ query: "to:poll-frank@example.com subject:bye", timeout: "400ms" })}`,
    );
    expect(res.status).toBe(408);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    const body = (await res.json()) as { error: { code: string; message: string }; closest: Array<{ to: string[] }> };
    expect(body.error.code).toBe("timeout");
    expect(body.error.message).toContain("to:poll-frank@example.com subject:bye");
    expect(body.closest[0]!.to).toEqual(["poll-frank@example.com"]);
  });

  it("a bad query or count is a 400; /api/messages?query= and /api/messages/latest", async () => {
    expect((await api("/api/wait?query=nope:1")).status).toBe(400);
    expect((await api("/api/wait?count=0")).status).toBe(400);
    expect((await api("/api/messages?query=size:1")).status).toBe(400);
    const id = await deliver({
      to: "list-gina@example.com",
      subject: "Latest one",
      text: "see https://x.example.com/l",
    });
    const list = (await (await api(`/api/messages?query=${encodeURIComponent("to:list-gina")}`)).json()) as {
      messages: Array<{ id: string; links: string[] }>;
    };
    expect(list.messages.map((m) => [m.id, m.links])).toEqual([[id, ["https://x.example.com/l"]]]);
    const latest = (await (await api("/api/messages/latest")).json()) as { id: string; links: string[] };
    expect(latest).toMatchObject({ id, links: ["https://x.example.com/l"] });
  });
});

describe("createSandbox(): search, waitFor, latest", () => {
  it("waitFor resolves on arrival with the message's links, text and attachments", async () => {
    const sb = await createSandbox();
    try {
      const waiting = sb.waitFor("to:lib-hana@example.com subject:reset", { timeout: "20s" });
      setTimeout(
        () =>
          void send(
            {
              from: "app@example.com",
              to: "lib-hana@example.com",
              subject: "Reset",
              html: RESET_HTML,
              attachments: [{ filename: "a.txt", content: Buffer.from("hello") }],
            },
            sb.options(),
          ),
        300,
      );
      const m = await waiting;
      expect(m.links[1]).toBe("https://app.example.com/reset?token=t0k&u=7");
      expect(m.html).toContain("Your code: 482913");
      expect(m.attachments.map((a) => [a.filename, a.size, a.content().toString()])).toEqual([["a.txt", 5, "hello"]]);
      expect((await sb.latest())?.id).toBe(m.id);
      expect((await sb.raw("latest"))?.toString()).toContain("Subject: Reset");
      expect((await sb.search("has:attachment filename:a.txt")).map((x) => x.id)).toEqual([m.id]);
      expect(await sb.search("-has:attachment")).toEqual([]);
    } finally {
      await sb.close();
    }
  });

  it("waitFor rejects at its timeout with the helpful error", async () => {
    const sb = await createSandbox();
    try {
      await send({ from: "app@example.com", to: "lib-ivan@example.com", subject: "Welcome", text: "hi" }, sb.options());
      const e = (await sb
        .waitFor("to:lib-ivan@example.com subject:goodbye", { timeout: 300 })
        .catch((x: unknown) => x)) as SandboxWaitError;
      expect(e.code).toBe("timeout");
      expect(e.message).toContain(
        'waited 300ms for a message matching "to:lib-ivan@example.com subject:goodbye"; none arrived',
      );
      expect(e.message).toContain('subject "Welcome"');
      expect(e.closest.map((m) => m.subject)).toEqual(["Welcome"]);
      await expect(sb.search("bogus:1")).rejects.toMatchObject({ code: "usage" });
    } finally {
      await sb.close();
    }
  });
});
