/**
 * HTML reports as they were written, the built CLI against the
 * sandbox and a real smtp-server: local images become inline parts with
 * matching cids (each file once), remote and data: references stay as they
 * are, references that lead out of the base directory are refused before
 * anything is sent, and over SMTP an HTML-only message gets a text part.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { mimeTree, type MimePart } from "../../src/compose/tree.js";
import { runCli, runInProcess, stderrJson, stdoutJson } from "../helpers/cli.js";
import { inProcessSandbox, parseEml, type TestSandbox } from "../helpers/sandbox.js";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { lacks, pythonCoverage } from "../helpers/tools.js";

const KEY = "msk_test_e2e_compose_Zp4Lq9";
let t: TestSandbox;
let sink: SmtpSink;
let reportDir: string;
let report: string;

/** A real PNG of w x h pixels of one colour. */
function png(w: number, h: number, rgb: [number, number, number]): Buffer {
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(w * 3).fill(Buffer.from(rgb))]);
  const raw = Buffer.concat(Array.from({ length: h }, () => row));
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** Enough of a JPEG for a byte sniffer: SOI, an APP0 JFIF segment, EOI. */
const JPEG = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
  Buffer.from("JFIF\0", "latin1"),
  Buffer.alloc(9),
  Buffer.from([0xff, 0xd9]),
]);

const REMOTE = "https://img.example.com/logo.png";
const DATA_URI = "data:image/gif;base64,R0lGODlhAQABAAAAACw=";

