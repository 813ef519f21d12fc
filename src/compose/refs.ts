/**
 * The image references of an HTML body, found by a real HTML parser
 * (htmlparser2: comments, scripts and attribute quoting are its business,
 * not a regular expression's), with where each attribute sits in the text,
 * so that a rewrite changes those attributes and leaves every other byte as
 * it was written.
 */
import { Parser } from "htmlparser2";

/** One attribute that holds image references. */
export interface RefAttribute {
  tag: string;
  /** Attribute name, lower case. */
  name: string;
  /** Its value, entities decoded. */
  value: string;
  /** Where the whole attribute (name, "=", quoted value) is in the HTML. */
  start: number;
  end: number;
  /** The references in it: the value itself (src), or each url() of a style. */
  refs: string[];
}

/** Attributes whose whole value is one image address. */
const IMAGE_ATTRS: Record<string, ReadonlySet<string>> = {
  img: new Set(["src"]),
  // Old-school e-mail layouts put backgrounds in attributes.
  body: new Set(["background"]),
  table: new Set(["background"]),
  tr: new Set(["background"]),
  td: new Set(["background"]),
  th: new Set(["background"]),
};

/** url(...) in a CSS declaration list: unquoted, or in single or double quotes. */
const CSS_URL = /url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)/gi;

export function cssUrls(style: string): string[] {
  return [...style.matchAll(CSS_URL)].map((m) => (m[1] ?? m[2] ?? m[3] ?? "").trim());
}

/** Cheap test first: HTML without these cannot reference an image, and the parser is not loaded. */
export function mayReferenceImages(html: string): boolean {
  return /\b(?:src|background)\s*=|url\(/i.test(html);
}

export function findRefAttributes(html: string): RefAttribute[] {
  const found: RefAttribute[] = [];
  let tag = "";
  const parser: Parser = new Parser(
    {
      onopentagname(name) {
        tag = name;
      },
      onattribute(name, value) {
        const start = parser.startIndex;
        const end = parser.endIndex;
        if (IMAGE_ATTRS[tag]?.has(name)) {
          if (value.trim() !== "") found.push({ tag, name, value, start, end, refs: [value.trim()] });
        } else if (name === "style") {
          const refs = cssUrls(value).filter((r) => r.trim() !== "");
          if (refs.length > 0) found.push({ tag, name, value, start, end, refs });
        }
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return found;
}

export const attrEscape = (s: string) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;");

/**
 * The HTML with the references `replace` maps (to cid:...) rewritten; an
 * attribute with nothing to rewrite is left byte for byte as it was.
 */
export function rewriteRefs(
  html: string,
  attrs: readonly RefAttribute[],
  replace: (ref: string) => string | undefined,
): string {
  let out = "";
  let at = 0;
  for (const a of attrs) {
    let value: string;
    if (a.name === "style") {
      let changed = false;
      value = a.value.replace(CSS_URL, (whole, d?: string, s?: string, u?: string) => {
        const to = replace((d ?? s ?? u ?? "").trim());
        if (to === undefined) return whole;
        changed = true;
        return `url(${to})`;
      });
      if (!changed) continue;
    } else {
      const to = replace(a.value.trim());
      if (to === undefined) continue;
      value = to;
    }
    out += `${html.slice(at, a.start)}${a.name}="${attrEscape(value)}"`;
    at = a.end;
  }
  return out + html.slice(at);
}

/** The href of the document's first `<base href>`, as browsers take it. */
export function findBaseHref(html: string): string | undefined {
  let href: string | undefined;
  const parser: Parser = new Parser(
    {
      onopentag(name, attrs) {
        if (href === undefined && name === "base" && attrs.href !== undefined) href = attrs.href;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return href;
}
