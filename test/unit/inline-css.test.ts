import { describe, expect, it } from "vitest";
import { inlineCss } from "../../src/compose/css.js";

describe("--inline-css: what stays in a <style> block", () => {
  it("a quoted string in a selector does not take the next kept block into its rule: a[title=\"x\"] before @supports", async () => {
    const supports = "@supports (display: grid) { .g { display: grid; } }";
    const html = `<html><head><style>\na[title="x"] { color: red; }\n${supports}\n</style></head><body><a title="x" class="g">x</a></body></html>`;
    const out = await inlineCss(html);
    expect(out).toMatch(/<a title="x" class="g" style="color: red;?">x<\/a>/);
    expect(out).toContain(supports);
  });
});
