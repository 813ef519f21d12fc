/**
 * A report's own stylesheets: `<link rel="stylesheet" href="base.css">` to a local file becomes
 * a `<style>` block holding that file, as a browser would apply it. Mail clients load no linked
 * stylesheet (a local path means nothing to them), so without this a coverage or test report
 * arrives unstyled. The files obey the image rules (src/compose/images.ts): relative to the HTML
 * file's directory, only from under the base directory, a missing one is an error naming it.
 * `http(s):` and `//host` sheets are left as written (clients do not load them either; said with -v).
 * A local sheet's `@import`s (and those of a `<style>` block) are read in the same way, in place:
 * a client cannot load them any more than the link, and --inline-css (juice) drops them.
 * The elements are found by htmlparser2, and only those bytes change.
 */
import { readFile, stat } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { Parser } from "htmlparser2";
import { MailsendError } from "../core/errors.js";
import { shownPath } from "../core/read.js";
import { documentPath, localPath, resolveInside } from "./images.js";
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
  /** For a sheet an `@import` brought in: the sheet that imports it (its ref), or "<style>". */
  importedBy?: string;
}

/** Cheap test first: without these words there is no stylesheet link or import, and no parser is loaded. */
export function mayLinkStylesheets(html: string): boolean {
  return (/<link\b/i.test(html) && /stylesheet/i.test(html)) || (/<style/i.test(html) && /@import/i.test(html));
}

/** `rel` as the HTML standard reads it: space-separated tokens, any case; an alternate sheet is not applied. */
function appliedStylesheet(rel: string | undefined): boolean {
  const tokens = (rel ?? "").toLowerCase().split(/[\t\n\f\r ]+/);
  return tokens.includes("stylesheet") && !tokens.includes("alternate");
}

/** The text of a `<style>` element that has an `@import`, and where it sits in the HTML. */
export interface StyleImports {
  start: number;
  end: number;
}

export function findStylesheetLinks(html: string): StylesheetLink[] {
  return findStylesheets(html).links;
}

/** The stylesheet links, and the `<style>` elements whose text has an `@import`. */
export function findStylesheets(html: string): { links: StylesheetLink[]; styles: StyleImports[] } {
  const links: StylesheetLink[] = [];
  const styles: StyleImports[] = [];
  let styleAt = -1;
  const parser: Parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === "style") styleAt = parser.endIndex + 1;
        if (name !== "link" || !appliedStylesheet(attrs.rel) || !attrs.href?.trim()) return;
        const media = attrs.media?.trim();
        links.push({
          href: attrs.href.trim(),
          start: parser.startIndex,
          end: parser.endIndex + 1,
          ...(media && media.toLowerCase() !== "all" ? { media } : {}),
        });
      },
      onclosetag(name, isImplied) {
        if (name !== "style" || styleAt < 0) return;
        // An unclosed <style> runs to the end of the document.
        const end = isImplied ? html.length : parser.startIndex;
        if (/@import/i.test(html.slice(styleAt, end))) styles.push({ start: styleAt, end });
        styleAt = -1;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return { links, styles };
}

/** One `@import` rule at the head of a sheet. */
interface ImportRule {
  start: number;
  end: number;
  ref: string;
  /** What follows the address: `layer`, `supports()`, media queries. */
  conditions: string;
}

/** From `at`, past a quoted string or a balanced (...) group; else one character. */
function skipToken(css: string, at: number): number {
  const c = css[at];
  if (c === '"' || c === "'") {
    let i = at + 1;
    while (i < css.length && css[i] !== c && css[i] !== "\n") i += css[i] === "\\" ? 2 : 1;
    return Math.min(i + 1, css.length);
  }
  if (c === "(") {
    let depth = 0;
    let i = at;
    while (i < css.length) {
      if (css[i] === '"' || css[i] === "'") {
        i = skipToken(css, i);
        continue;
      }
      if (css[i] === "(") depth++;
      else if (css[i] === ")" && --depth === 0) return i + 1;
      i++;
    }
    return css.length;
  }
  return at + 1;
}

/** The end of a statement at-rule: just past its `;` (strings and parentheses skipped), or -1 when a block comes first. */
function statementEnd(css: string, at: number): number {
  let i = at;
  while (i < css.length) {
    const c = css[i];
    if (c === ";") return i + 1;
    if (c === "{" || c === "}") return -1;
    i = skipToken(css, i);
  }
  return css.length;
}

const IMPORT_ADDRESS =
  /^@import\s*(?:url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)|"([^"]*)"|'([^']*)')\s*([\s\S]*?)\s*;?$/i;

/**
 * The `@import` rules a browser applies: those at the head of the sheet, before any other rule
 * (only comments, `@charset` and `@layer a, b;` may come between); one further down is ignored.
 */
