/**
 * `mailsend send` over REST, the built binary against a recording server:
 * what goes on the wire, byte for byte, and what the user sees.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { execa } from "execa";
import { baseEnv, mailsendCommand, runCli, runInProcess, stdoutJson, type RunOptions } from "../helpers/cli.js";
import { headerNames, startRestRecorder, useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_rest_5Gq8Lw2Zp";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
afterAll(() => tmp.remove());

function send(args: string[], opts: RunOptions = {}) {
  return runInProcess(["send", ...args], {
    ...opts,
    env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url, ...opts.env },
  });
}

const MIN = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi"];

describe("the request", () => {
  it("POST /send with the exact headers and only the spec's fields", async () => {
    const r = await send([
      "--from",
      "Alice Example <alice@example.com>",
      "--to",
      '"Doe, John" <john@example.com>',
      "--to",
      "carol@example.com, Dave <dave@example.com>",
      "--subject",
      "Quarterly report",
      "--html",
      "<p>Numbers are up.</p>",
      "--reply-to",
      "Help Desk <help@example.com>",
      "--header",
      "X-Campaign: q3",
      "-H",
      "List-Unsubscribe: <mailto:unsub@example.com>",
      "--idempotency-key",
      "order-42",
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(rec.requests).toHaveLength(1);
    const req = rec.requests[0]!;
    expect(req.method).toBe("POST");
    expect(req.url).toBe("/send");
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers["content-type"]).toBe("application/json");
    expect(req.headers["user-agent"]).toMatch(/^mailsend\/\d+\.\d+\.\d+/);
    expect(req.headers["idempotency-key"]).toBe("order-42");
    expect(Number(req.headers["content-length"])).toBe(req.body.length);
    expect(headerNames(req)).toEqual(
      expect.arrayContaining(["Authorization", "Content-Type", "User-Agent", "Idempotency-Key"]),
    );
    // toEqual on the parsed body plus the raw text: exactly these keys, nothing null or invented.
    expect(req.json).toStrictEqual({
      from: "alice@example.com",
      to: '"Doe, John" <john@example.com>, carol@example.com, Dave <dave@example.com>',
      subject: "Quarterly report",
      html: "<p>Numbers are up.</p>",
      name: "Alice Example",
      reply_to: "Help Desk <help@example.com>",
      headers: { "X-Campaign": "q3", "List-Unsubscribe": "<mailto:unsub@example.com>" },
    });
    expect(req.text).not.toContain("null");
    expect(r.stdout).toMatch(/^sent msg_\S+ \(rest, to john@example\.com, carol@example\.com, dave@example\.com\)\n$/);
  });

  it("the minimal request has exactly from, to, subject, html", async () => {
    const r = await send([...MIN, "--html", "<b>x</b>"]);
    expect(r.exitCode).toBe(0);
    expect(Object.keys(rec.requests[0]!.json)).toEqual(["from", "to", "subject", "html"]);
    expect(rec.requests[0]!.headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("--name beats the display name of --from", async () => {
    const r = await send([
      "-f",
      "Alice <alice@example.com>",
      "--name",
      "Support Team",
      "-t",
      "b@example.com",
      "-s",
      "x",
      "--html",
      "x",
    ]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json).toMatchObject({ from: "alice@example.com", name: "Support Team" });
  });

  it("non-ASCII survives as UTF-8 JSON", async () => {
    const r = await send([
      "-f",
      "Jürgen Müller <j@example.de>",
      "-t",
      "Zoë <z@example.com>",
      "-s",
      "Grüße 📧",
      "--html",
      "<p>naïve café</p>",
    ]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json).toStrictEqual({
      from: "j@example.de",
      to: "Zoë <z@example.com>",
      subject: "Grüße 📧",
      html: "<p>naïve café</p>",
      name: "Jürgen Müller",
    });
  });

  it("attachments are {content: base64, filename}, byte-exact, with path#rename", async () => {
    const bin = randomBytes(100_003);
    const pdf = tmp.file("report.pdf", bin);
    const empty = tmp.file("empty.txt", "");
    const r = await send([...MIN, "--html", "x", "--attach", pdf, "-a", `${pdf}#Q3 Résumé.pdf`, "-a", empty]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.attachments).toStrictEqual([
      { content: bin.toString("base64"), filename: "report.pdf" },
      { content: bin.toString("base64"), filename: "Q3 Résumé.pdf" },
      { content: "", filename: "empty.txt" },
    ]);
  });

  it("piped stdin is the HTML body", async () => {
    const html = "<html><body><h1>Nightly</h1><p>ü</p></body></html>\n";
    const r = await send(MIN, { input: html });
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.html).toBe(html);
  });

  it("a stdin pipe that stays silent gets a notice on stderr; the body that comes later is sent", async () => {
    const child = execa(...mailsendCommand(["send", ...MIN]), {
      reject: false,
      extendEnv: false,
      env: { ...baseEnv(), MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
      stdin: "pipe",
      timeout: 30_000,
    });
    // Wait for the notice (event-driven, no fixed sleep), then send the body.
    await new Promise<void>((resolve) => {
      let seen = "";
      child.stderr!.on("data", (d: Buffer) => {
        seen += d.toString();
        if (seen.includes("waiting for the body on stdin")) resolve();
      });
      void child.then(() => resolve());
    });
    child.stdin!.end("<p>late but here</p>");
    const r = await child;
    expect(r.exitCode, String(r.stderr)).toBe(0);
    expect(String(r.stderr)).toMatch(/^warning: waiting for the body on stdin .*Ctrl-D/m);
    expect(rec.requests[0]!.json.html).toBe("<p>late but here</p>");
  });

  it("a text-only body is HTML-escaped inside <pre>", async () => {
    const r = await send([...MIN, "--text", `if a < b && c > d then "ok" 'fine'\nline 2`]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.html).toBe(
      "<pre>if a &lt; b &amp;&amp; c &gt; d then &quot;ok&quot; &#39;fine&#39;\nline 2</pre>",
    );
  });

  it("--text-file and --html-file", async () => {
    const h = tmp.file("b.html", "<p>from file</p>");
    const r = await send([...MIN, "--html-file", h]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.html).toBe("<p>from file</p>");
    const t = tmp.file("b.txt", "x < y");
    const r2 = await send([...MIN, "--text-file", t]);
    expect(r2.exitCode).toBe(0);
    expect(rec.requests[1]!.json.html).toBe("<pre>x &lt; y</pre>");
  });

  it("--html and --text together: html is sent, with a warning that text is not", async () => {
    const r = await send([...MIN, "--html", "<p>h</p>", "--text", "t"]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.html).toBe("<p>h</p>");
    expect(r.stderr).toMatch(/warning:.*text body is not sent/);
  });

  it("--json-file: flags override its fields, --attach adds to its attachments", async () => {
    const extra = randomBytes(17);
    const extraPath = tmp.file("extra.bin", extra);
    const reqFile = tmp.file(
      "request.json",
      JSON.stringify({
        from: "File Sender <file@example.com>",
        to: "one@example.com, Two <two@example.com>",
        subject: "From the file",
        html: "<p>file body</p>",
        reply_to: "replies@example.com",
        headers: { "X-Source": "file", "X-Keep": "yes" },
        attachments: [{ content: Buffer.from("in the file").toString("base64"), filename: "file.txt" }],
      }),
    );
    const r = await send([
      "--json-file",
      reqFile,
      "--subject",
      "Overridden subject",
      "--header",
      "X-Source: flag",
      "--attach",
      extraPath,
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json).toStrictEqual({
      from: "file@example.com",
      to: "one@example.com, Two <two@example.com>",
      subject: "Overridden subject",
      html: "<p>file body</p>",
      name: "File Sender",
      reply_to: "replies@example.com",
      headers: { "X-Keep": "yes", "X-Source": "flag" },
      attachments: [
        { content: Buffer.from("in the file").toString("base64"), filename: "file.txt" },
        { content: extra.toString("base64"), filename: "extra.bin" },
      ],
    });
  });

  it("--json-file - reads the request from stdin", async () => {
    const body = { from: "a@example.com", to: "b@example.com", subject: "stdin json", html: "<i>x</i>" };
    const r = await send(["--json-file", "-"], { input: JSON.stringify(body) });
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json).toStrictEqual(body);
  });

  it("--eml becomes a send request", async () => {
    const att = randomBytes(300);
    const eml = tmp.file(
      "message.eml",
      [
        "From: =?UTF-8?Q?J=C3=BCrgen?= <j@example.de>",
        'To: "Doe, John" <john@example.com>, b@example.com',
        "Reply-To: help@example.com",
        `Subject: =?UTF-8?B?${Buffer.from("Grüße aus Köln").toString("base64")}?=`,
        "X-Campaign: eml",
        "Message-ID: <m1@example.de>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="XX"',
        "",
        "--XX",
        "Content-Type: text/html; charset=utf-8",
        "",
        "<p>Hallo</p>",
        "--XX",
        'Content-Type: application/octet-stream; name="data.bin"',
        'Content-Disposition: attachment; filename="data.bin"',
        "Content-Transfer-Encoding: base64",
        "",
        att.toString("base64").replace(/.{76}/g, "$&\r\n"),
        "--XX--",
        "",
      ].join("\r\n"),
    );
    const r = await send(["--eml", eml, "--idempotency-key", "eml-1"]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const req = rec.requests[0]!;
    expect(req.headers["idempotency-key"]).toBe("eml-1");
    expect({ ...req.json, html: req.json.html.trim() }).toStrictEqual({
      from: "j@example.de",
      to: '"Doe, John" <john@example.com>, b@example.com',
      subject: "Grüße aus Köln",
      html: "<p>Hallo</p>",
      name: "Jürgen",
      reply_to: "help@example.com",
      headers: { "X-Campaign": "eml" },
      attachments: [{ content: att.toString("base64"), filename: "data.bin" }],
    });
  });

  it("--eml with only a text part sends it escaped in <pre>", async () => {
    const eml = tmp.file("text.eml", "From: a@example.com\r\nTo: b@example.com\r\nSubject: t\r\n\r\n1 < 2\r\n");
    const r = await send(["--eml", eml]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.json.html).toBe("<pre>1 &lt; 2\n</pre>");
  });

  it("a base URL with a path keeps it", async () => {
    const r = await send([...MIN, "--html", "x", "--base-url", `${rec.url}/v1/`]);
    expect(r.exitCode).toBe(0);
    expect(rec.requests[0]!.url).toBe("/v1/send");
  });

  it("the key can come from a file or stdin", async () => {
    const keyFile = tmp.file("key", `${KEY}\n`);
    const a = await send([...MIN, "--html", "x"], {
      env: { MAILSEND_API_KEY: undefined, MAILSEND_API_KEY_FILE: keyFile },
    });
    expect(a.exitCode).toBe(0);
    const b = await send([...MIN, "--html", "x", "--api-key-stdin"], {
      env: { MAILSEND_API_KEY: undefined },
      input: `${KEY}\n`,
    });
    expect(b.exitCode).toBe(0);
    expect(rec.requests.map((q) => q.headers.authorization)).toEqual([`Bearer ${KEY}`, `Bearer ${KEY}`]);
  });
});

describe("output", () => {
  it("--json prints exactly one result object", async () => {
    rec.script({ status: 200, body: { success: true, message_id: "msg_fixed_1" } });
    const r = await send([...MIN, "-t", "c@example.com", "--html", "x", "--json", "--idempotency-key", "k-json"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n")).toHaveLength(1);
    expect(stdoutJson(r)).toStrictEqual({
      ok: true,
      transport: "rest",
      message_id: "msg_fixed_1",
      recipients: ["b@example.com", "c@example.com"],
      idempotency_key: "k-json",
      attempts: 1,
      waited_ms: 0,
      status: 200,
    });
  });

  it("--quiet prints nothing on success", async () => {
    const r = await send([...MIN, "--html", "x", "--quiet"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe("");
    expect(rec.requests).toHaveLength(1);
  });

  it("--dry-run prints the request, key redacted, attachments shortened, and sends nothing", async () => {
    const bytes = randomBytes(5000);
    const big = tmp.file("big.bin", bytes);
    const r = await send([...MIN, "--html", "<p>x</p>", "-a", big, "--idempotency-key", "dry-1"]);
    expect(r.exitCode).toBe(0);
    rec.reset();
    const d = await send([...MIN, "--html", "<p>x</p>", "-a", big, "--idempotency-key", "dry-1", "--dry-run"]);
    expect(d.exitCode).toBe(0);
    expect(rec.connections).toBe(0);
    expect(rec.requests).toHaveLength(0);
    expect(d.stdout).toContain(`POST ${rec.url}/send`);
    expect(d.stdout).toContain("Authorization: Bearer [redacted]");
    expect(d.stdout).toContain("Idempotency-Key: dry-1");
    expect(d.stdout).toContain('"from":"a@example.com"');
    expect(d.stdout).toContain(
      `"content":"${bytes.subarray(0, 24).toString("base64")}...(base64 of 5000 bytes, 6668 characters)"`,
    );
    expect(d.stdout.length).toBeLessThan(2000);
    expect(d.stdout).not.toContain(KEY);
  });

  it("--dry-run --json is one parseable object", async () => {
    const d = await send([...MIN, "--html", "x", "--dry-run", "--json"]);
    expect(d.exitCode).toBe(0);
    expect(rec.connections).toBe(0);
    const o = stdoutJson(d);
    expect(o).toMatchObject({ dry_run: true, transport: "rest", method: "POST", url: `${rec.url}/send` });
    expect(o.headers.Authorization).toBe("Bearer [redacted]");
    expect(o.body).toStrictEqual({ from: "a@example.com", to: "b@example.com", subject: "Hi", html: "x" });
  });

  it("--dry-run needs no key", async () => {
    const d = await send([...MIN, "--html", "x", "--dry-run"], { env: { MAILSEND_API_KEY: undefined } });
    expect(d.exitCode).toBe(0);
    expect(rec.connections).toBe(0);
  });

  it("a 201 with success and message_id is a success too", async () => {
    rec.script({ status: 201, body: { success: true, message_id: "msg_201" } });
    const r = await send([...MIN, "--html", "x", "--json"]);
    expect(r.exitCode).toBe(0);
    expect(stdoutJson(r)).toMatchObject({ message_id: "msg_201", status: 201 });
  });
});

describe("HTTPS", () => {
  let srv: RestRecorder;
  let caPath: string;
  beforeAll(async () => {
    const tls = await tmp.tls();
    caPath = tls.caPath;
    srv = await startRestRecorder({ tls });
  });
  afterAll(async () => {
    await srv.close();
  });
  beforeEach(() => srv.reset());

  // NODE_EXTRA_CA_CERTS is read when Node starts: that case runs the CLI as a process.
  const sendTls = (args: string[], env: Record<string, string | undefined> = {}) =>
    (env.NODE_EXTRA_CA_CERTS ? runCli : runInProcess)(["send", ...MIN, "--html", "x", ...args], {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: srv.url, ...env },
    });

  it("--ca-file trusts the private CA", async () => {
    const r = await sendTls(["--ca-file", caPath]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(srv.requests).toHaveLength(1);
  });

  it("NODE_EXTRA_CA_CERTS works as well", async () => {
    const r = await sendTls([], { NODE_EXTRA_CA_CERTS: caPath });
    expect(r.exitCode).toBe(0);
    expect(srv.requests).toHaveLength(1);
  });

  it("an untrusted certificate is exit 78 with a hint, and nothing is sent", async () => {
    const r = await sendTls([]);
    expect(r.exitCode).toBe(78);
    expect(srv.requests).toHaveLength(0);
    expect(r.stderr).toMatch(/not trusted/);
    expect(r.stderr).toMatch(/hint:.*--ca-file/);
  });

  it("--insecure skips verification, with a loud warning", async () => {
    const r = await sendTls(["--insecure"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(/warning: --insecure/);
    expect(srv.requests).toHaveLength(1);
  });

  it("https:// against a plain-HTTP port is a TLS mismatch (78), not an OpenSSL message", async () => {
    const r = await sendTls(["--ca-file", caPath], { MAILSEND_BASE_URL: rec.url.replace("http:", "https:") });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/hint:/);
    expect(r.stderr).not.toMatch(/ssl3_|SSL routines|wrong version number/i);
    expect(rec.requests).toHaveLength(0);
  });

  it("http:// against a TLS port is a TLS mismatch (78), not 'may have been sent'", async () => {
    const r = await sendTls([], { MAILSEND_BASE_URL: srv.url.replace("https:", "http:") });
    expect(srv.requests).toHaveLength(0);
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toMatch(/speaks TLS/);
    expect(r.stderr).toMatch(/hint:.*https:\/\//);
    expect(r.stderr).not.toMatch(/may have been sent/);
  });
});
