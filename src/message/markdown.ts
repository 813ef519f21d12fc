/**
 * Markdown bodies, rendered with marked (GFM). marked is imported only here
 * and only when a Markdown body is given: start-up time of every other send
 * does not pay for it.
 *
 * Raw HTML in the Markdown is escaped (shown as text) unless allowHtml, and
 * links or images with a script-capable scheme lose their URL: a
 * notification built from a commit message or a log must not become markup.
 */
import type { Token, Tokens } from "marked";
import { escapeHtml } from "../core/message.js";
import { PLACEHOLDER_SOURCE } from "./template.js";

export interface MarkdownOptions {
  /** Keep raw HTML (and any link scheme) as written: only for Markdown you trust. */
  allowHtml: boolean;
}

const UNSAFE_LINK = /^\s*(?:javascript|vbscript|data|file):/i;
const SAFE_DATA_IMAGE = /^\s*data:image\/(?:png|gif|jpe?g|webp);base64,[A-Za-z0-9+/=\s]+$/i;

/** A YAML (---) or TOML (+++) block's lines: keys, list items, indented values, comments. */
const YAML_LINE = /^(?:[A-Za-z0-9_"'][^:]*:(?:\s.*)?|-(?:\s.*)?|\s+\S.*|#.*|\s*)$/;
const TOML_LINE = /^(?:[A-Za-z0-9_"'.-]+\s*=.*|\[[^\]]+\]\s*|\s+\S.*|#.*|\s*)$/;

/**
 * A Markdown file's front matter (the `---` YAML block of Jekyll, Hugo, MkDocs, Obsidian, or
 * Hugo's `+++` TOML) is the file's metadata, not its text: GFM would render it as a rule and a
 * heading of "title: ... author: ...". It is taken off before rendering, and off the text part.
 * Only a block at the very start, closed, whose every line reads as YAML (or TOML) is one.
 */
export function stripFrontMatter(source: string): string {
  const open = /^(---|\+\+\+)[ \t]*\r?\n/.exec(source);
  if (!open) return source;
  const toml = open[1] === "+++";
  const lines = source.slice(open[0].length).split("\n");
  // Bounded: a front matter block is short; a file that only starts with a rule is not one.
  for (let i = 0; i < Math.min(lines.length, 500); i++) {
    const line = lines[i]!.replace(/\r$/, "");
    if (toml ? line.trimEnd() === "+++" : /^(?:---|\.\.\.)\s*$/.test(line)) {
      if (i === 0) return source;
      return lines
        .slice(i + 1)
        .join("\n")
        .replace(/^\s*\n/, "");
    }
    if (!(toml ? TOML_LINE : YAML_LINE).test(line)) return source;
  }
  return source;
}

/** GitHub's alert kinds: the title shown, and the colour of its bar and title (GitHub's light theme). */
const ALERTS: Record<string, readonly [string, string]> = {
  note: ["Note", "#0969da"],
  tip: ["Tip", "#1a7f37"],
  important: ["Important", "#8250df"],
  warning: ["Warning", "#9a6700"],
  caution: ["Caution", "#d1242f"],
};
const ALERT_MARK = /^\[!(note|tip|important|warning|caution)\][ \t]*(?:\n|$)/i;

/**
 * A GitHub alert (`> [!WARNING]` alone on the first line of a block quote, then its text), as
 * GitHub shows it in READMEs, release notes and job summaries: what a CI job writes to its summary
 * is often mailed as well. Without this the mail said "[!WARNING]" in an ordinary quote. The quote's
 * tokens without the mark, or undefined for any other quote (a mark with nothing after it, or words
 * on its line, is not an alert on GitHub either).
 */
function githubAlert(tokens: Token[]): { kind: string; tokens: Token[] } | undefined {
  const first = tokens[0];
  if (first?.type !== "paragraph") return undefined;
  const para = first as Tokens.Paragraph;
  const lead = para.tokens[0];
  const mark = lead?.type === "text" ? ALERT_MARK.exec((lead as Tokens.Text).text) : null;
  if (!mark) return undefined;
  const text = (lead as Tokens.Text).text.slice(mark[0].length);
  const inline = text ? [{ ...(lead as Tokens.Text), raw: text, text }, ...para.tokens.slice(1)] : para.tokens.slice(1);
  // The mark alone in its paragraph: the alert's text is the blocks after it (a list, a code block).
  const rest = inline.length > 0 ? [{ ...para, tokens: inline }, ...tokens.slice(1)] : tokens.slice(1);
  if (!rest.some((t) => t.type !== "space")) return undefined;
  return { kind: mark[1]!.toLowerCase(), tokens: rest };
}

export async function renderMarkdown(source: string, opts: MarkdownOptions): Promise<string> {
  const [{ Marked }, { default: footnotes }] = await Promise.all([import("marked"), import("marked-footnote")]);
  const marked = new Marked({ gfm: true, async: false });
  // GFM footnotes ("text[^1]" and "[^1]: the note"), numbered and listed at the end as on GitHub. The
  // list's "Footnotes" heading is for screen readers, hidden on GitHub by a class no mail client has:
  // a rule sets the notes apart instead (the heading is taken out below).
  marked.use(footnotes({ footnoteDivider: true }));
  /** The items of numbered lists: a task item there keeps its number. */
  const numbered = new WeakSet<object>();
  marked.use({
    renderer: {
      blockquote({ tokens }) {
        const alert = githubAlert(tokens);
        if (!alert) return false;
        const [title, color] = ALERTS[alert.kind]!;
        return (
          `<blockquote style="margin:0 0 16px;padding:0 1em;border-left:4px solid ${color}">\n` +
          `<p style="margin:0 0 8px;color:${color};font-weight:600">${title}</p>\n${this.parser.parse(alert.tokens)}</blockquote>\n`
        );
      },
      // A task list item ("- [x] build") is a checkbox to marked (<input disabled type=checkbox>), which
      // Gmail and Outlook strip from mail: done and not done read the same. Ballot-box characters say it
      // in every client, and in the HTML-to-text of any reader; in a bulleted list the item loses its
      // bullet, as on GitHub (a numbered one keeps its number).
      checkbox({ checked }) {
        return checked ? "&#9745; " : "&#9744; ";
      },
      list(list) {
        if (list.ordered) for (const item of list.items) numbered.add(item);
        return false;
      },
      listitem(item) {
        if (!item.task || numbered.has(item)) return false;
        return `<li style="list-style-type:none">${this.parser.parse(item.tokens)}</li>\n`;
      },
    },
  });
  if (!opts.allowHtml) {
    marked.use({
      renderer: {
        html({ text, block }) {
          // A block of HTML becomes a paragraph of text; inline tags stay inline.
          return block ? `<p>${escapeHtml(text.trim())}</p>\n` : escapeHtml(text);
        },
        link({ href, tokens }) {
          if (!UNSAFE_LINK.test(href)) return false;
          return this.parser.parseInline(tokens);
        },
        image({ href, text }) {
          if (!UNSAFE_LINK.test(href) || SAFE_DATA_IMAGE.test(href)) return false;
          return escapeHtml(text);
        },
      },
    });
  }
  return marked.parse(source, { async: false }).replace(FOOTNOTES_HEADING, "$1");
}

const FOOTNOTES_HEADING =
  /(<section class="footnotes" data-footnotes>\n)<h2 id="footnote-label" class="sr-only">Footnotes<\/h2>\n/;

/**
 * A Markdown template (batch): rendered once, its {{placeholders}} kept as
 * they are, so they can be filled per row (HTML-escaped) in the HTML and
 * as they are in the text. Placeholders are swapped for plain tokens
 * before rendering: marked would otherwise percent-encode them in URLs.
 */
export async function renderMarkdownTemplate(source: string, opts: MarkdownOptions): Promise<string> {
  const names: string[] = [];
  const nonce = Math.random().toString(36).slice(2, 8).toUpperCase();
  const token = (i: number) => `MAILSENDVAR${nonce}X${i}X`;
  // Each placeholder comes back with its default, if it has one ({{name|there}}).
  const shielded = source.replace(
    new RegExp(PLACEHOLDER_SOURCE, "gu"),
    (_, name: string, fallback: string | undefined) =>
      token(names.push(`{{${name}${fallback !== undefined ? `|${fallback}` : ""}}}`) - 1),
  );
  const html = await renderMarkdown(shielded, opts);
  return html.replace(new RegExp(`MAILSENDVAR${nonce}X(\\d+)X`, "g"), (_, i: string) => names[Number(i)]!);
}
