/**
 * An HTML file in a legacy charset that says so (`<meta charset="iso-8859-1">`, the http-equiv
 * form, or an XHTML `<?xml encoding=...?>` prolog), as older report generators, Windows tools and
 * javadoc write them: a browser reads it by that declaration, so mailsend does too. The text is
 * then sent as UTF-8 (the JSON of REST, `charset=utf-8` over SMTP), so the declaration is changed
 * to say utf-8: a client that believed the old one would show mojibake. HTML that is not UTF-8 and
 * declares nothing, or declares UTF-8, is still refused: there is nothing to read it by.
 */
import { isUtf8 } from "node:buffer";
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { TextDecoder } = process.getBuiltinModule("node:util");
import { utf8 } from "../core/read.js";

/** Where a browser's prescan looks for the declaration: the first 1024 bytes. */
const PRESCAN = 1024;
const XML = /^(?:\xef\xbb\xbf)?<\?xml\b[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)/i;

/** A declaration found: its encoding (a TextDecoder's name) and where its label is in the bytes, to change it. */
interface Declaration {
  encoding: string;
  start: number;
  end: number;
}

/** The encoding a label names, as the HTML standard's "get an encoding" does; undefined for one it does not know. */
function encodingOf(label: string): string | undefined {
  const l = label.trim().toLowerCase();
  // x-user-defined (which Node's TextDecoder lacks) and UTF-16 in a meta mean windows-1252 and UTF-8: a
  // meta that the prescan could read is ASCII, so the file cannot be UTF-16.
  if (l === "x-user-defined") return "windows-1252";
  try {
    const e = new TextDecoder(l).encoding;
    return /^utf-16/.test(e) ? "utf-8" : e;
  } catch {
    return undefined;
  }
}

const SPACE = /[\t\n\f\r ]/;

type Attribute = { name: string; value: string; valueAt: number; next: number };

/**
 * The HTML standard's "get an attribute" over the prescanned bytes (as latin1): name, value and where
 * the value is; undefined at the tag's end, "end" when the bytes end first (the prescan stops there).
 */
function attribute(s: string, at: number): Attribute | undefined | "end" {
  let i = at;
  while (i < s.length && (SPACE.test(s[i]!) || s[i] === "/")) i++;
  if (i >= s.length) return "end";
  if (s[i] === ">") return undefined;
  let name = "";
  for (; i < s.length; i++) {
    const c = s[i]!;
    if (c === "=" && name !== "") break;
    if (SPACE.test(c)) {
      while (i < s.length && SPACE.test(s[i]!)) i++;
      break;
    }
    if (c === "/" || c === ">") return { name, value: "", valueAt: i, next: i };
    name += c.toLowerCase();
  }
  if (i >= s.length) return "end";
  if (s[i] !== "=") return { name, value: "", valueAt: i, next: i };
  i++;
  while (i < s.length && SPACE.test(s[i]!)) i++;
  if (i >= s.length) return "end";
  const q = s[i]!;
  if (q === '"' || q === "'") {
    const close = s.indexOf(q, i + 1);
    if (close < 0) return "end";
    return { name, value: s.slice(i + 1, close), valueAt: i + 1, next: close + 1 };
  }
  if (q === ">") return { name, value: "", valueAt: i, next: i };
  const from = i;
  while (i < s.length && !SPACE.test(s[i]!) && s[i] !== ">") i++;
  if (i >= s.length) return "end";
  return { name, value: s.slice(from, i), valueAt: from, next: i };
}

