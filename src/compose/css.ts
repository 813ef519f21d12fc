/**
 * `--inline-css`: the rules of <style> blocks copied onto the elements they
 * match (juice, loaded only when the HTML has a <style>), for clients that
 * drop <style>. Media queries and @font-face stay in a <style> block, where
 * the clients that read them find them; so do the rules juice cannot copy
 * onto an element (see keptApart).
 */
import { Parser } from "htmlparser2";

/**
 * At-rules whose rules juice would lose: it drops @supports, @container and @page blocks, and
 * its CSS parser garbles @layer's (".b: undefined;"). They stay as written, for the clients
 * that read <style>.
 */
const KEPT_AT_RULES = new Set([
  "supports",
  "layer",
  "container",
  "page",
  "scope",
  "starting-style",
  "property",
  "counter-style",
  "font-feature-values",
  "document",
  "-moz-document",
]);

/** A selector with a pseudo-element: no element to copy it onto (juice drops the rule). */
const PSEUDO_ELEMENT = /::|:(?:before|after|first-line|first-letter)\b/i;

/** From `at` (a quote), just past the string it opens (an unclosed one ends at its line, as CSS has it). */
function skipString(css: string, at: number): number {
  const q = css[at];
  let j = at + 1;
  while (j < css.length && css[j] !== q && css[j] !== "\n") j += css[j] === "\\" ? 2 : 1;
  return Math.min(j + 1, css.length);
}

/** From `at` (a "{"), just past the matching "}"; strings and comments skipped. */
function skipBalanced(css: string, at: number): number {
  let depth = 0;
  let i = at;
  // Bounded: each turn moves at least one character.
  while (i < css.length) {
    const c = css[i];
    if (c === "/" && css[i + 1] === "*") {
      const close = css.indexOf("*/", i + 2);
      i = close < 0 ? css.length : close + 2;
      continue;
    }
    if (c === '"' || c === "'") {
      i = skipString(css, i);
      continue;
    }
    if (c === "{") depth++;
    else if (c === "}" && --depth <= 0) return i + 1;
    i++;
  }
  return css.length;
}

/** A style block's CSS split: what juice may inline, and the top-level blocks it would lose (as written, in order). */
export function keptApart(css: string): { inlinable: string; kept: string } {
  let inlinable = "";
  let kept = "";
  // The sheet's leading @imports (a web font's, fonts.googleapis.com, which Apple Mail loads): juice
  // drops them. They go first in the kept block, where an @import must be to count.
  let imports = "";
  let leading = true;
  let at = 0;
  let i = 0;
  // Bounded: each turn moves past a comment, a statement or a block.
  while (i < css.length) {
    const c = css[i]!;
    if (/\s/.test(c) || c === "}" || c === ";") {
      i++;
      continue;
    }
    if (c === "/" && css[i + 1] === "*") {
      const close = css.indexOf("*/", i + 2);
      i = close < 0 ? css.length : close + 2;
      continue;
    }
    // The prelude: up to the block's "{" or a statement's ";".
    let j = i;
    // A quoted string in it (an attribute selector's value, an @import's address) is skipped whole; it
    // went to the first "}" further on, so a[title="x"] took the next @supports block into its prelude.
    while (j < css.length && css[j] !== "{" && css[j] !== ";")
      j = css[j] === '"' || css[j] === "'" ? skipString(css, j) : j + 1;
    if (j >= css.length || css[j] === ";") {
      const word = /^@([-\w]+)/.exec(css.slice(i, j))?.[1]?.toLowerCase();
      if (word === "import" && leading) {
        inlinable += css.slice(at, i);
        imports += `${css.slice(i, j + 1).trim()}${css[j] === ";" ? "" : ";"}\n`;
        at = Math.min(j + 1, css.length);
      } else if (word !== "charset" && word !== "layer") leading = false;
      i = j + 1;
      continue;
    }
    leading = false;
    const end = skipBalanced(css, j);
    const prelude = css.slice(i, j);
    const atName = /^@([-\w]+)/.exec(prelude)?.[1]?.toLowerCase();
    if (atName !== undefined ? KEPT_AT_RULES.has(atName) : PSEUDO_ELEMENT.test(prelude)) {
      inlinable += css.slice(at, i);
      kept += `${css.slice(i, end)}\n`;
      at = end;
    }
    i = end;
  }
  return { inlinable: inlinable + css.slice(at), kept: imports + kept };
}

/**
 * Whether a <style> block's media applies on any screen: none given, or a query of its list that is
 * all or screen alone (`media="screen, projection"` of older templates, `only screen`). One with a
 * condition (`screen and (max-width: 600px)`) or for print is not.
 */
function onScreen(media: string | undefined): boolean {
  if (media === undefined || media.trim() === "") return true;
  return media.split(",").some((q) => /^(?:only\s+)?(?:all|screen)$/i.test(q.trim()));
}

/** Each <style> block's rules juice would lose, moved to a block of their own that juice leaves as it is (data-embed). */
function setApart(html: string): string {
  const blocks: { tag: number; start: number; end: number; attrs: Record<string, string> }[] = [];
  let open: { tag: number; start: number; attrs: Record<string, string> } | undefined;
  const parser: Parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === "style") open = { tag: parser.startIndex, start: parser.endIndex + 1, attrs };
      },
      onclosetag(name, isImplied) {
        if (name !== "style" || !open) return;
        blocks.push({
          tag: open.tag,
          start: open.start,
          end: isImplied ? html.length : parser.startIndex,
          attrs: open.attrs,
        });
        open = undefined;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  let out = "";
  let at = 0;
  for (const b of blocks) {
    if (b.attrs["data-embed"] !== undefined) continue;
    // A sheet for another medium (<style media="print">, a linked print.css): its rules on the elements would apply on
    // screen too (a print sheet's "display: none" hid the menu in the mail). It stays a block of its medium.
    if (!onScreen(b.attrs.media)) {
      out += `${html.slice(at, b.tag)}<style data-embed`;
      at = b.tag + "<style".length;
      continue;
    }
    const { inlinable, kept } = keptApart(html.slice(b.start, b.end));
    if (kept === "") continue;
    const close = html.indexOf(">", b.end) + 1 || html.length;
    const media = b.attrs.media ? ` media="${b.attrs.media.replace(/&/g, "&amp;").replace(/"/g, "&quot;")}"` : "";
    out += `${html.slice(at, b.start)}${inlinable}${html.slice(b.end, close)}<style data-embed${media}>\n${kept}</style>`;
    at = close;
  }
  return out + html.slice(at);
}

export async function inlineCss(html: string): Promise<string> {
  if (!/<style[\s>]/i.test(html)) return html;
  const { default: juice } = await import("juice");
  return juice(setApart(html), {
    preserveMediaQueries: true,
    preserveFontFaces: true,
    preserveKeyFrames: true,
    preservePseudos: true,
    applyWidthAttributes: true,
    applyHeightAttributes: false,
  });
}