function leadingImports(css: string): ImportRule[] {
  const found: ImportRule[] = [];
  let i = 0;
  // Bounded: each turn moves past something, or stops.
  while (i < css.length) {
    const ws = /^[\s]+/.exec(css.slice(i, i + 256));
    if (ws) {
      i += ws[0].length;
      continue;
    }
    if (css.startsWith("/*", i)) {
      const close = css.indexOf("*/", i + 2);
      i = close < 0 ? css.length : close + 2;
      continue;
    }
    if (css.startsWith("<!--", i) || css.startsWith("-->", i)) {
      i += css.startsWith("<!--", i) ? 4 : 3;
      continue;
    }
    const word = /^@[A-Za-z-]+/.exec(css.slice(i, i + 32))?.[0].toLowerCase();
    if (word !== "@charset" && word !== "@layer" && word !== "@import") break;
    const end = statementEnd(css, i);
    if (end < 0) break;
    if (word === "@import") {
      const m = IMPORT_ADDRESS.exec(css.slice(i, end));
      if (m)
        found.push({
          start: i,
          end,
          ref: (m[1] ?? m[2] ?? m[3] ?? m[4] ?? m[5] ?? "").trim(),
          conditions: (m[6] ?? "").trim(),
        });
    }
    i = end;
  }
  return found;
}

