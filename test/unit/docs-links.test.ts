/**
 * The README and docs/ link to each other by relative paths and heading anchors: a link that
 * names a file or a heading that is not there fails here, not in a reader's browser.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PAGES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** Outside code blocks: the lines a Markdown renderer reads as text. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split("\n").filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    return !fenced;
  });
}

/** The anchors GitHub makes for a page's headings. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(text)) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const slug = m[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n ? `${slug}-${n}` : slug);
  }
  return anchors;
}

/** Relative links of a page, with the line they are on. */
function linksOf(text: string): { target: string; line: string }[] {
  const out: { target: string; line: string }[] = [];
  for (const line of proseLines(text)) {
    for (const m of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/i.test(m[1]!)) out.push({ target: m[1]!, line });
    }
  }
  return out;
}

describe("links between the README and docs/", () => {
  it("finds the pages", () => {
    expect(PAGES).toContain("docs/guide.md");
    expect(anchorsOf("# A: `b` c\n## A: b c\n")).toEqual(new Set(["a-b-c", "a-b-c-1"]));
  });

  for (const page of PAGES) {
    it(`${page}: every relative link names a file and a heading that exist`, () => {
      const text = readFileSync(join(ROOT, page), "utf8");
      const broken: string[] = [];
      for (const { target, line } of linksOf(text)) {
        const [path, anchor] = target.split("#", 2) as [string, string | undefined];
        const file = path === "" ? page : normalize(join(dirname(page), path));
        if (!existsSync(join(ROOT, file))) {
          broken.push(`${target} (no file ${file}): ${line.trim()}`);
          continue;
        }
        if (
          anchor !== undefined &&
          file.endsWith(".md") &&
          !anchorsOf(readFileSync(join(ROOT, file), "utf8")).has(anchor)
        ) {
          broken.push(`${target} (no heading #${anchor} in ${file}): ${line.trim()}`);
        }
      }
      expect(broken).toEqual([]);
    });
  }
});
