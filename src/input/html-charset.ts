/**
 * An HTML file in a legacy charset that says so (`<meta charset="iso-8859-1">`, the http-equiv
 * form, or an XHTML `<?xml encoding=...?>` prolog), as older report generators, Windows tools and
 * javadoc write them: a browser reads it by that declaration, so mailsend does too. The text is
 * then sent as UTF-8 (the JSON of REST, `charset=utf-8` over SMTP), so the declaration is changed
 * to say utf-8: a client that believed the old one would show mojibake. HTML that is not UTF-8 and
 * declares nothing, or declares UTF-8, is still refused: there is nothing to read it by.
 */
import { isUtf8 } from "node:buffer";
import { TextDecoder } from "node:util";
import { utf8 } from "./read.js";

/** Where a browser's prescan looks for the declaration: the first 1024 bytes. */
const PRESCAN = 1024;
const META = /(<meta\b[^>]*?\bcharset\s*=\s*["']?)([A-Za-z0-9._:-]+)/i;
const XML = /^(\uFEFF?<\?xml\b[^>]*?\bencoding\s*=\s*["'])([A-Za-z0-9._:-]+)/i;

/** The decoder the file's declaration names, when it names one that is not UTF-8 (or UTF-16, which no meta can declare). */
function declaredDecoder(buf: Buffer): TextDecoder | undefined {
  const head = buf.subarray(0, PRESCAN).toString("latin1");
  const label = META.exec(head)?.[2] ?? XML.exec(head)?.[2];
  if (!label) return undefined;
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label, { fatal: true });
  } catch {
    return undefined;
  }
  return /^utf-(8|16)/.test(decoder.encoding) ? undefined : decoder;
}

/** windows-1252's 0x80-0x9F (WHATWG index; the five it leaves undefined stay C1 controls, as browsers read them). */
const CP1252_HIGH = "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

function decode(decoder: TextDecoder, buf: Buffer): string {
  // Node before 23 decodes windows-1252 (the label iso-8859-1 means too) as Latin-1: "€" and the quotes came out as C1 controls.
  if (decoder.encoding === "windows-1252") return buf.toString("latin1").replace(/[\u0080-\u009f]/g, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]!);
  return decoder.decode(buf);
}

/** An HTML body's bytes as text: UTF-8, or the legacy charset the document declares. */
export function htmlText(buf: Buffer, what: string): string {
  const decoder = declaredDecoder(buf);
  if (isUtf8(buf)) {
    if (!decoder) return utf8(buf, what);
    // Pure ASCII reads alike in every charset that keeps ASCII, and right by the declaration in one
    // that does not (ISO-2022-JP's escapes). Other valid UTF-8 under a legacy declaration (a stale
    // template's meta) is the UTF-8 it is. Either is sent as UTF-8 and declared so, for a client that
    // believes the HTML's declaration over the MIME charset.
    if (/^[\x00-\x7f]*$/.test(buf.toString("latin1"))) {
      try {
        return relabel(decode(decoder, buf));
      } catch {
        return utf8(buf, what);
      }
    }
    return relabel(utf8(buf, what));
  }
  if (!decoder) return utf8(buf, what);
  let text: string;
  try {
    text = decode(decoder, buf);
  } catch {
    // Bytes the declared charset has no character for: neither reading is right.
    return utf8(buf, what);
  }
  return relabel(text);
}

/** The document's charset declaration (meta or XML prolog) changed to utf-8, what it is sent as. */
function relabel(text: string): string {
  return text.replace(XML, "$1utf-8").replace(META, "$1utf-8");
}

/** Bytes that are not UTF-8 but may be HTML in a legacy charset it declares: worth decoding by it before deciding what stdin is. */
export function declaresLegacyCharset(buf: Buffer): boolean {
  return !isUtf8(buf) && declaredDecoder(buf) !== undefined;
}
