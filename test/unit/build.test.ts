import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import type { Message } from "../../src/core/message.js";
import { sendRequestFields } from "../../src/core/request.js";
import type { TransportName } from "../../src/core/transport.js";
import { buildMessage, checkRestFit, type MessageFlags } from "../../src/message/build.js";
import { parseSendRequestFile } from "../../src/message/json.js";
import { scratch } from "../helpers/tmp.js";
import { failure } from "../helpers/failure.js";

const tmp = scratch();
afterAll(() => tmp.remove());

const BASE: MessageFlags = { from: "a@example.com", to: ["b@example.com"], subject: "Hi", html: "<p>Hi</p>" };

function io(text?: string | Buffer, isTTY = false) {
  const s = Readable.from(text === undefined ? [] : [Buffer.from(text)]) as Readable & { isTTY?: boolean };
  s.isTTY = isTTY;
  return s;
}

function build(
  flags: MessageFlags,
  opts: { transport?: TransportName; stdin?: string | Buffer; tty?: boolean; stdinTaken?: boolean } = {},
): Promise<Message> {
  return buildMessage(flags, {
    transport: opts.transport ?? "rest",
    stdin: io(opts.stdin, opts.tty ?? opts.stdin === undefined),
    stdinTaken: opts.stdinTaken ?? false,
  });
}