const REPORT_HTML = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Nightly</title>
<style>h1 { color: #b00; } td.num { text-align: right; }</style></head>
<body>
<h1>Nightly test report</h1>
<p>Run <a href="https://ci.example.com/runs/42">#42</a> on main finished.</p>
<table>
  <tr><th>Suite</th><th>Passed</th><th>Failed</th></tr>
  <tr><td>unit</td><td class="num">1204</td><td class="num">0</td></tr>
  <tr><td>e2e</td><td class="num">87</td><td class="num">2</td></tr>
</table>
<p><img src="charts/trend.png" alt="pass rate trend"> <img src='charts/dur%61tion.png' alt="durations"></p>
<p><img src="team.jpg" alt="the team"></p>
<div style="background-image: url('team.jpg'); height: 20px">&nbsp;</div>
<p><img src="${REMOTE}" alt="logo"> <img src="${DATA_URI}" alt="dot"></p>
<!-- <img src="../secret.png"> in a comment is no reference -->
</body></html>
`;

beforeAll(async () => {
  t = await inProcessSandbox();
  const tls = await t.scratch.tls();
  sink = await startSmtpSink({ mode: "starttls", tls, key: KEY });
  reportDir = join(t.scratch.dir, "report");
  mkdirSync(join(reportDir, "charts"), { recursive: true });
  writeFileSync(join(reportDir, "charts", "trend.png"), png(16, 8, [200, 30, 30]));
  writeFileSync(join(reportDir, "charts", "duration.png"), png(8, 16, [30, 200, 30]));
  writeFileSync(join(reportDir, "team.jpg"), JPEG);
  writeFileSync(join(t.scratch.dir, "secret.png"), png(2, 2, [1, 2, 3]));
  symlinkSync(join(t.scratch.dir, "secret.png"), join(reportDir, "link-out.png"));
  report = join(reportDir, "index.html");
  writeFileSync(report, REPORT_HTML);
});

afterAll(async () => {
  await sink?.close();
  await t?.stop();
  t?.scratch.remove();
});

beforeEach(() => sink.reset());

const MSG = ["-f", "Reports <ci@example.com>", "-t", "dev@example.com", "-s", "Nightly report"];

function viaSink(args: string[]) {
  return runInProcess(
    [
      "send",
      "--transport",
      "smtp",
      "--smtp-host",
      "127.0.0.1",
      "--smtp-port",
      String(sink.port),
      "--ca-file",
      join(t.scratch.dir, "tls", "ca.pem"),
      ...args,
    ],
    { env: { MAILSEND_API_KEY: KEY } },
  );
}

function leaves(n: MimePart): MimePart[] {
  return n.parts ? n.parts.flatMap(leaves) : [n];
}

/** The checks of an embedded report on one received message. */
async function checkReport(raw: Buffer) {
  const tree = mimeTree(raw);
  // multipart/alternative: text/plain, then multipart/related (the HTML and its images).
  expect(tree.type).toBe("multipart/alternative");
  expect(tree.parts!.map((p) => p.type)).toEqual(["text/plain", "multipart/related"]);
  const related = tree.parts![1]!;
  expect(related.parts!.map((p) => p.type)).toEqual(["text/html", "image/png", "image/png", "image/jpeg"]);
  const inline = leaves(tree).filter((p) => p.cid !== undefined);
  expect(inline).toHaveLength(3);
  expect(inline.every((p) => p.disposition === "inline")).toBe(true);

  const email = await parseEml(raw);
  const parts = email.attachments.filter((a) => a.related);
  expect(parts).toHaveLength(3);
  expect(parts.map((a) => a.mimeType).sort()).toEqual(["image/jpeg", "image/png", "image/png"]);
  const cids = new Set(parts.map((a) => a.contentId!.replace(/^<|>$/g, "")));
  const html = email.html!;
  const used = [...html.matchAll(/cid:([^"')\s]+)/g)].map((m) => m[1]!);
  // Every cid: of the HTML resolves to a part, and every part is used (the JPEG twice).
  expect(used).toHaveLength(4);
  for (const c of used) expect(cids.has(c), `cid:${c}`).toBe(true);
  expect(new Set(used)).toEqual(cids);
  const jpegCid = parts.find((a) => a.mimeType === "image/jpeg")!.contentId!.replace(/^<|>$/g, "");
  expect(html).toContain(`src="cid:${jpegCid}"`);
  expect(html).toContain(`url(cid:${jpegCid})`);
  // The bytes are the files' bytes.
  expect(Buffer.from(parts.find((a) => a.mimeType === "image/jpeg")!.content as ArrayBuffer).equals(JPEG)).toBe(true);
  // Remote and data: references as written; the comment untouched; the rest of the HTML as written.
  expect(html).toContain(`<img src="${REMOTE}" alt="logo">`);
  expect(html).toContain(`<img src="${DATA_URI}" alt="dot">`);
  expect(html).toContain('<!-- <img src="../secret.png"> in a comment is no reference -->');
  expect(html).toContain('<tr><td>unit</td><td class="num">1204</td><td class="num">0</td></tr>');
  expect(html).not.toMatch(/src=["']?(charts|team)/);

  // The generated text part reads as the report does.
  const text = email.text!;
  expect(text).toContain("Nightly test report");
  expect(text).toContain("Run #42 [https://ci.example.com/runs/42] on main finished.");
  expect(text).toMatch(/Suite\s+Passed\s+Failed\n/);
  expect(text).toMatch(/unit\s+1204\s+0\n/);
  expect(text).toMatch(/e2e\s+87\s+2\n/);
  expect(text).toContain("pass rate trend");
  expect(text).not.toContain("cid:");
  expect(text).not.toContain("<");
}

describe("an HTML report with local images", () => {
  it("over a real smtp-server: three inline parts, each cid resolves, remote and data: untouched, a text part", async () => {
    const r = await viaSink([...MSG, "--html-file", report, "--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(sink.messages).toHaveLength(1);
    await checkReport(sink.messages[0]!.raw);
  });

  it("--transport auto against the sandbox: SMTP because of the inline images, said in --json and -v; stored as built", async () => {
    const before = t.sb.store.count;
    const r = await runInProcess(["send", "--transport", "auto", ...MSG, "--html-file", report, "--json"], {
      env: t.env,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const out = stdoutJson(r);
    expect(out.transport).toBe("smtp");
    expect(out.reason).toBe("inline images");
    expect(t.sb.store.count).toBe(before + 1);
    const m = (await t.sb.store.list({ limit: 1 }))[0]!;
    expect(m.channel).toBe("smtp");
    await checkReport((await t.sb.store.raw(m.id))!);

    const v = await runInProcess(["send", "--transport", "auto", ...MSG, "--html-file", report, "-v"], { env: t.env });
    expect(v.exitCode, v.stderr).toBe(0);
    expect(v.stderr).toContain("--transport auto: smtp (inline images)");
    expect(v.stderr).toMatch(/inline image charts\/trend\.png -> cid:trend\.png\.[0-9a-f]{12}@mailsend/);
  });

  it("--transport auto sends plain HTML (no local images) over REST, and says why", async () => {
    const r = await runInProcess(
      ["send", "--transport", "auto", ...MSG, "--html", `<p>hi <img src="${REMOTE}"></p>`, "--json"],
      { env: t.env },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(stdoutJson(r)).toMatchObject({ transport: "rest", reason: "REST carries the whole message" });
    expect((await t.sb.store.list({ limit: 1 }))[0]!.channel).toBe("rest");
  });

  it("--transport auto with only REST configured fails clearly when REST would lose the images; nothing sent", async () => {
    const before = t.sb.store.count;
    const env = { ...t.env, MAILSEND_SMTP_HOST: undefined } as unknown as Record<string, string>;
    const r = await runInProcess(["send", "--transport", "auto", ...MSG, "--html-file", report, "--json"], { env });
    expect(r.exitCode).toBe(78);
    expect(stderrJson(r).error.message).toContain("inline images");
    expect(stderrJson(r).error.hint).toContain("--no-embed");
    expect(t.sb.store.count).toBe(before);
  });

  it("--transport rest: a clear error that says to use SMTP or --no-embed; nothing sent", async () => {
    const before = t.sb.store.count;
    const r = await runInProcess(["send", "--transport", "rest", ...MSG, "--html-file", report], { env: t.env });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toContain("3 inline images");
    expect(r.stderr).toContain("--transport smtp");
    expect(r.stderr).toContain("--no-embed");
    expect(t.sb.store.count).toBe(before);
  });

  it("--no-embed sends the references as written (over REST too)", async () => {
    const r = await runInProcess(
      ["send", "--transport", "rest", ...MSG, "--html-file", report, "--no-embed", "--json"],
      { env: t.env },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const m = (await t.sb.store.list({ limit: 1 }))[0]!;
    const email = await parseEml((await t.sb.store.raw(m.id))!);
    expect(email.html).toContain('<img src="charts/trend.png" alt="pass rate trend">');
    expect(email.attachments).toHaveLength(0);
  });

  it("--dry-run shows the MIME tree and the rewritten references, and sends nothing", async () => {
    const r = await viaSink([...MSG, "--html-file", report, "--dry-run"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(sink.connections).toBe(0);
    expect(r.stdout).toMatch(
      /^# inline image charts\/trend\.png -> cid:trend\.png\.[0-9a-f]{12}@mailsend \(.*trend\.png, image\/png, \d+ B\)$/m,
    );
    expect(r.stdout).toMatch(/^# inline image team\.jpg -> cid:team\.jpg\.[0-9a-f]{12}@mailsend/m);
    expect(r.stdout.match(/^# inline image /gm)).toHaveLength(3);
    expect(r.stdout).toContain("# MIME tree:\n#   multipart/alternative\n#     text/plain  ");
    expect(r.stdout).toMatch(
      /^# {7}image\/jpeg {2}\d+ B {2}cid:team\.jpg\.[0-9a-f]{12}@mailsend {2}inline team\.jpg$/m,
    );

    const j = await viaSink([...MSG, "--html-file", report, "--dry-run", "--json"]);
    expect(j.exitCode, j.stderr).toBe(0);
    const out = stdoutJson(j);
    expect(out.mime_tree.type).toBe("multipart/alternative");
    expect(out.inline_images.map((i: { ref: string }) => i.ref)).toEqual([
      "charts/trend.png",
      "charts/dur%61tion.png",
      "team.jpg",
    ]);
    expect(out.inline_images[2]).toMatchObject({ type: "image/jpeg", size: JPEG.length });
  });

  it("--inline adds a part for HTML that already says cid:", async () => {
    const logo = join(reportDir, "charts", "trend.png");
    const r = await viaSink([...MSG, "--html", '<p><img src="cid:logo"></p>', "--inline", `${logo}#logo`]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    expect(email.attachments.map((a) => [a.contentId, a.mimeType, a.related])).toEqual([["<logo>", "image/png", true]]);
  });

  it("a mistyped --inline name is said both ways (a part no <img> shows, a cid: no part has); the message still goes", async () => {
    const logo = join(reportDir, "charts", "trend.png");
    const r = await viaSink([...MSG, "--html", '<p><img src="cid:logo"></p>', "--inline", `${logo}#lgo`]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `--inline ${logo}#lgo: the HTML has no <img src="cid:lgo">, so no image shows this part`,
    );
    expect(r.stderr).toContain(
      "the HTML refers to cid:logo, which no part of this message has: it shows as a broken image",
    );
    expect(sink.messages).toHaveLength(1);
    const ok = await viaSink([...MSG, "--html", '<p><img src="cid:logo"></p>', "--inline", `${logo}#logo`]);
    expect(ok.stderr).not.toContain("cid:");
  });

  it("a file whose name has %, # or ?: its Content-ID has none, so the cid: URL (which a client %-decodes, and cuts at #) finds the part", async () => {
    const dir = join(reportDir, "odd names");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "50%.png"), png(2, 2, [1, 2, 3]));
    writeFileSync(join(dir, "run#4?.png"), png(2, 2, [4, 5, 6]));
    writeFileSync(join(dir, "odd.html"), '<p><img src="50%25.png"><img src="run%234%3F.png"></p>');
    const r = await viaSink([...MSG, "--html-file", join(dir, "odd.html")]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    const email = await parseEml(sink.messages[0]!.raw);
    const srcs = [...email.html!.matchAll(/src="cid:([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs).toHaveLength(2);
    // As a client reads each src (RFC 2392: %-decoded, up to a #), it is a part's Content-ID.
    const ids = email.attachments.map((a) => a.contentId!.replace(/^<|>$/g, ""));
    for (const src of srcs) expect(ids).toContain(decodeURIComponent(src.split("#")[0]!));
  });

  it("--inline-css keeps what it cannot put on an element (@supports, @layer, @container, @page, ::before rules) in a <style> block, as written", async () => {
    const kept =
      '@supports (display: grid) { .grid { display: grid; } }\n@layer base { .failed { color: #c21f39; } }\n@container (min-width: 400px) { .wide { color: green; } }\n@page { margin: 1cm; }\n.failed::before { content: "\\2717  "; }';
    const html = `<html><head><style>\n${kept}\n.num { text-align: right; }\n</style></head><body><p class="failed grid wide num">1 failed</p></body></html>`;
    const r = await viaSink([...MSG, "--html", html, "--inline-css"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const out = (await parseEml(sink.messages[0]!.raw)).html!;
    expect(out).toMatch(/<p class="failed grid wide num" style="text-align: right;?">/);
    expect(out).toContain(`<style>\n${kept}\n</style>`);
  });

  it("--inline-css puts the <style> rules on the elements", async () => {
    const r = await viaSink([...MSG, "--html-file", report, "--inline-css"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    expect(email.html).toMatch(/<h1 style="color: #b00;?">Nightly test report<\/h1>/);
    expect(email.html).toMatch(/<td class="num" style="text-align: right;?"[^>]*>1204<\/td>/);
  });
});

describe.skipIf(lacks(pythonCoverage))("a real-world report: coverage.py's HTML", () => {
  it("its image goes inline and its text part reads as the report does (heading, table, links)", async () => {
    const tool = pythonCoverage.path!;
    const cov = join(t.scratch.dir, "cov");
    mkdirSync(cov, { recursive: true });
    writeFileSync(join(cov, "m.py"), "def f(x):\n    return x + 1\nprint(f(1))\n");
    execFileSync(tool, ["run", "--data-file", join(cov, ".coverage"), "m.py"], { cwd: cov, stdio: "ignore" });
    execFileSync(tool, ["html", "--data-file", join(cov, ".coverage"), "-d", join(cov, "html")], {
      cwd: cov,
      stdio: "ignore",
    });
    const index = join(cov, "html", "index.html");
    expect(existsSync(index)).toBe(true);

    const r = await viaSink([...MSG, "--html-file", index]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    const inline = email.attachments.filter((a) => a.related);
    expect(inline.length).toBeGreaterThanOrEqual(1);
    for (const a of inline) expect(email.html).toContain(`cid:${a.contentId!.replace(/^<|>$/g, "")}`);
    const text = email.text!;
    expect(text).toMatch(/^Coverage report: 100%$/m);
    expect(text).toMatch(/^Module\s+statements\s+missing\s+excluded\s+coverage$/m);
    expect(text).toMatch(/^m\.py \[m_py\.html\]\s+3\s+0\s+0\s+100%$/m);
    expect(text).toMatch(/coverage\.py v[\d.]+ \[https:\/\/coverage\.readthedocs\.io\]/);
    expect(text).not.toContain("<");
    // The page's hidden prev/next links (<a href="m_py.html"/>, no text) say nothing: not "m_py.htmlm_py.html".
    expect(text).not.toMatch(/^\S*\.html\S*$/m);
  });
});

describe("--transport auto with an .eml", () => {
  const eml = (body: string[]) =>
    ["From: ci@example.com", "To: dev@example.com", "Subject: from a file", "MIME-Version: 1.0", ...body].join("\r\n");

  it("a message with a related image goes over SMTP as it is; an HTML-only one over REST", async () => {
    const related = join(t.scratch.dir, "related.eml");
    writeFileSync(
      related,
      eml([
        'Content-Type: multipart/related; boundary="R"',
        "",
        "--R",
        "Content-Type: text/html",
        "",
        '<p><img src="cid:chart@x"></p>',
        "--R",
        "Content-Type: image/png",
        "Content-ID: <chart@x>",
        "Content-Disposition: inline",
        "Content-Transfer-Encoding: base64",
        "",
        png(2, 2, [9, 9, 9]).toString("base64"),
        "--R--",
        "",
      ]),
    );
    const r = await runInProcess(["send", "--transport", "auto", "--eml", related, "--json"], { env: t.env });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(stdoutJson(r)).toMatchObject({ transport: "smtp", reason: "inline images" });
    const m = (await t.sb.store.list({ limit: 1 }))[0]!;
    const email = await parseEml((await t.sb.store.raw(m.id))!);
    expect(email.attachments.map((a) => [a.contentId, a.related])).toEqual([["<chart@x>", true]]);

    const plain = join(t.scratch.dir, "plain.eml");
    writeFileSync(plain, eml(["Content-Type: text/html", "", "<p>just html</p>", ""]));
    const p = await runInProcess(["send", "--transport", "auto", "--eml", plain, "--json"], { env: t.env });
    expect(p.exitCode, p.stderr).toBe(0);
    expect(stdoutJson(p)).toMatchObject({ transport: "rest", reason: "REST carries the whole message" });
  });
});

describe("references that must not be embedded", () => {
  const attempts: Array<[string, string]> = [
    ["../secret.png", "outside the base directory"],
    ["..%2fsecret.png", "outside the base directory"],
    ["charts/..%2F..%2F..%2Fsecret.png", "outside the base directory"],
    ["/etc/passwd", "outside the base directory"],
    ["file:///etc/passwd", "outside the base directory"],
    ["link-out.png", "symlink that leads outside"],
  ];
  for (const [ref, why] of attempts) {
    it(`${ref}: refused (65), nothing sent`, async () => {
      const html = join(reportDir, `attempt-${attempts.findIndex((a) => a[0] === ref)}.html`);
      writeFileSync(html, `<p>x</p><img src="${ref}">`);
      const r = await viaSink([...MSG, "--html-file", html, "--json"]);
      expect(r.exitCode).toBe(65);
      const e = stderrJson(r).error;
      expect(e.message).toContain(JSON.stringify(ref));
      expect(e.message).toContain(why);
      expect(e.message).toContain("nothing was sent");
      expect(sink.connections).toBe(0);
      expect(sink.messages).toHaveLength(0);
    });
  }

  it("a file that is not an image (by its bytes, whatever its name) is refused", async () => {
    writeFileSync(join(reportDir, "notes.png"), "just text\n");
    const html = join(reportDir, "not-image.html");
    writeFileSync(html, '<img src="notes.png">');
    const r = await viaSink([...MSG, "--html-file", html]);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toContain('image reference "notes.png" is text, not an image');
    expect(sink.connections).toBe(0);
  });

  it("a missing file is 66, naming the reference and the path tried", async () => {
    const html = join(reportDir, "missing.html");
    writeFileSync(html, '<img src="charts/gone.png">');
    const r = await viaSink([...MSG, "--html-file", html]);
    expect(r.exitCode).toBe(66);
    expect(r.stderr).toContain(
      `image "charts/gone.png" not found: looked for ${join(reportDir, "charts", "gone.png")}`,
    );
    expect(sink.connections).toBe(0);
  });

  it("<base href>: a web address makes relative references addresses there (left as written); a relative one moves where they resolve", async () => {
    // A report published to a server: its images are there, not beside the file (a browser fetches them from the base).
    const web = join(reportDir, "web.html");
    writeFileSync(
      web,
      '<!doctype html><html><head><base href="https://ci.example.com/runs/42/"><link rel="stylesheet" href="report.css"></head><body><img src="chart.png" alt="c"><img src="/logo.png"><div style="background: url(bg.png)">x</div><img src="file://' +
        join(reportDir, "team.jpg") +
        '"></body></html>',
    );
    const r = await viaSink([...MSG, "--html-file", web]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).not.toContain("warning");
    const email = await parseEml(sink.messages[0]!.raw);
    expect(email.html).toContain(
      '<link rel="stylesheet" href="report.css"></head><body><img src="chart.png" alt="c"><img src="/logo.png"><div style="background: url(bg.png)">',
    );
    // A file: URL names a file whatever the base says.
    expect(email.attachments.filter((a) => a.related).map((a) => a.mimeType)).toEqual(["image/jpeg"]);

    const rel = join(reportDir, "rel.html");
    writeFileSync(
      rel,
      '<!doctype html><html><head><base href="charts/"></head><body><img src="trend.png"><img src="../team.jpg"></body></html>',
    );
    const ok = await viaSink([...MSG, "--html-file", rel]);
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(
      (await parseEml(sink.messages[1]!.raw)).attachments
        .filter((a) => a.related)
        .map((a) => a.mimeType)
        .sort(),
    ).toEqual(["image/jpeg", "image/png"]);
  });

  it("--base-dir that covers the file allows it", async () => {
    const html = join(reportDir, "parent.html");
    writeFileSync(html, '<img src="../secret.png">');
    const r = await viaSink([...MSG, "--html-file", html, "--base-dir", t.scratch.dir]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    expect(email.attachments.filter((a) => a.related)).toHaveLength(1);
  });

  it("HTML on stdin resolves against the current directory", async () => {
    const r = await runCli(
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(sink.port),
        "--ca-file",
        join(t.scratch.dir, "tls", "ca.pem"),
        ...MSG,
        "--html-file",
        "-",
      ],
      {
        env: { MAILSEND_API_KEY: KEY },
        cwd: join(reportDir, "charts"),
        input: '<p><img src="trend.png"></p><img src="../team.jpg">',
      },
    );
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toContain('"../team.jpg" resolves to');
    expect(sink.connections).toBe(0);

    // --base-dir: stdin HTML's references resolve against it.
    const ok = await runCli(
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(sink.port),
        "--ca-file",
        join(t.scratch.dir, "tls", "ca.pem"),
        ...MSG,
        "--html-file",
        "-",
        "--base-dir",
        reportDir,
      ],
      {
        env: { MAILSEND_API_KEY: KEY },
        cwd: t.scratch.dir,
        input: '<p><img src="charts/trend.png"></p><img src="team.jpg">',
      },
    );
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect((await parseEml(sink.messages[0]!.raw)).attachments.filter((a) => a.related)).toHaveLength(2);
  });
});

describe("a report's own stylesheets (<link rel=stylesheet>)", () => {
  let dir: string;
  beforeAll(() => {
    dir = join(t.scratch.dir, "styled");
    mkdirSync(join(dir, "css"), { recursive: true });
    writeFileSync(join(dir, "css", "base.css"), ".low { color: #c21f39; background-image: url(low.png); }\n");
    writeFileSync(join(dir, "css", "low.png"), png(2, 2, [255, 0, 0]));
    writeFileSync(join(dir, "print.css"), ".nav { display: none; }\n");
    writeFileSync(
      join(dir, "index.html"),
      `<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="css/base.css" />
<link rel="stylesheet" href="print.css" media="print">
<link rel="stylesheet" href="https://cdn.example.com/theme.css">
<link rel="icon" href="favicon.ico">
</head><body><p class="low">Coverage 42%</p></body></html>`,
    );
  });

  it("a local sheet arrives as a <style> block, its url()s from the HTML's directory; remote ones stay links", async () => {
    const r = await viaSink([...MSG, "--html-file", join(dir, "index.html"), "-v"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(`* stylesheet css/base.css -> <style> (${join(dir, "css", "base.css")})`);
    expect(r.stderr).toContain(
      "* stylesheet https://cdn.example.com/theme.css left as a link: mail clients do not load linked stylesheets",
    );
    const html = (await parseEml(sink.messages[0]!.raw)).html!;
    expect(html).toContain('<style>\n.low { color: #c21f39; background-image: url("css/low.png"); }\n</style>');
    expect(html).toContain('<style media="print">\n.nav { display: none; }\n</style>');
    expect(html).toContain('<link rel="stylesheet" href="https://cdn.example.com/theme.css">');
    expect(html).toContain('<link rel="icon" href="favicon.ico">');
    expect(html).not.toContain('href="css/base.css"');
  });

  it("with --inline-css the sheet's rules reach the elements, and the image its url() meant goes inline", async () => {
    const r = await viaSink([...MSG, "--html-file", join(dir, "index.html"), "--inline-css"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    const part = email.attachments.find((a) => a.related)!;
    const cid = part.contentId!.replace(/^<|>$/g, "");
    expect(email.html).toMatch(
      new RegExp(
        `<p class="low" style="color: #c21f39; background-image: url\\(["']?cid:${cid.replace(/[.]/g, "\\.")}["']?\\);?">`,
      ),
    );
  });

  it("with --inline-css a sheet for print stays a print block: its rules are not put on the elements (the menu it hides stays on screen)", async () => {
    writeFileSync(
      join(dir, "menu.html"),
      '<!doctype html><html><head><link rel="stylesheet" href="print.css" media="print"><style>.nav { color: navy; }</style></head><body><p class="nav">menu</p></body></html>',
    );
    const r = await viaSink([...MSG, "--html-file", join(dir, "menu.html"), "--inline-css"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const html = (await parseEml(sink.messages[0]!.raw)).html!;
    expect(html).toMatch(/<p class="nav" style="color: navy;?">menu<\/p>/);
    expect(html).toContain('<style media="print">\n.nav { display: none; }\n</style>');
  });

  it("--no-embed leaves the links as written; --dry-run names each sheet", async () => {
    const r = await viaSink([...MSG, "--html-file", join(dir, "index.html"), "--no-embed"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect((await parseEml(sink.messages[0]!.raw)).html).toContain('<link rel="stylesheet" href="css/base.css" />');
    const d = await viaSink([...MSG, "--html-file", join(dir, "index.html"), "--dry-run"]);
    expect(d.stdout).toMatch(/^# stylesheet css\/base\.css -> <style> \(.*base\.css, \d+ B\)$/m);
  });

  it("a sheet's @import of a local sheet (and a <style> block's) arrives in place, under its conditions; --inline-css applies its rules", async () => {
    // As test reports write them: the main sheet imports the others, by url() or by string, some for one medium only.
    mkdirSync(join(dir, "imp", "theme"), { recursive: true });
    writeFileSync(
      join(dir, "imp", "main.css"),
      '@charset "utf-8";\n/* parts */\n@import url("theme/colours.css");\n@import \'narrow.css\' screen and (max-width: 600px);\n@import url(https://cdn.example.com/fonts.css);\n.main { margin: 0; }\n',
    );
    writeFileSync(
      join(dir, "imp", "theme", "colours.css"),
      '@import "../main.css";\n.failed { color: #c21f39; background-image: url(bad.png); }\n',
    );
    writeFileSync(join(dir, "imp", "theme", "bad.png"), png(2, 2, [200, 0, 0]));
    writeFileSync(join(dir, "imp", "narrow.css"), "table { width: 100%; }\n");
    writeFileSync(join(dir, "imp", "own.css"), ".own { font-weight: bold; }\n");
    writeFileSync(
      join(dir, "imp", "report.html"),
      '<!doctype html><html><head><link rel="stylesheet" href="main.css">\n<style>@import "own.css"; p { color: navy; }</style></head>\n<body><p class="failed own">1 failed</p><table class="main"><tr><td>x</td></tr></table></body></html>',
    );
    const r = await viaSink([...MSG, "--html-file", join(dir, "imp", "report.html"), "-v"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `* stylesheet theme/colours.css (@import in main.css) -> <style> (${join(dir, "imp", "theme", "colours.css")})`,
    );
    // Inlined, the sheets are not files the mail names (the image their rule shows still is, said as above).
    expect(r.stderr).not.toMatch(/url\([^)]*\.css\) in a <style> block/);
    expect(r.stderr).toContain("url(theme/bad.png) in a <style> block names a file on this machine");
    const html = (await parseEml(sink.messages[0]!.raw)).html!;
    // The remote import stays, at the head where it counts; the import that loops back is skipped, as browsers do.
    expect(html.replace(/\s+/g, " ")).toContain(
      '<style> @import url(https://cdn.example.com/fonts.css); /* parts */ .failed { color: #c21f39; background-image: url("theme/bad.png"); } @media screen and (max-width: 600px) { table { width: 100%; } } .main { margin: 0; } </style>',
    );
    expect(html).toContain("<style>.own { font-weight: bold; }\n p { color: navy; }</style>");
    expect(html).not.toMatch(/@import[^;]*(colours|narrow|own|main)\.css/);

    const inlined = await viaSink([...MSG, "--html-file", join(dir, "imp", "report.html"), "--inline-css"]);
    expect(inlined.exitCode, inlined.stderr).toBe(0);
    const email = await parseEml(sink.messages.at(-1)!.raw);
    const cid = email.attachments.find((a) => a.related)!.contentId!.replace(/^<|>$/g, "");
    expect(email.html).toMatch(/<p class="failed own" style="[^"]*color: #c21f39;[^"]*font-weight: bold;[^"]*">/);
    expect(email.html).toContain(`cid:${cid}`);
    expect(email.html).toContain("@media screen and (max-width: 600px)");

    // An @import that leads out of the base directory is refused as a linked sheet is.
    writeFileSync(join(dir, "imp", "out.html"), '<style>@import "../../outside.css";</style><p>x</p>');
    const out = await viaSink([...MSG, "--html-file", join(dir, "imp", "out.html")]);
    expect(out.exitCode).toBe(65);
    expect(out.stderr).toContain('stylesheet reference "../../outside.css" resolves to');
  });

  it("a sheet outside the base directory is refused (65), a missing one is 66; nothing sent", async () => {
    writeFileSync(join(t.scratch.dir, "outside.css"), "body { color: red }\n");
    writeFileSync(join(dir, "out.html"), '<link rel="stylesheet" href="../outside.css"><p>x</p>');
    const out = await viaSink([...MSG, "--html-file", join(dir, "out.html")]);
    expect(out.exitCode).toBe(65);
    expect(out.stderr).toContain('stylesheet reference "../outside.css" resolves to');
    writeFileSync(join(dir, "gone.html"), '<link rel="stylesheet" href="gone.css"><p>x</p>');
    const gone = await viaSink([...MSG, "--html-file", join(dir, "gone.html")]);
    expect(gone.exitCode).toBe(66);
    expect(gone.stderr).toContain(`stylesheet "gone.css" not found: looked for ${join(dir, "gone.css")}`);
    expect(sink.connections).toBe(0);
  });
});

describe("HTML in a legacy charset it declares", () => {
  it("is read by its <meta charset> (file or stdin) and sent as UTF-8, the declaration saying so; undeclared non-UTF-8 is still refused", async () => {
    const dir = join(t.scratch.dir, "legacy");
    mkdirSync(dir, { recursive: true });
    // windows-1252 bytes: é is 0xE9, € is 0x80 (as a browser reads iso-8859-1 too).
    const page = (meta: string) =>
      Buffer.concat([
        Buffer.from(`<!DOCTYPE html>\r\n<html><head>${meta}<title>R`),
        Buffer.from([0xe9]),
        Buffer.from("sum"),
        Buffer.from([0xe9]),
        Buffer.from("</title></head>\r\n<body><p>Caf"),
        Buffer.from([0xe9]),
        Buffer.from(" 3 "),
        Buffer.from([0x80]),
        Buffer.from("</p></body></html>\r\n"),
      ]);
    writeFileSync(join(dir, "meta.html"), page('<meta charset="iso-8859-1">'));
    const r = await viaSink([...MSG, "--html-file", join(dir, "meta.html")]);
    expect(r.exitCode, r.stderr).toBe(0);
    const email = await parseEml(sink.messages[0]!.raw);
    expect(email.html).toContain('<meta charset="utf-8"><title>Résumé</title>');
    expect(email.html).toContain("<p>Café 3 €</p>");
    expect(email.text).toContain("Café 3 €");

    const piped = await runCli(
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-host",
        "127.0.0.1",
        "--smtp-port",
        String(sink.port),
        "--ca-file",
        join(t.scratch.dir, "tls", "ca.pem"),
        ...MSG,
      ],
      {
        env: { MAILSEND_API_KEY: KEY },
        cwd: dir,
        input: page('<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'),
      },
    );
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect((await parseEml(sink.messages[1]!.raw)).html).toContain(
      'content="text/html; charset=utf-8"><title>Résumé</title>',
    );

    writeFileSync(join(dir, "bare.html"), page(""));
    const bare = await viaSink([...MSG, "--html-file", join(dir, "bare.html")]);
    expect(bare.exitCode).toBe(65);
    expect(bare.stderr).toContain("is not valid UTF-8");
    expect(sink.messages).toHaveLength(2);

    // UTF-8 under a stale iso-8859-1 meta: read as the UTF-8 it is, and the meta says so.
    writeFileSync(
      join(dir, "stale.html"),
      '<html><head><meta charset="iso-8859-1"><title>Résumé</title></head><body><p>Café 3 €</p></body></html>',
    );
    const stale = await viaSink([...MSG, "--html-file", join(dir, "stale.html")]);
    expect(stale.exitCode, stale.stderr).toBe(0);
    const staleHtml = (await parseEml(sink.messages[2]!.raw)).html;
    expect(staleHtml).toContain('<meta charset="utf-8"><title>Résumé</title>');
    expect(staleHtml).toContain("<p>Café 3 €</p>");

    // Piped: the same HTML is relabelled; text that only quotes such a meta is sent as written.
    const sinkSend = (input: string) =>
      runInProcess(
        [
          "send",
          "--transport",
          "smtp",
          "--smtp-host",
          "127.0.0.1",
          "--smtp-port",
          String(sink.port),
          "--ca-file",
          join(t.scratch.dir, "tls", "ca.pem"),
          ...MSG,
        ],
        { env: { MAILSEND_API_KEY: KEY }, input },
      );
    const pipedHtml = await sinkSend('<html><head><meta charset="iso-8859-1"></head><body><p>Café</p></body></html>\n');
    expect(pipedHtml.exitCode, pipedHtml.stderr).toBe(0);
    expect((await parseEml(sink.messages[3]!.raw)).html).toContain('<meta charset="utf-8">');
    const quoted = await sinkSend('the javadoc pages say <meta charset="iso-8859-1"> in their head\n');
    expect(quoted.exitCode, quoted.stderr).toBe(0);
    expect((await parseEml(sink.messages[4]!.raw)).text).toContain('say <meta charset="iso-8859-1"> in their head');
  });
});