/** An imported sheet's rules under the conditions its `@import` put on it (layer, supports(), media). */
function underConditions(css: string, conditions: string): string {
  let rest = conditions;
  let layer: string | undefined;
  let supports: string | undefined;
  const lm = /^layer(?:\(\s*([^)]*?)\s*\))?(?=\s|$)/i.exec(rest);
  if (lm) {
    layer = lm[1] ?? "";
    rest = rest.slice(lm[0].length).trim();
  }
  if (/^supports\(/i.test(rest)) {
    const end = skipToken(rest, "supports".length);
    supports = rest.slice("supports(".length, end - 1).trim();
    rest = rest.slice(end).trim();
  }
  let out = css.endsWith("\n") ? css : `${css}\n`;
  if (rest !== "" && rest.toLowerCase() !== "all") out = `@media ${rest} {\n${out}}\n`;
  if (supports !== undefined) out = `@supports (${supports}) {\n${out}}\n`;
  if (layer !== undefined) out = `@layer${layer ? ` ${layer}` : ""} {\n${out}}\n`;
  return out;
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

/** Imports within imports: deeper than this is a loop no browser follows either. */
const MAX_IMPORT_DEPTH = 16;

/** Reading the sheets of one message: the budget they share, and what was read. */
interface SheetReader {
  baseDir: string;
  htmlDir: string;
  total: number;
  sheets: EmbeddedStylesheet[];
  left: string[];
  /**
   * Each file checked and read once, by the path it resolved to: a sheet imported again (two
   * sheets that import a third, at every level of 16) costs no more file system calls, only its
   * bytes against the budget. Without it, a deep import tree would check and read the same few
   * files thousands of times before the budget stopped it.
   */
  files: Map<string, { real: string; size: number; css?: string }>;
}

/** A local sheet's file, checked as an image is, counted against the message's budget; undefined for one of `skip`. */
async function readSheet(
  r: SheetReader,
  ref: string,
  path: string,
  fromDir: string,
  skip?: ReadonlySet<string>,
): Promise<{ css: string; real: string } | undefined> {
  const target = resolve(fromDir, path);
  let file = r.files.get(target);
  if (!file) {
    const real = await resolveInside(ref, path, r.baseDir, fromDir, "stylesheet");
    file = { real, size: (await stat(real)).size };
    r.files.set(target, file);
  }
  const { real, size } = file;
  // As an image must be an image (images.ts): the text of any other file would be mailed inside a
  // <style> block, a link to .env or ~/.ssh/id_rsa as readily as one to a sheet. A browser too
  // applies a file as a stylesheet only when its type is text/css, which a local file's .css gives.
  if (!/\.css$/i.test(path)) {
    throw new MailsendError(
      "invalid_message",
      `stylesheet reference ${JSON.stringify(ref)} names ${shownPath(real)}, which is not a .css file; nothing was sent`,
      {
        hint: "Only .css files are embedded as stylesheets, so that a page cannot mail another file inside a <style> block. Give the sheet a .css name, or --no-embed to leave the reference as it is.",
      },
    );
  }
  if (skip?.has(real)) return undefined;
  r.total += size;
  if (r.total > MAX_STYLESHEET_BYTES) {
    throw new MailsendError(
      "too_large",
      `the stylesheets of this message add up to more than ${MAX_STYLESHEET_BYTES / 1024 / 1024} MiB (at ${JSON.stringify(ref)}, ${shownPath(real)}); nothing was sent`,
      {
        hint: "Give --no-embed to send the <link> elements as they are (clients will not load them).",
      },
    );
  }
  // A @charset is only valid as a sheet's first bytes, and means nothing in a <style> block (the HTML is text already).
  file.css ??= (await readFile(real, "utf8"))
    .replace(/^\uFEFF/, "")
    .replace(/^@charset\s+("[^"]*"|'[^']*')\s*;[ \t]*\r?\n?/i, "");
  r.sheets.push({ ref, path: real, bytes: size });
  return { css: file.css, real };
}

/**
 * A sheet's text as it goes into a `<style>` block: its local `@import`s replaced by the sheets
 * they name (each under its import's conditions, read by the same rules), its relative url()s
 * rebased from `sheetDir` to the HTML's directory. Remote imports stay, moved to the head of the
 * block, where an `@import` must be to count.
 */
async function sheetText(
  r: SheetReader,
  css: string,
  sheetDir: string,
  by: string,
  within: ReadonlySet<string>,
  pathOf: (ref: string) => string | undefined = (ref) => localPath(ref, "stylesheet"),
): Promise<{ head: string[]; body: string }> {
  const head: string[] = [];
  let body = "";
  let at = 0;
  for (const imp of leadingImports(css)) {
    body += css.slice(at, imp.start);
    at = imp.end;
    const path = imp.ref === "" ? undefined : pathOf(imp.ref);
    if (path === undefined) {
      if (imp.ref !== "") r.left.push(imp.ref);
      head.push(css.slice(imp.start, imp.end).trim());
      continue;
    }
    // A sheet that imports itself, or one that imports it: browsers skip that import, and so does this.
    const read = within.size >= MAX_IMPORT_DEPTH ? undefined : await readSheet(r, imp.ref, path, sheetDir, within);
    if (read === undefined) continue;
    r.sheets[r.sheets.length - 1]!.importedBy = by;
    const inner = await sheetText(
      r,
      read.css,
      dirname(resolve(sheetDir, path)),
      imp.ref,
      new Set([...within, read.real]),
    );
    if (imp.conditions === "") {
      head.push(...inner.head);
      body += inner.body.endsWith("\n") ? inner.body : `${inner.body}\n`;
    } else body += underConditions([...inner.head, inner.body].join("\n"), imp.conditions);
  }
  body += rebaseUrls(css.slice(at), sheetDir, r.htmlDir);
  return { head, body };
}

const joinSheet = (t: { head: string[]; body: string }) => (t.head.length ? `${t.head.join("\n")}\n` : "") + t.body;

/**
 * The HTML with each local stylesheet link replaced by a `<style>` block of the file, and the local
 * `@import`s of its `<style>` blocks by the files; the others (remote, data:) are returned in `left`
 * for the caller to mention.
 */
export async function embedStylesheets(
  html: string,
  baseDir: string,
  fromDir?: string,
  remoteBase = false,
): Promise<{ html: string; sheets: EmbeddedStylesheet[]; left: string[] }> {
  // The document's references (not a sheet's own imports) mean its <base href>'s server when it names one.
  const docPath = (ref: string) => documentPath(ref, remoteBase, "stylesheet");
  const { links, styles } = findStylesheets(html);
  const htmlDir = resolve(fromDir ?? baseDir);
  const r: SheetReader = { baseDir, htmlDir, total: 0, sheets: [], left: [], files: new Map() };
  const edits: { start: number; end: number; text: string }[] = [];
  for (const link of links) {
    const path = docPath(link.href);
    if (path === undefined) {
      r.left.push(link.href);
      continue;
    }
    const { css, real } = (await readSheet(r, link.href, path, htmlDir))!;
    // Rebased from where the link says the sheet is (not where its symlinks lead), as the HTML's own references are.
    const text = await sheetText(r, css, dirname(resolve(htmlDir, path)), link.href, new Set([real]));
    edits.push({ start: link.start, end: link.end, text: styleBlock(joinSheet(text), link.media) });
  }
  for (const style of styles) {
    const css = html.slice(style.start, style.end);
    if (!leadingImports(css).some((i) => i.ref !== "" && docPath(i.ref) !== undefined)) continue;
    const text = await sheetText(r, css, htmlDir, "<style>", new Set(), docPath);
    edits.push({ start: style.start, end: style.end, text: joinSheet(text).replace(/<\/(style)/gi, "<\\/$1") });
  }
  if (edits.length === 0) return { html, sheets: r.sheets, left: r.left };
  edits.sort((a, b) => a.start - b.start);
  let out = "";
  let at = 0;
  for (const e of edits) {
    out += html.slice(at, e.start) + e.text;
    at = e.end;
  }
  return { html: out + html.slice(at), sheets: r.sheets, left: r.left };
}