describe("flags -> Message", () => {
  it("builds the minimal message", async () => {
    const m = await build(BASE);
    expect(m).toMatchObject({
      from: { address: "a@example.com" },
      to: [{ address: "b@example.com" }],
      cc: [],
      bcc: [],
      subject: "Hi",
      html: "<p>Hi</p>",
      attachments: [],
      headers: [],
    });
    expect(m.text).toBeUndefined();
    expect(m.replyTo).toBeUndefined();
    expect(m.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("a new idempotency key per message, or the given one", async () => {
    const a = await build(BASE);
    const b = await build(BASE);
    expect(a.idempotencyKey).not.toBe(b.idempotencyKey);
    expect((await build({ ...BASE, idempotencyKey: "order-42" })).idempotencyKey).toBe("order-42");
    expect((await failure(build({ ...BASE, idempotencyKey: "has space" }))).exitCode).toBe(64);
    expect((await failure(build({ ...BASE, idempotencyKey: "" }))).exitCode).toBe(64);
  });

  it("--from 'Name <addr>' gives the name, --name overrides it", async () => {
    expect((await build({ ...BASE, from: "Alice <a@example.com>" })).from).toEqual({
      name: "Alice",
      address: "a@example.com",
    });
    expect((await build({ ...BASE, from: "Alice <a@example.com>", name: "Bob" })).from).toEqual({
      name: "Bob",
      address: "a@example.com",
    });
    expect((await build({ ...BASE, name: "Carol" })).from).toEqual({ name: "Carol", address: "a@example.com" });
  });

  it("--to repeated and comma-separated, with quoted names", async () => {
    const m = await build({ ...BASE, to: ['"Doe, John" <j@example.com>, k@example.com', "L <l@example.com>"] });
    expect(m.to).toEqual([
      { name: "Doe, John", address: "j@example.com" },
      { address: "k@example.com" },
      { name: "L", address: "l@example.com" },
    ]);
    expect(sendRequestFields(m).to).toBe('"Doe, John" <j@example.com>, k@example.com, L <l@example.com>');
  });

  it("reply-to, headers and text", async () => {
    const m = await build({
      ...BASE,
      replyTo: "Help <help@example.com>",
      header: ["X-Campaign: spring", "X-Trace:  t1 "],
      text: "plain",
    });
    expect(m.replyTo).toEqual({ name: "Help", address: "help@example.com" });
    expect(m.headers).toEqual([
      ["X-Campaign", "spring"],
      ["X-Trace", "t1"],
    ]);
    expect(m.text).toBe("plain");
  });

  it("bodies from files", async () => {
    const h = tmp.file("body.html", "<h1>Report</h1>");
    const t = tmp.file("body.txt", "line 1\nline 2");
    const m = await build({ ...BASE, html: undefined, htmlFile: h, textFile: t });
    expect(m.html).toBe("<h1>Report</h1>");
    expect(m.text).toBe("line 1\nline 2");
  });

  it("--html-file - reads stdin", async () => {
    const m = await build({ ...BASE, html: undefined, htmlFile: "-" }, { stdin: "<b>from stdin</b>" });
    expect(m.html).toBe("<b>from stdin</b>");
  });

  it("piped stdin is the HTML body when no body flag is given", async () => {
    const m = await build({ ...BASE, html: undefined }, { stdin: "<p>piped</p>" });
    expect(m.html).toBe("<p>piped</p>");
  });

  it("piped text is the text body, and the decision is reported; --stdin-type forces it", async () => {
    const seen: string[] = [];
    const m = await buildMessage(
      { ...BASE, html: undefined },
      { transport: "rest", stdin: io("<none>  <none>  1.2GB\n"), onStdinBody: (d) => seen.push(d.type) },
    );
    expect(m.text).toBe("<none>  <none>  1.2GB\n");
    expect(m.html).toBeUndefined();
    const forced = await buildMessage(
      { ...BASE, html: undefined, stdinType: "html" },
      { transport: "rest", stdin: io("plain"), onStdinBody: (d) => seen.push(d.reason) },
    );
    expect(forced.html).toBe("plain");
    expect(seen).toEqual(["text", "--stdin-type html"]);
  });

  it("a body flag with stdin free: onStdinUnused names the flag; not when stdin holds the key or a - input", async () => {
    const named: string[] = [];
    const opts = { transport: "rest" as const, stdin: io("x"), onStdinUnused: (f: string) => named.push(f) };
    await buildMessage({ ...BASE }, opts);
    await buildMessage({ ...BASE, html: undefined, textFile: tmp.file("t.txt", "t") }, opts);
    await buildMessage({ ...BASE }, { ...opts, stdinTaken: true });
    await buildMessage({ ...BASE, html: undefined, htmlFile: "-" }, opts);
    expect(named).toEqual(["--html", "--text-file"]);
  });

  it("stdin that is /dev/null (stdinIsNull): no onStdinUnused, and stdin itself is never looked at", async () => {
    const named: string[] = [];
    const opts = {
      transport: "rest" as const,
      get stdin(): Readable {
        throw new Error("stdin was made");
      },
      stdinIsNull: () => true,
      onStdinUnused: (f: string) => named.push(f),
    };
    const m = await buildMessage({ ...BASE }, opts);
    expect(m.html).toBe("<p>Hi</p>");
    await buildMessage({ ...BASE, html: undefined, text: "t" }, opts);
    expect(named).toEqual([]);
    // Not /dev/null: asked of stdin as before.
    await buildMessage(
      { ...BASE },
      { transport: "rest", stdin: io("x"), stdinIsNull: () => false, onStdinUnused: (f: string) => named.push(f) },
    );
    expect(named).toEqual(["--html"]);
  });

  it("stdin is not read when it is a terminal, or when it holds the key", async () => {
    expect((await failure(build({ ...BASE, html: undefined }, { tty: true }))).exitCode).toBe(64);
    const e = await failure(build({ ...BASE, html: undefined }, { stdin: "<p>the key, really</p>", stdinTaken: true }));
    expect(e.exitCode).toBe(64);
    expect(e.message).toMatch(/body/);
  });

  it("two inputs cannot both come from stdin", async () => {
    const e = await failure(build({ ...BASE, html: undefined, htmlFile: "-", textFile: "-" }, { stdin: "x" }));
    expect(e.exitCode).toBe(64);
    const k = await failure(build({ ...BASE, html: undefined, htmlFile: "-" }, { stdin: "x", stdinTaken: true }));
    expect(k.message).toMatch(/--api-key-stdin/);
  });

  it("a text-only message becomes escaped <pre> over REST", async () => {
    const m = await build({ ...BASE, html: undefined, text: `a < b & "c" > 'd'` });
    expect(sendRequestFields(m).html).toBe("<pre>a &lt; b &amp; &quot;c&quot; &gt; &#39;d&#39;</pre>");
  });

  it("a body that is not UTF-8 is refused, not mangled", async () => {
    const p = tmp.file("latin1.html", Buffer.from([0x3c, 0x70, 0x3e, 0xe9, 0x3c]));
    expect((await failure(build({ ...BASE, html: undefined, htmlFile: p }))).exitCode).toBe(65);
  });
});

describe("attachments", () => {
  it("takes the file name from the path, or renames with #", async () => {
    const p = tmp.file("report.pdf", Buffer.from([1, 2, 3]));
    const m = await build({ ...BASE, attach: [p, `${p}#Q3 results.pdf`] });
    expect(m.attachments).toEqual([
      { filename: "report.pdf", source: { kind: "file", path: p, size: 3 } },
      { filename: "Q3 results.pdf", source: { kind: "file", path: p, size: 3 } },
    ]);
  });

  it("a path that really contains # is attached as it is", async () => {
    const p = tmp.file("issue#12.txt", "x");
    const m = await build({ ...BASE, attach: [p] });
    expect(m.attachments[0]).toMatchObject({ filename: "issue#12.txt", source: { path: p } });
  });

  it("an existing file with a bad name after # -> 64 about the name, not 'not found'", async () => {
    const p = tmp.file("build.log", "x");
    for (const spec of [`${p}#sub/x.log`, `${p}#`]) {
      const e = await failure(build({ ...BASE, attach: [spec] }));
      expect(e.exitCode, spec).toBe(64);
      expect(e.message).toMatch(/after "#"/);
    }
  });

  it("missing file -> 66, directory -> 66", async () => {
    expect((await failure(build({ ...BASE, attach: [join(tmp.dir, "nope.pdf")] }))).exitCode).toBe(66);
    const d = join(tmp.dir, "a-dir");
    mkdirSync(d, { recursive: true });
    const e = await failure(build({ ...BASE, attach: [d] }));
    expect(e.exitCode).toBe(66);
    expect(e.message).toMatch(/directory/);
  });

  it("missing body file -> 66", async () => {
    expect((await failure(build({ ...BASE, html: undefined, htmlFile: join(tmp.dir, "nope.html") }))).exitCode).toBe(
      66,
    );
    expect((await failure(build({ ...BASE, html: undefined, htmlFile: tmp.dir }))).exitCode).toBe(66);
  });
});

describe("bad input", () => {
  it.each<[string, number, MessageFlags]>([
    ["missing --from", 64, { ...BASE, from: undefined }],
    ["missing --to", 64, { ...BASE, to: [] }],
    ["missing --subject", 64, { ...BASE, subject: undefined }],
    ["missing body", 64, { ...BASE, html: undefined }],
    ["empty subject", 64, { ...BASE, subject: "" }],
    ["empty --html", 64, { ...BASE, html: "" }],
    ["empty --text only", 64, { ...BASE, html: undefined, text: "" }],
    ["--html and --html-file", 64, { ...BASE, htmlFile: "x.html" }],
    ["invalid --from", 65, { ...BASE, from: "not an address" }],
    ["two --from addresses", 65, { ...BASE, from: "a@example.com, c@example.com" }],
    ["invalid --to", 65, { ...BASE, to: ["a@x.com <b@y.com>"] }],
    ["an unclosed group in --to", 65, { ...BASE, to: ["team: a@x.com"] }],
    ["a group in --from", 65, { ...BASE, from: "team: a@x.com;" }],
    ["CR LF in --to", 65, { ...BASE, to: ["b@example.com\r\nBcc: e@example.com"] }],
    ["invalid --reply-to", 65, { ...BASE, replyTo: "nope" }],
    ["CR LF in --subject", 65, { ...BASE, subject: "Hi\r\nBcc: e@example.com" }],
    ["LF in --name", 65, { ...BASE, name: "A\nB" }],
    ["CR LF in the --from display name", 65, { ...BASE, from: '"A\r\nBcc: e@example.com" <a@example.com>' }],
    ["an invalid header name", 65, { ...BASE, header: ["X Bad: 1"] }],
    ["a header colliding with From", 65, { ...BASE, header: ["From: e@example.com"] }],
    ["a header colliding with Subject", 65, { ...BASE, header: ["subject: x"] }],
    ["CR LF in a header value", 65, { ...BASE, header: ["X-A: 1\r\nBcc: e@example.com"] }],
    ["a header without a colon", 64, { ...BASE, header: ["X-A"] }],
    ["cc over REST", 64, { ...BASE, cc: ["c@example.com"] }],
    ["bcc over REST", 64, { ...BASE, bcc: ["c@example.com"] }],
    ["a repeated header over REST", 65, { ...BASE, header: ["X-A: 1", "X-A: 2"] }],
    ["--eml with message flags", 64, { eml: "m.eml", subject: "x" }],
  ])("%s -> %i", async (_why, exit, flags) => {
    expect((await failure(build(flags))).exitCode).toBe(exit);
  });

  it("cc/bcc are fine over SMTP", async () => {
    const m = await build(
      { ...BASE, cc: ["c@example.com"], bcc: ["d@example.com, e@example.com"] },
      { transport: "smtp" },
    );
    expect(m.cc).toEqual([{ address: "c@example.com" }]);
    expect(m.bcc).toEqual([{ address: "d@example.com" }, { address: "e@example.com" }]);
    expect(() => checkRestFit(m)).toThrow(/cc and bcc/);
  });

  it("a repeated header is fine over SMTP", async () => {
    const m = await build({ ...BASE, header: ["X-A: 1", "X-A: 2"] }, { transport: "smtp" });
    expect(m.headers).toEqual([
      ["X-A", "1"],
      ["X-A", "2"],
    ]);
  });
});

describe("--json-file", () => {
  const request = {
    from: "Sender <s@example.com>",
    to: "t1@example.com, T2 <t2@example.com>",
    subject: "From JSON",
    html: "<p>json</p>",
    reply_to: "r@example.com",
    headers: { "X-From-File": "1", "X-Both": "file" },
    attachments: [{ content: Buffer.from("hello").toString("base64"), filename: "hello.txt" }],
  };

  it("is the send request, with from's display name as name", async () => {
    const p = tmp.file("req.json", JSON.stringify(request));
    const m = await build({ jsonFile: p });
    expect(sendRequestFields(m)).toEqual({
      from: "s@example.com",
      to: "t1@example.com, T2 <t2@example.com>",
      subject: "From JSON",
      html: "<p>json</p>",
      name: "Sender",
      reply_to: "r@example.com",
      headers: { "X-From-File": "1", "X-Both": "file" },
    });
    expect(m.attachments).toEqual([{ filename: "hello.txt", source: { kind: "bytes", data: Buffer.from("hello") } }]);
  });

  it("flags override its fields, --attach adds to its attachments, --header overrides by name", async () => {
    const p = tmp.file("req2.json", JSON.stringify(request));
    const extra = tmp.file("extra.bin", Buffer.from([0, 255]));
    const m = await build({
      jsonFile: p,
      subject: "Overridden",
      to: ["o@example.com"],
      attach: [extra],
      header: ["x-both: flag"],
    });
    expect(m.subject).toBe("Overridden");
    expect(m.to).toEqual([{ address: "o@example.com" }]);
    expect(m.attachments.map((a) => a.filename)).toEqual(["hello.txt", "extra.bin"]);
    expect(m.headers).toEqual([
      ["X-From-File", "1"],
      ["x-both", "flag"],
    ]);
  });

  it("a --from flag with a display name overrides the file's name", async () => {
    const p = tmp.file("req3.json", JSON.stringify({ ...request, name: "File Name" }));
    expect((await build({ jsonFile: p })).from).toEqual({ name: "File Name", address: "s@example.com" });
    expect((await build({ jsonFile: p, from: "Flag Name <f@example.com>" })).from).toEqual({
      name: "Flag Name",
      address: "f@example.com",
    });
    expect((await build({ jsonFile: p, name: "Explicit" })).from).toEqual({
      name: "Explicit",
      address: "s@example.com",
    });
  });

  it("--json-file - reads stdin", async () => {
    const m = await build({ jsonFile: "-" }, { stdin: JSON.stringify(request) });
    expect(m.subject).toBe("From JSON");
  });

  it.each([
    ["not JSON", "{from:"],
    ["an array", "[]"],
    ["a string", '"x"'],
    ["an unknown field", JSON.stringify({ ...request, cc: "x@example.com" })],
    ["a null", JSON.stringify({ ...request, name: null })],
    ["a number subject", JSON.stringify({ ...request, subject: 5 })],
    ["a bad address", JSON.stringify({ ...request, to: "a@x.com <b@y.com>" })],
    [
      "attachment content that is not base64",
      JSON.stringify({ ...request, attachments: [{ content: "***", filename: "a" }] }),
    ],
    [
      "an attachment filename with a path",
      JSON.stringify({ ...request, attachments: [{ content: "", filename: "../etc/passwd" }] }),
    ],
    ["an attachment without filename", JSON.stringify({ ...request, attachments: [{ content: "" }] })],
    [
      "an extra attachment field",
      JSON.stringify({ ...request, attachments: [{ content: "", filename: "a", type: "text/plain" }] }),
    ],
    ["a reserved header", JSON.stringify({ ...request, headers: { Bcc: "x@example.com" } })],
    ["a header with CR LF", JSON.stringify({ ...request, headers: { "X-A": "1\r\nBcc: x@example.com" } })],
    ["a subject with CR LF", JSON.stringify({ ...request, subject: "a\r\nBcc: x@example.com" })],
  ])("%s -> 65", async (_why, text) => {
    const p = tmp.file(`bad-${Math.random().toString(36).slice(2)}.json`, text);
    expect((await failure(build({ jsonFile: p }))).exitCode).toBe(65);
  });

  it("an X-Idempotency-Key header in the file is refused (use --idempotency-key)", async () => {
    const p = tmp.file("idem.json", JSON.stringify({ ...request, headers: { "X-Idempotency-Key": "k" } }));
    const e = await failure(build({ jsonFile: p }));
    expect(e.exitCode).toBe(64);
    expect(e.hint).toMatch(/--idempotency-key/);
  });

  it("parseSendRequestFile names the source and the field", () => {
    expect(() => parseSendRequestFile(Buffer.from('{"subject":1}'), "req.json")).toThrow(/req\.json: subject/);
    expect(() => parseSendRequestFile(Buffer.from("{"), "req.json")).toThrow(/req\.json: not valid JSON/);
  });
});

describe("checkRestFit", () => {
  const plain: Message = {
    from: { address: "a@example.com" },
    to: [{ address: "b@example.com" }],
    cc: [],
    bcc: [],
    subject: "s",
    html: "h",
    attachments: [],
    headers: [],
    idempotencyKey: "k",
  };

  it("passes a plain message and refuses what REST cannot carry", () => {
    expect(() => checkRestFit(plain)).not.toThrow();
    expect(() => checkRestFit({ ...plain, cc: [{ address: "c@example.com" }] })).toThrow(MailsendError);
    expect(() => checkRestFit({ ...plain, html: undefined })).toThrow(/no body/);
    expect(() =>
      checkRestFit({
        ...plain,
        headers: [
          ["X-A", "1"],
          ["x-a", "2"],
        ],
      }),
    ).toThrow(/more than once/);
  });
});