/** "Extract a character encoding from a meta element": the label in a content="text/html; charset=..." and its offset there. */
function contentCharset(value: string): { label: string; at: number } | undefined {
  let i = 0;
  for (;;) {
    const found = value.toLowerCase().indexOf("charset", i);
    if (found < 0) return undefined;
    i = found + "charset".length;
    while (i < value.length && SPACE.test(value[i]!)) i++;
    if (value[i] === "=") break;
  }
  i++;
  while (i < value.length && SPACE.test(value[i]!)) i++;
  const q = value[i];
  if (q === '"' || q === "'") {
    const close = value.indexOf(q, i + 1);
    return close < 0 ? undefined : { label: value.slice(i + 1, close), at: i + 1 };
  }
  const m = /^[^\t\n\f\r ;]+/.exec(value.slice(i));
  return m ? { label: m[0], at: i } : undefined;
}

/**
 * The HTML standard's prescan of the first 1024 bytes: the first <meta> whose charset (or, with
 * http-equiv="content-type", whose content's charset) names an encoding. Comments and other tags'
 * attribute values are skipped, as a browser skips them (an old declaration commented out counts for
 * nothing); an XHTML prolog's encoding is the fallback.
 */
function prescan(buf: Buffer): Declaration | undefined {
  const s = buf.subarray(0, PRESCAN).toString("latin1");
  let i = 0;
  // Bounded: each turn moves i forward.
  while (i < s.length) {
    if (s.startsWith("<!--", i)) {
      const close = s.indexOf("-->", i + 2);
      if (close < 0) break;
      i = close + 3;
    } else if (/^<meta[\t\n\f\r /]/i.test(s.slice(i, i + 6))) {
      let j = i + 6;
      const seen = new Set<string>();
      let gotPragma = false;
      let needPragma: boolean | undefined;
      let decl: Declaration | undefined;
      let failed = false;
      let a: Attribute | undefined | "end";
      for (a = attribute(s, j); a && a !== "end"; a = attribute(s, j)) {
        j = a.next;
        if (seen.has(a.name)) continue;
        seen.add(a.name);
        if (a.name === "http-equiv") gotPragma ||= a.value.toLowerCase() === "content-type";
        else if (a.name === "content" && decl === undefined && !failed) {
          const c = contentCharset(a.value);
          const encoding = c && encodingOf(c.label);
          if (c && encoding) {
            decl = { encoding, start: a.valueAt + c.at, end: a.valueAt + c.at + c.label.length };
            needPragma = true;
          }
        } else if (a.name === "charset") {
          const encoding = encodingOf(a.value);
          decl = encoding ? { encoding, start: a.valueAt, end: a.valueAt + a.value.length } : undefined;
          failed = !encoding;
          needPragma = false;
        }
      }
      if (a === "end") break;
      if (decl && needPragma !== undefined && (!needPragma || gotPragma)) return decl;
      i = j + 1;
    } else if (/^<\/?[A-Za-z]/.test(s.slice(i, i + 3))) {
      let j = i + 1;
      while (j < s.length && !SPACE.test(s[j]!) && s[j] !== ">") j++;
      let a: Attribute | undefined | "end";
      for (a = attribute(s, j); a && a !== "end"; a = attribute(s, j)) j = a.next;
      if (a === "end") break;
      i = j + 1;
    } else if (/^<[!/?]/.test(s.slice(i, i + 2))) {
      const close = s.indexOf(">", i + 2);
      if (close < 0) break;
      i = close + 1;
    } else i++;
  }
  return xmlDeclaration(buf);
}

/** An XHTML prolog's encoding (`<?xml version="1.0" encoding="iso-8859-1"?>`), at the very start. */
function xmlDeclaration(buf: Buffer): Declaration | undefined {
  const xml = XML.exec(buf.subarray(0, PRESCAN).toString("latin1"));
  if (!xml) return undefined;
  const encoding = encodingOf(xml[1]!);
  const at = xml[0].length - xml[1]!.length;
  return encoding ? { encoding, start: at, end: at + xml[1]!.length } : undefined;
}

