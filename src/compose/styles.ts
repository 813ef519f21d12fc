/**
 * A report's own stylesheets: `<link rel="stylesheet" href="base.css">` to a local file becomes
 * a `<style>` block holding that file, as a browser would apply it. Mail clients load no linked
 * stylesheet (a local path means nothing to them), so without this a coverage or test report
 * arrives unstyled. The files obey the image rules (src/compose/images.ts): relative to the HTML
 * file's directory, only from under the base directory, a missing one is an error naming it.
 * `http(s):` and `//host` sheets are left as written (clients do not load them either; said with -v).
 * The elements are found by htmlparser2, and only those bytes change.
 */
import { readFile, stat } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { Parser } from "htmlparser2";
import { MailsendError } from "../core/errors.js";
import { shownPath } from "../input/read.js";
import { localPath, resolveInside } from "./images.js";
import { attrEscape } from "./refs.js";

/** All the stylesheets of one message together: a report's CSS is kilobytes; beyond this it is not a report's. */
export const MAX_STYLESHEET_BYTES = 2 * 1024 * 1024;

/** One `<link rel=stylesheet>` and where it sits in the HTML. */
export interface StylesheetLink {
  href: string;
  /** The media attribute, when it names anything but all media. */
  media?: string;
  start: number;
  end: number;
}

/** What became of one sheet, for -v and --dry-run. */
export interface EmbeddedStylesheet {
  ref: string;
  path: string;
  bytes: number;
}

/** Cheap test first: without these words there is no stylesheet link, and no parser is loaded. */
export function mayLinkStylesheets(html: string): boolean {
  return /<link\b/i.test(html) && /stylesheet/i.test(html);
}

/** `rel` as the HTML standard reads it: space-separated tokens, any case; an alternate sheet is not applied. */
function appliedStylesheet(rel: string | undefined): boolean {
  const tokens = (rel ?? "").toLowerCase().split(/[\t\n\f\r ]+/);
  return tokens.includes("stylesheet") && !tokens.includes("alternate");
}

export function findStylesheetLinks(html: string): StylesheetLink[] {
  const found: StylesheetLink[] = [];
  const parser: Parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name !== "link" || !appliedStylesheet(attrs.rel) || !attrs.href?.trim()) return;
        const media = attrs.media?.trim();
        found.push({ href: attrs.href.trim(), start: parser.startIndex, end: parser.endIndex + 1, ...(media && media.toLowerCase() !== "all" ? { media } : {}) });
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return found;
}


/** url(...) in CSS: unquoted, or in single or double quotes. */
const CSS_URL = /url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)/gi;

/**
 * A sheet's relative url()s mean the sheet's directory; in a <style> block of the HTML they would
 * mean the HTML's. Each becomes the same file's path from the HTML's directory (so image embedding,
 * and --inline-css copying a rule onto an element, find the file the sheet meant).
 */
export function rebaseUrls(css: string, sheetDir: string, htmlDir: string): string {
  if (resolve(sheetDir) === resolve(htmlDir)) return css;
  return css.replace(CSS_URL, (whole, dq?: string, sq?: string, bare?: string) => {
    const ref = (dq ?? sq ?? bare ?? "").trim();
    if (ref === "" || ref.startsWith("/") || ref.startsWith("#") || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(ref)) return whole;
    const [, path = "", rest = ""] = /^([^?#]*)(.*)$/s.exec(ref) ?? [];
    let rebased = relative(htmlDir, resolve(sheetDir, path));
    if (isAbsolute(rebased)) return whole;
    if (sep !== "/") rebased = rebased.split(sep).join("/");
    return `url("${(rebased || ".") + rest}")`;
  });
}

/** A sheet's text inside `<style>`: a BOM dropped, and no `</style` that would end the block early. */
function styleBlock(css: string, media: string | undefined): string {
  const body = css.replace(/^\uFEFF/, "").replace(/<\/(style)/gi, "<\\/$1");
  return `<style${media ? ` media="${attrEscape(media)}"` : ""}>\n${body}${body.endsWith("\n") ? "" : "\n"}</style>`;
}

/**
 * The HTML with each local stylesheet link replaced by a `<style>` block of the file; the others
 * (remote, data:) are returned in `left` for the caller to mention.
 */
export async function embedStylesheets(
  html: string,
  baseDir: string,
  fromDir?: string,
): Promise<{ html: string; sheets: EmbeddedStylesheet[]; left: string[] }> {
  const links = findStylesheetLinks(html);
  const sheets: EmbeddedStylesheet[] = [];
  const left: string[] = [];
  const blocks = new Map<StylesheetLink, string>();
  let total = 0;
  for (const link of links) {
    const path = localPath(link.href, "stylesheet");
    if (path === undefined) {
      left.push(link.href);
      continue;
    }
    const real = await resolveInside(link.href, path, baseDir, fromDir, "stylesheet");
    const size = (await stat(real)).size;
    total += size;
    if (total > MAX_STYLESHEET_BYTES) {
      throw new MailsendError("too_large", `the stylesheets of this message add up to more than ${MAX_STYLESHEET_BYTES / 1024 / 1024} MiB (at ${JSON.stringify(link.href)}, ${shownPath(real)}); nothing was sent`, {
        hint: "Give --no-embed to send the <link> elements as they are (clients will not load them).",
      });
    }
    // Rebased from where the link says the sheet is (not where its symlinks lead), as the HTML's own references are.
    const htmlDir = resolve(fromDir ?? baseDir);
    const css = rebaseUrls(await readFile(real, "utf8"), dirname(resolve(htmlDir, path)), htmlDir);
    blocks.set(link, styleBlock(css, link.media));
    sheets.push({ ref: link.href, path: real, bytes: size });
  }
  if (blocks.size === 0) return { html, sheets, left };
  let out = "";
  let at = 0;
  for (const link of links) {
    const block = blocks.get(link);
    if (block === undefined) continue;
    out += html.slice(at, link.start) + block;
    at = link.end;
  }
  return { html: out + html.slice(at), sheets, left };
}
