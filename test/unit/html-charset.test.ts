import { describe, expect, it } from "vitest";
import { htmlText } from "../../src/input/html-charset.js";

describe("htmlText: an HTML body's bytes, by its declaration", () => {
  it("ISO-2022-JP (7-bit, so also valid UTF-8) is read by its declaration and declared utf-8", () => {
    const jis = Buffer.concat([Buffer.from('<html><head><meta charset="iso-2022-jp"></head><body><p>'), Buffer.from("1b244224332473244b2441244f1b2842", "hex"), Buffer.from("</p></body></html>")]);
    const text = htmlText(jis, "jp.html");
    expect(text).toContain('<meta charset="utf-8">');
    expect(text).toContain("<p>こんにちは</p>");
  });

  it("valid UTF-8 under a stale iso-8859-1 meta is the UTF-8 it is, declared so; ASCII alike", () => {
    expect(htmlText(Buffer.from('<meta charset="iso-8859-1"><p>Café €</p>'), "a.html")).toBe('<meta charset="utf-8"><p>Café €</p>');
    expect(htmlText(Buffer.from('<meta charset="iso-8859-1"><p>plain</p>'), "a.html")).toBe('<meta charset="utf-8"><p>plain</p>');
  });

  it("UTF-8 with no declaration, or declaring utf-8, is left as written", () => {
    expect(htmlText(Buffer.from("<p>Café</p>"), "a.html")).toBe("<p>Café</p>");
    expect(htmlText(Buffer.from('<meta charset="UTF-8"><p>Café</p>'), "a.html")).toBe('<meta charset="UTF-8"><p>Café</p>');
  });
});
