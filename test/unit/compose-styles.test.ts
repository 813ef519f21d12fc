import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { embedStylesheets, findStylesheetLinks, mayLinkStylesheets, rebaseUrls } from "../../src/compose/styles.js";

const dir = mkdtempSync(join(tmpdir(), "mailsend-styles-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("which links are stylesheets", () => {
  it("rel is read as tokens in any case; alternate sheets, other rels, and links without href are not", () => {
    const html = `<LINK REL="Stylesheet" HREF="a.css"><link rel="alternate stylesheet" href="b.css"><link rel="icon" href="c.ico">
<link rel="stylesheet"><link rel="preload stylesheet" href="d.css" media="ALL"><link rel=stylesheet href=e.css media="print and (color)">
<!-- <link rel="stylesheet" href="comment.css"> --><script>"<link rel='stylesheet' href='script.css'>"</script>`;
    const links = findStylesheetLinks(html);
    expect(links.map((l) => [l.href, l.media])).toEqual([
      ["a.css", undefined],
      ["d.css", undefined],
      ["e.css", "print and (color)"],
    ]);
    expect(html.slice(links[0]!.start, links[0]!.end)).toBe('<LINK REL="Stylesheet" HREF="a.css">');
    expect(mayLinkStylesheets("<p>no links</p>")).toBe(false);
  });
});

describe("a sheet's url()s, rebased to the HTML's directory", () => {
  it("relative ones move; absolute, remote, data:, fragment-only ones and a sheet beside the HTML stay", () => {
    const css = `a{background:url(img/x.png)} b{background:url('../y.png?v=2#f')} c{background:url("data:image/gif;base64,R0")} d{background:url(/abs.png)} e{background:url(https://h/z.png)} f{fill:url(#grad)}`;
    expect(rebaseUrls(css, "/r/css", "/r")).toBe(
      `a{background:url("css/img/x.png")} b{background:url("y.png?v=2#f")} c{background:url("data:image/gif;base64,R0")} d{background:url(/abs.png)} e{background:url(https://h/z.png)} f{fill:url(#grad)}`,
    );
    expect(rebaseUrls(css, "/r", "/r")).toBe(css);
  });
});

describe("embedding", () => {
  it("replaces only the link's bytes, keeps media, and cannot end the <style> block early", async () => {
    mkdirSync(join(dir, "css"), { recursive: true });
    writeFileSync(join(dir, "css", "s.css"), '\uFEFFp::after { content: "</style><script>x</script>"; }');
    const html = '<head><link rel="stylesheet" href="css/s.css" media="screen"></head><body><p>x</p></body>';
    const r = await embedStylesheets(html, dir);
    expect(r.html).toBe(
      '<head><style media="screen">\np::after { content: "<\\/style><script>x</script>"; }\n</style></head><body><p>x</p></body>',
    );
    expect(r.sheets).toEqual([
      {
        ref: "css/s.css",
        path: join(dir, "css", "s.css"),
        bytes: Buffer.byteLength('\uFEFFp::after { content: "</style><script>x</script>"; }'),
      },
    ]);
    expect(r.left).toEqual([]);
  });
});

describe("what is no stylesheet file", () => {
  it("a directory or a FIFO is refused (65) before anything opens it: a FIFO would wait for a writer forever", async () => {
    mkdirSync(join(dir, "sub", "css"), { recursive: true });
    await expect(embedStylesheets('<link rel="stylesheet" href="css/">', join(dir, "sub"))).rejects.toMatchObject({
      code: "invalid_message",
      message: expect.stringContaining("is not a regular file"),
    });
    if (process.platform === "win32") return;
    execFileSync("mkfifo", [join(dir, "sub", "fifo.css")]);
    await expect(embedStylesheets('<link rel="stylesheet" href="fifo.css">', join(dir, "sub"))).rejects.toMatchObject({
      code: "invalid_message",
      message: expect.stringContaining("is not a regular file"),
    });
  });
});

describe("only .css files are stylesheets", () => {
  it("a link or an @import naming another file (.env, a key) is refused (65), its text never embedded", async () => {
    const d = join(dir, "secrets");
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, ".env"), "DB_PASSWORD=hunter2\n");
    writeFileSync(join(d, "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    writeFileSync(join(d, "ok.CSS"), "p { color: red }\n");
    for (const html of [
      '<link rel="stylesheet" href=".env">',
      '<style>@import "id_rsa";</style>',
      '<link rel="stylesheet" href="id_rsa?x=.css">',
    ]) {
      await expect(embedStylesheets(html, d), html).rejects.toMatchObject({
        code: "invalid_message",
        message: expect.stringContaining("is not a .css file"),
      });
    }
    writeFileSync(join(d, "imports.css"), '@import ".env";\n');
    await expect(embedStylesheets('<link rel="stylesheet" href="imports.css">', d)).rejects.toMatchObject({
      message: expect.stringContaining('".env"'),
    });
    expect((await embedStylesheets('<link rel="stylesheet" href="ok.CSS?v=2">', d)).html).toContain("p { color: red }");
  });
});
