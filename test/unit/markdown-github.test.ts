import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { annotation, escapeData, escapeProperty, formatOutputs } from "../../src/cli/github.js";
import { buildMessage, type MessageFlags } from "../../src/message/build.js";
import { renderMarkdown, renderMarkdownTemplate } from "../../src/message/markdown.js";
import { render } from "../../src/message/template.js";
import { scratch } from "../helpers/tmp.js";
import { failure } from "../helpers/failure.js";

const tmp = scratch();
afterAll(() => tmp.remove());

const safe = (md: string) => renderMarkdown(md, { allowHtml: false });

describe("Markdown bodies", () => {
  it("render GFM to HTML", async () => {
    expect(await safe("# Build 42\n\n- **passed**: 311\n- `npm test`\n")).toBe(
      "<h1>Build 42</h1>\n<ul>\n<li><strong>passed</strong>: 311</li>\n<li><code>npm test</code></li>\n</ul>\n",
    );
    expect(await safe("| a | b |\n|---|---|\n| 1 | 2 |\n")).toContain("<table>");
  });

  it("task lists: ballot boxes, not form controls mail clients strip; a bulleted item loses its bullet, a numbered one keeps its number", async () => {
    for (const allowHtml of [false, true]) {
      const html = await renderMarkdown("- [x] build\n- [ ] deploy\n- notes\n\n1. [X] tag\n2. publish\n", {
        allowHtml,
      });
      expect(html).not.toContain("<input");
      expect(html).toBe(
        '<ul>\n<li style="list-style-type:none">&#9745; build</li>\n<li style="list-style-type:none">&#9744; deploy</li>\n<li>notes</li>\n</ul>\n' +
          "<ol>\n<li>&#9745; tag</li>\n<li>publish</li>\n</ol>\n",
      );
    }
    // A loose item keeps its paragraphs; inline markup after the box is rendered.
    expect(await safe("- [ ] **ship** it\n\n  later\n")).toBe(
      '<ul>\n<li style="list-style-type:none"><p>&#9744; <strong>ship</strong> it</p>\n<p>later</p>\n</li>\n</ul>\n',
    );
  });

  it("GitHub alerts (> [!WARNING]) are a titled, coloured quote, as GitHub shows them; other quotes are quotes", async () => {
    expect(await safe("> [!WARNING]\n> Disk **full** on `ci-3`.\n>\n> <b>x</b>\n")).toBe(
      '<blockquote style="margin:0 0 16px;padding:0 1em;border-left:4px solid #9a6700">\n<p style="margin:0 0 8px;color:#9a6700;font-weight:600">Warning</p>\n' +
        "<p>Disk <strong>full</strong> on <code>ci-3</code>.</p>\n<p>&lt;b&gt;x&lt;/b&gt;</p>\n</blockquote>\n",
    );
    // The mark alone in its paragraph, then other blocks; any case.
    const list = await safe("> [!caution]\n> - a\n> - b\n");
    expect(list).toMatch(/^<blockquote style="[^"]*#d1242f">\n<p [^>]*>Caution<\/p>\n<ul>\n<li>a<\/li>/);
    expect(list).not.toContain("[!");
    for (const [kind, title] of [
      ["NOTE", "Note"],
      ["TIP", "Tip"],
      ["IMPORTANT", "Important"],
    ]) {
      expect(await safe(`> [!${kind}]\n> text\n`)).toContain(`font-weight:600">${title}</p>\n<p>text</p>`);
    }
    // Not alerts on GitHub either: words on the mark's line, a mark with nothing after it, an unknown kind.
    for (const md of ["> [!NOTE] inline\n", "> [!TIP]\n", "> [!DANGER]\n> x\n", "> quoted\n"]) {
      expect(await safe(md)).toMatch(/^<blockquote>\n<p>/);
    }
  });

  it("footnotes as on GitHub: numbered references, the notes listed at the end after a rule (no screen-reader heading shown in mail)", async () => {
    const html = await safe(
      "Flaky[^1] and slow[^slow].\n\n[^1]: see <b>run</b> 41\n[^slow]: over **10 s**\n\nNot one: [^x]\n",
    );
    expect(html).toContain(
      '<p>Flaky<sup><a id="footnote-ref-1" href="#footnote-1" data-footnote-ref aria-describedby="footnote-label">1</a></sup> and slow<sup>',
    );
    expect(html).toContain(
      '>2</a></sup>.</p>\n<p>Not one: [^x]</p>\n<hr data-footnotes>\n<section class="footnotes" data-footnotes>\n<ol>\n<li id="footnote-1">\n<p>see &lt;b&gt;run&lt;/b&gt; 41 ',
    );
    expect(html).toContain("<p>over <strong>10 s</strong> ");
    expect(html).not.toContain("[^1]");
    expect(html).not.toContain(">Footnotes<");
  });

  it("escape raw HTML, block and inline, by default", async () => {
    expect(await safe("<script>alert(1)</script>\n")).toBe("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n");
    expect(await safe('hello <img src=x onerror="alert(1)"> world')).toBe(
      "<p>hello &lt;img src=x onerror=&quot;alert(1)&quot;&gt; world</p>\n",
    );
    expect(await safe("<div>\n*md*\n</div>\n")).not.toMatch(/<div>/);
  });

  it("drop script-capable link and image URLs by default", async () => {
    expect(await safe("[click](javascript:alert(1))")).toBe("<p>click</p>\n");
    expect(await safe("[x](  JavaScript:alert(1))")).not.toContain("href");
    expect(await safe("[x](data:text/html;base64,PHNjcmlwdD4=)")).toBe("<p>x</p>\n");
    expect(await safe("![pic](javascript:x)")).toBe("<p>pic</p>\n");
    expect(await safe("[ok](https://example.com/a?b=1)")).toBe('<p><a href="https://example.com/a?b=1">ok</a></p>\n');
    expect(await safe("![logo](data:image/png;base64,iVBORw0KGgo=)")).toContain(
      '<img src="data:image/png;base64,iVBORw0KGgo="',
    );
  });

  it("keep raw HTML and links as written with allowHtml", async () => {
    const html = await renderMarkdown("<script>alert(1)</script>\n\n[x](javascript:y)", { allowHtml: true });
    expect(html).toContain("<script>alert(1)</script>");
    expect(html).toContain('href="javascript:y"');
  });

  it("as a batch template: placeholders survive rendering (also in URLs) and are filled per row", async () => {
    const tpl = await renderMarkdownTemplate(
      "Hi **{{name}}**, see [your plan](https://e.example/p/{{ id }}) `{{code}}`",
      { allowHtml: false },
    );
    expect(tpl).toBe(
      '<p>Hi <strong>{{name}}</strong>, see <a href="https://e.example/p/{{id}}">your plan</a> <code>{{code}}</code></p>\n',
    );
    expect(render(tpl, { name: "<b>Ann</b>", id: "7", code: "a&b" }, "html", "--markdown-file")).toBe(
      '<p>Hi <strong>&lt;b&gt;Ann&lt;/b&gt;</strong>, see <a href="https://e.example/p/7">your plan</a> <code>a&amp;b</code></p>\n',
    );
  });
});