/** The encoding a byte order mark says, which wins over any declaration, as in a browser (UTF-16 is refused before this as binary: its NUL bytes). */
function bomEncoding(buf: Buffer): "utf-8" | "utf-16le" | "utf-16be" | undefined {
  if (buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) return "utf-8";
  if (buf[0] === 0xff && buf[1] === 0xfe) return "utf-16le";
  if (buf[0] === 0xfe && buf[1] === 0xff) return "utf-16be";
  return undefined;
}

/** The legacy (not UTF-8) declaration of a file without a byte order mark. */
function legacyDeclaration(buf: Buffer): Declaration | undefined {
  if (bomEncoding(buf) !== undefined) return undefined;
  const d = prescan(buf);
  return d && d.encoding !== "utf-8" ? d : undefined;
}

/** windows-1252's 0x80-0x9F (WHATWG index; the five it leaves undefined stay C1 controls, as browsers read them). */
const CP1252_HIGH =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

function decode(encoding: string, buf: Buffer): string {
  // Node before 23 decodes windows-1252 (the label iso-8859-1 means too) as Latin-1: "€" and the quotes came out as C1 controls.
  if (encoding === "windows-1252")
    return buf.toString("latin1").replace(/[\u0080-\u009f]/g, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]!);
  return new TextDecoder(encoding, { fatal: true }).decode(buf);
}

/**
 * The text with the declaration's label changed to utf-8, what it is sent as (a client that believes
 * the HTML's declaration over the MIME charset would show mojibake). Decoded in two parts around the
 * label: it is ASCII between ASCII (= or a quote before it), so no character spans the cut.
 */
function relabelled(buf: Buffer, d: Declaration | undefined, read: (b: Buffer) => string): string {
  if (!d) return read(buf);
  // An XHTML page (javadoc's, older generators') says it twice: the prolog and the meta. Both change.
  const xml = xmlDeclaration(buf);
  if (xml && xml.start < d.start && xml.encoding !== "utf-8") {
    return `${read(buf.subarray(0, xml.start))}utf-8${read(buf.subarray(xml.end, d.start))}utf-8${read(buf.subarray(d.end))}`;
  }
  return `${read(buf.subarray(0, d.start))}utf-8${read(buf.subarray(d.end))}`;
}

/** An HTML body's bytes as text: UTF-8, or the legacy charset the document declares. */
export function htmlText(buf: Buffer, what: string): string {
  // A byte order mark wins over any declaration, as in a browser.
  const bom = bomEncoding(buf);
  if (bom === "utf-8") {
    // Read as UTF-8 whatever it declares; a stale legacy declaration is changed to say so.
    const d = prescan(buf);
    return relabelled(buf, d && d.encoding !== "utf-8" ? d : undefined, (b) => utf8(b, what));
  }
  const d = legacyDeclaration(buf);
  if (isUtf8(buf)) {
    if (!d) return utf8(buf, what);
    // Pure ASCII reads alike in every charset that keeps ASCII, and right by the declaration in one
    // that does not (ISO-2022-JP's escapes). Other valid UTF-8 under a legacy declaration (a stale
    // template's meta) is the UTF-8 it is. Either is sent as UTF-8 and declared so, for a client that
    // believes the HTML's declaration over the MIME charset.
    if (/^[\x00-\x7f]*$/.test(buf.toString("latin1"))) {
      try {
        return relabelled(buf, d, (b) => decode(d.encoding, b));
      } catch {
        return utf8(buf, what);
      }
    }
    return relabelled(buf, d, (b) => utf8(b, what));
  }
  if (!d) return utf8(buf, what);
  try {
    return relabelled(buf, d, (b) => decode(d.encoding, b));
  } catch {
    // Bytes the declared charset has no character for: neither reading is right.
    return utf8(buf, what);
  }
}

/** Bytes that are not UTF-8 but may be HTML in a legacy charset it declares: worth decoding by it before deciding what stdin is. */
export function declaresLegacyCharset(buf: Buffer): boolean {
  return !isUtf8(buf) && legacyDeclaration(buf) !== undefined;
}
