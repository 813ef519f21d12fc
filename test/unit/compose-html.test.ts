import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { composeHtml, ImageCache } from "../../src/compose/index.js";
import { localPath } from "../../src/compose/images.js";
import { findRefAttributes, rewriteRefs } from "../../src/compose/refs.js";
import { sniffImage } from "../../src/compose/sniff.js";
import { textFromHtml } from "../../src/compose/text.js";
import { mimeTree } from "../../src/compose/tree.js";
import { parseAddressList } from "../../src/core/address.js";
import { failure } from "../helpers/failure.js";

const PNG = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.alloc(32, 1)]);
const dir = mkdtempSync(join(tmpdir(), "mailsend-compose-"));
const base = join(dir, "site");
mkdirSync(join(base, "img"), { recursive: true });
writeFileSync(join(base, "img", "a.png"), PNG);
writeFileSync(join(dir, "outside.png"), PNG);
symlinkSync(join(dir, "outside.png"), join(base, "out.png"));
symlinkSync(join(base, "img", "a.png"), join(base, "alias.png"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("findRefAttributes / rewriteRefs", () => {
  it("finds img src, background attributes and style url(), not comments or scripts, and rewrites only those bytes", () => {
    const html = `<P>x</P><IMG ALT="a" SRC = 'img/a.png' ><td background=bg.png></td><div style="color:red;background:url(&quot;img/a.png&quot;)"></div><!-- <img src="c.png"> --><script>"<img src='d.png'>"</script>`;
    const attrs = findRefAttributes(html);
    expect(attrs.map((a) => [a.tag, a.name, a.refs])).toEqual([
      ["img", "src", ["img/a.png"]],
      ["td", "background", ["bg.png"]],
      ["div", "style", ["img/a.png"]],
    ]);
    const out = rewriteRefs(html, attrs, (r) => (r === "img/a.png" ? "cid:A" : undefined));
    expect(out).toBe(
      `<P>x</P><IMG ALT="a" src="cid:A" ><td background=bg.png></td><div style="color:red;background:url(cid:A)"></div><!-- <img src="c.png"> --><script>"<img src='d.png'>"</script>`,
    );
  });
});

describe("localPath", () => {
  it("leaves remote, data:, cid: and fragment references alone; decodes the rest", () => {
    for (const r of [
      "https://x.example/a.png",
      "http://x/a.png",
      "//cdn.example/a.png",
      "data:image/png;base64,AA==",
      "cid:x",
      "#top",
      "mailto:a@b.c",
    ]) {
      expect(localPath(r)).toBeUndefined();
    }
    expect(localPath("img/a%20b.png?v=2#x")).toBe("img/a b.png");
    expect(localPath("..%2fsecret.png")).toBe("../secret.png");
    expect(localPath("file:///etc/passwd")).toBe("/etc/passwd");
  });
});

describe("textFromHtml of a big report", () => {
  it("over 1,000 table rows: a line per row, cells between ' | ' (aligned columns cost seconds there), nothing lost", async () => {
    const rows = Array.from(
      { length: 1500 },
      (_, i) => `<tr><td>file-${i}.ts</td><td>${i % 7 ? "passed" : "failed"}</td></tr>`,
    ).join("");
    const text = await textFromHtml(
      `<h1>Report</h1><table><thead><tr><th>file</th><th>status</th></tr></thead><tbody>${rows}</tbody></table><p>end</p>`,
    );
    const lines = text.split("\n");
    expect(lines).toContain("file | status");
    expect(lines).toContain("file-0.ts | failed");
    expect(lines).toContain("file-1499.ts | passed");
    expect(lines.filter((l) => / \| /.test(l))).toHaveLength(1501);
    expect(text.trimEnd().endsWith("end")).toBe(true);
    // A small table keeps its aligned columns.
    expect(
      await textFromHtml(
        "<table><tr><th>file</th><th>status</th></tr><tr><td>a-long-name.ts</td><td>ok</td></tr></table>",
      ),
    ).toMatch(/^file {2,}status$/m);
  });
});

describe("textFromHtml of a report over 16 MiB", () => {
  it("is converted whole: html-to-text's default cut at 2^24 characters lost the end silently (and printed its own warning)", async () => {
    const line = `${"x".repeat(70)}\n`;
    const html = `<pre>${line.repeat(Math.ceil((1 << 24) / line.length) + 1000)}</pre><p>THE END</p>`;
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const text = await textFromHtml(html);
      expect(text.trimEnd().endsWith("THE END")).toBe(true);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  }, 60_000);
});

describe("composeHtml", () => {
  const opts = { baseDir: base, embed: true, inline: [], inlineCss: false };

  it("warns of local files it leaves as written: url() in a <style> block, srcset candidates; not remote, data: or cid: ones", async () => {
    const html = `<style>.a{background:url(img/bg.png)} .b{background:url("https://x.example/b.png")} .c{background:url(data:image/png;base64,AA==)}</style><img src="img/a.png" srcset="img/a.png 1x, img/a@2x.png 2x, https://x.example/c.png 3x">`;
    const c = await composeHtml(html, opts);
    expect(c.warnings).toEqual([
      expect.stringMatching(
        /^url\(img\/bg\.png\) in a <style> block names a file on this machine, which no mail client can load: --inline-css /,
      ),
      expect.stringMatching(/^srcset names img\/a\.png, a file on this machine that is not embedded/),
      expect.stringMatching(/^srcset names img\/a@2x\.png, /),
    ]);
    // --no-embed: the user chose to leave references as written; nothing said.
    expect((await composeHtml(html, { ...opts, embed: false })).warnings).toEqual([]);
    expect((await composeHtml('<style>.a{color:red}</style><img src="img/a.png">', opts)).warnings).toEqual([]);
  });

  it("one part per image file, whichever way it is reached (a symlink inside counts as the same file)", async () => {
    const c = await composeHtml('<img src="img/a.png"><img src="./img/a.png"><img src="alias.png">', opts);
    expect(c.images).toHaveLength(1);
    expect(c.html.match(/cid:/g)).toHaveLength(3);
    expect(new Set([...c.html.matchAll(/cid:([^"]+)/g)].map((m) => m[1]))).toEqual(new Set([c.images[0]!.cid]));
  });

  it("refuses a symlink leading out, and reads each file once for many messages (batch)", async () => {
    const e = await failure(composeHtml('<img src="out.png">', opts));
    expect(e.code).toBe("invalid_message");
    expect(e.message).toContain("symlink");
    const cache = new ImageCache();
    const a = await composeHtml('<img src="img/a.png">', { ...opts, cache });
    const b = await composeHtml('<p>row 2</p><img src="img/a.png">', { ...opts, cache });
    expect(b.images[0]!.data).toBe(a.images[0]!.data);
  });

  it("refuses an image over the per-message limit without reading it (too_large, 65)", async () => {
    const big = join(base, "huge.png");
    writeFileSync(big, PNG);
    truncateSync(big, 26 * 1024 * 1024); // sparse: nothing is written, nothing is read
    const e = await failure(composeHtml('<img src="huge.png">', opts));
    expect(e.code).toBe("too_large");
    expect(e.message).toContain('"huge.png"');
  });

  it("--no-embed leaves everything as written", async () => {
    const html = '<img src="../outside.png">';
    expect((await composeHtml(html, { ...opts, embed: false })).html).toBe(html);
  });
});

describe("sniffImage", () => {
  it("tells images by their bytes", () => {
    expect(sniffImage(PNG)).toBe("image/png");
    expect(sniffImage(Buffer.from([0xff, 0xd8, 0xff, 0xdb]))).toBe("image/jpeg");
    expect(sniffImage(Buffer.from("GIF89a......"))).toBe("image/gif");
    expect(sniffImage(Buffer.from("<svg xmlns='http://www.w3.org/2000/svg'/>"))).toBeUndefined();
    expect(sniffImage(Buffer.from("root:x:0:0:root:/root:/bin/bash\n"))).toBeUndefined();
  });
});

describe("textFromHtml", () => {
  it("keeps links as text [url], tables as columns, headings as lines, images by their alt text", async () => {
    const text = await textFromHtml(
      '<h2>Coverage</h2><p>See <a href="https://ci.example/42">the build</a>.</p><table><tr><th>File</th><th>Cover</th></tr><tr><td>src/a.ts</td><td>91%</td></tr></table><img src="cid:x" alt="chart">',
    );
    expect(text).toContain("Coverage\n");
    expect(text).toContain("See the build [https://ci.example/42].");
    expect(text).toMatch(/File\s+Cover\nsrc\/a\.ts\s+91%/);
    expect(text).toContain("chart");
    expect(text).not.toContain("cid:");
  });
});

describe("mimeTree", () => {
  it("reads parts, sizes and cids back from a message", () => {
    const raw = Buffer.from(
      [
        'Content-Type: multipart/related; boundary="b1"',
        "",
        "--b1",
        "Content-Type: text/html",
        "",
        '<img src="cid:x@y">',
        "--b1",
        "Content-Type: image/png; name=a.png",
        "Content-ID: <x@y>",
        "Content-Transfer-Encoding: base64",
        "Content-Disposition: inline; filename=a.png",
        "",
        PNG.toString("base64"),
        "--b1--",
        "",
      ].join("\r\n"),
    );
    const t = mimeTree(raw);
    expect(t.type).toBe("multipart/related");
    expect(t.parts!.map((p) => [p.type, p.cid, p.disposition, p.filename])).toEqual([
      ["text/html", undefined, undefined, undefined],
      ["image/png", "x@y", "inline", "a.png"],
    ]);
    expect(t.parts![1]!.size).toBe(PNG.length);
  });
});

describe("international addresses", () => {
  it("an IDN domain becomes punycode; a non-ASCII local part is kept as written", () => {
    expect(parseAddressList("Jörg <user@bücher.example>")).toEqual([
      { name: "Jörg", address: "user@xn--bcher-kva.example" },
    ]);
    expect(parseAddressList("jörg@example.de")).toEqual([{ address: "jörg@example.de" }]);
  });
});