function stdinOf(text?: string) {
  const s = Readable.from(text === undefined ? [] : [Buffer.from(text)]) as Readable & { isTTY?: boolean };
  s.isTTY = text === undefined;
  return s;
}

describe("buildMessage with --markdown-file", () => {
  const BASE: MessageFlags = { from: "a@example.com", to: ["b@example.com"], subject: "Hi" };
  const md = tmp.file("body.md", "# Hi\n\n<b>x</b>\n");

  it("the HTML is the rendering, the text is the source", async () => {
    const m = await buildMessage({ ...BASE, markdownFile: md }, { transport: "smtp", stdin: stdinOf() });
    expect(m.text).toBe("# Hi\n\n<b>x</b>\n");
    expect(m.html).toBe("<h1>Hi</h1>\n<p>&lt;b&gt;x&lt;/b&gt;</p>\n");
    const allowed = await buildMessage(
      { ...BASE, markdownFile: md, allowHtml: true },
      { transport: "rest", stdin: stdinOf() },
    );
    expect(allowed.html).toContain("<b>x</b>");
  });

  it("reads stdin for -", async () => {
    const m = await buildMessage({ ...BASE, markdownFile: "-" }, { transport: "rest", stdin: stdinOf("*hi*") });
    expect(m.html).toBe("<p><em>hi</em></p>\n");
  });

  it("conflicts with the other body flags, and --allow-html needs it: usage (64)", async () => {
    for (const extra of [{ html: "<p>x</p>" }, { htmlFile: md }, { text: "x" }, { textFile: md }]) {
      const e = await failure(
        buildMessage({ ...BASE, markdownFile: md, ...extra }, { transport: "rest", stdin: stdinOf() }),
      );
      expect(e.exitCode, JSON.stringify(extra)).toBe(64);
      expect(e.message).toMatch(/--markdown-file .* cannot be combined with --(html|text)/);
    }
    const e = await failure(
      buildMessage({ ...BASE, html: "x", allowHtml: true }, { transport: "rest", stdin: stdinOf() }),
    );
    expect(e.message).toBe("--allow-html applies only to --markdown-file");
    expect(
      (
        await failure(
          buildMessage({ ...BASE, markdownFile: "-", jsonFile: "-" }, { transport: "rest", stdin: stdinOf("x") }),
        )
      ).message,
    ).toMatch(/only one input can come from stdin/);
    expect(
      (await failure(buildMessage({ markdownFile: md, eml: md }, { transport: "rest", stdin: stdinOf() }))).message,
    ).toMatch(/--eml .* --markdown-file/);
  });

  it("a missing file: 66", async () => {
    expect(
      (
        await failure(
          buildMessage({ ...BASE, markdownFile: `${tmp.dir}/nope.md` }, { transport: "rest", stdin: stdinOf() }),
        )
      ).exitCode,
    ).toBe(66);
  });

  it("the default sender (MAILSEND_FROM or the profile) is used only without --from or a JSON from", async () => {
    const noFrom = { to: ["b@example.com"], subject: "Hi", text: "x" };
    const m = await buildMessage(noFrom, { transport: "rest", stdin: stdinOf(), defaultFrom: "Ops <ops@example.com>" });
    expect(m.from).toEqual({ name: "Ops", address: "ops@example.com" });
    const flag = await buildMessage(
      { ...noFrom, from: "me@example.com" },
      { transport: "rest", stdin: stdinOf(), defaultFrom: "Ops <ops@example.com>" },
    );
    expect(flag.from).toEqual({ address: "me@example.com" });
    const bad = await failure(
      buildMessage(noFrom, { transport: "rest", stdin: stdinOf(), defaultFrom: "not an address" }),
    );
    expect(bad.message).toMatch(/MAILSEND_FROM/);
  });
});

describe("GitHub Actions", () => {
  it("annotations escape %, CR and LF in the message, and also : and , in properties", () => {
    expect(escapeData("100% done\r\nnext")).toBe("100%25 done%0D%0Anext");
    expect(escapeProperty("a:b,c%")).toBe("a%3Ab%2Cc%25");
    expect(annotation("error", "no API key: 50%", "Set it\nnow")).toBe(
      "::error title=mailsend::no API key: 50%25%0ASet it%0Anow\n",
    );
    expect(annotation("warning", "x")).toBe("::warning title=mailsend::x\n");
  });

  it("outputs: name=value, or the delimiter form for a value with a line break", () => {
    expect(formatOutputs({ message_id: "msg_1", sent: 3 })).toBe("message_id=msg_1\nsent=3\n");
    const out = formatOutputs({ message_id: "a\nb" });
    const m = /^message_id<<(ghadelimiter_[0-9a-f-]+)\na\nb\n\1\n$/.exec(out);
    expect(m, out).not.toBeNull();
  });
});
