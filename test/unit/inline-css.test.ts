import { describe, expect, it } from "vitest";
import { inlineCss } from "../../src/compose/css.js";

describe("--inline-css: what stays in a <style> block", () => {
  it("a leading remote @import (a web font) stays, at the head of a kept block; one after a rule is dropped, as browsers ignore it", async () => {
    const html =
      '<html><head><style>\n@import url("https://fonts.googleapis.com/css2?family=Roboto");\n@import url(https://cdn.example.com/print.css) print;\n.b { color: blue; }\n@import "late.css";\n</style></head><body><p class="b">x</p></body></html>';
    const out = await inlineCss(html);
    expect(out).toMatch(/<p class="b" style="color: blue;?">x<\/p>/);
    expect(out).toContain(
      '<style>\n@import url("https://fonts.googleapis.com/css2?family=Roboto");\n@import url(https://cdn.example.com/print.css) print;\n',
    );
    expect(out).not.toContain("late.css");
  });

  it('a quoted string in a selector does not take the next kept block into its rule: a[title="x"] before @supports', async () => {
    const supports = "@supports (display: grid) { .g { display: grid; } }";
    const html = `<html><head><style>\na[title="x"] { color: red; }\n${supports}\n</style></head><body><a title="x" class="g">x</a></body></html>`;
    const out = await inlineCss(html);
    expect(out).toMatch(/<a title="x" class="g" style="color: red;?">x<\/a>/);
    expect(out).toContain(supports);
  });

  it('a block for screen among other media (media="screen, projection" of older templates) is put on the elements; print and conditional ones stay blocks', async () => {
    const html =
      '<html><head><style media="screen, projection">.a { color: red; }</style><style media="print">.n { display: none; }</style><style media="screen and (max-width: 600px)">.a { color: blue; }</style></head><body><p class="a n">x</p></body></html>';
    const out = await inlineCss(html);
    expect(out).toMatch(/<p class="a n" style="color: red;?">x<\/p>/);
    expect(out).toContain(".n { display: none; }");
    expect(out).toContain(".a { color: blue; }");
  });
});
