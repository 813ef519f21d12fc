import { describe, expect, it } from "vitest";
import { htmlText } from "../../src/message/html-charset.js";

describe("htmlText: an HTML body's bytes, by its declaration", () => {
  it("ISO-2022-JP (7-bit, so also valid UTF-8) is read by its declaration and declared utf-8", () => {
    const jis = Buffer.concat([
      Buffer.from('<html><head><meta charset="iso-2022-jp"></head><body><p>'),
      Buffer.from("1b244224332473244b2441244f1b2842", "hex"),
      Buffer.from("</p></body></html>"),
    ]);
    const text = htmlText(jis, "jp.html");
    expect(text).toContain('<meta charset="utf-8">');
    expect(text).toContain("<p>こんにちは</p>");
  });

  it("valid UTF-8 under a stale iso-8859-1 meta is the UTF-8 it is, declared so; ASCII alike", () => {
    expect(htmlText(Buffer.from('<meta charset="iso-8859-1"><p>Café €</p>'), "a.html")).toBe(
      '<meta charset="utf-8"><p>Café €</p>',
    );
    expect(htmlText(Buffer.from('<meta charset="iso-8859-1"><p>plain</p>'), "a.html")).toBe(
      '<meta charset="utf-8"><p>plain</p>',
    );
  });

  it("UTF-8 with no declaration, or declaring utf-8, is left as written", () => {
    expect(htmlText(Buffer.from("<p>Café</p>"), "a.html")).toBe("<p>Café</p>");
    expect(htmlText(Buffer.from('<meta charset="UTF-8"><p>Café</p>'), "a.html")).toBe(
      '<meta charset="UTF-8"><p>Café</p>',
    );
  });
});

describe("htmlText: the declaration as the HTML standard's prescan finds it", () => {
  const latin1 = (s: string) => Buffer.from(s, "latin1");

  it("a declaration in a comment counts for nothing; the one after it is read and relabelled", () => {
    const buf = latin1('<!-- was: <meta charset="utf-8"> --><meta charset="iso-8859-1"><p>Caf\xe9</p>');
    expect(htmlText(buf, "a.html")).toBe('<!-- was: <meta charset="utf-8"> --><meta charset="utf-8"><p>Café</p>');
  });

  it("charset= in another tag's attribute, or in a content without http-equiv, is not a declaration", () => {
    expect(() => htmlText(latin1('<div title="<meta charset=latin1>">Caf\xe9</div>'), "a.html")).toThrow(
      /not valid UTF-8/,
    );
    expect(() =>
      htmlText(latin1('<meta name="description" content="charset=latin1 howto"><p>Caf\xe9</p>'), "a.html"),
    ).toThrow(/not valid UTF-8/);
    const buf = latin1(
      '<meta name="description" content="charset=utf-8"><meta http-equiv="Content-Type" content="text/html; charset=latin1"><p>Caf\xe9</p>',
    );
    expect(htmlText(buf, "a.html")).toBe(
      '<meta name="description" content="charset=utf-8"><meta http-equiv="Content-Type" content="text/html; charset=utf-8"><p>Café</p>',
    );
  });

  it("x-user-defined in a meta means windows-1252, as in a browser", () => {
    expect(htmlText(latin1('<meta charset="x-user-defined"><p>3 \x80</p>'), "a.html")).toBe(
      '<meta charset="utf-8"><p>3 €</p>',
    );
  });

  it("a label a browser does not know is skipped for the next meta", () => {
    expect(htmlText(latin1('<meta charset="no-such"><meta charset="latin1"><p>Caf\xe9</p>'), "a.html")).toBe(
      '<meta charset="no-such"><meta charset="utf-8"><p>Café</p>',
    );
  });

  it("a UTF-8 byte order mark wins over a legacy meta: bytes that are not UTF-8 under it are refused, UTF-8 is declared so", () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    expect(() => htmlText(Buffer.concat([bom, latin1('<meta charset="iso-8859-1"><p>Caf\xe9</p>')]), "a.html")).toThrow(
      /not valid UTF-8/,
    );
    expect(htmlText(Buffer.concat([bom, Buffer.from('<meta charset="iso-8859-1"><p>Café</p>')]), "a.html")).toBe(
      '<meta charset="utf-8"><p>Café</p>',
    );
  });
});

describe("htmlText: an XHTML page that declares its charset twice", () => {
  it("the XML prolog and the meta both say utf-8 after", () => {
    const page =
      '<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1" /></head><body><p>Caf\xe9</p></body></html>';
    expect(htmlText(Buffer.from(page, "latin1"), "a.html")).toBe(
      page.replace(/iso-8859-1/g, "utf-8").replace("\xe9", "é"),
    );
    expect(
      htmlText(Buffer.from('<?xml version="1.0" encoding="windows-1252"?><p>3 \x80</p>', "latin1"), "a.html"),
    ).toBe('<?xml version="1.0" encoding="utf-8"?><p>3 €</p>');
  });
});
