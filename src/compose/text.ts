/**
 * The text/plain alternative of an HTML body (html-to-text, loaded only when
 * a message needs one): headings and paragraphs as lines, links as
 * "text [url]", tables as aligned columns (a line per row, cells between " | ", in a report of
 * more than 1,000 rows), images by their alt text.
 */
/** Table rows beyond which columns are not aligned: aligning costs seconds for a report of 30,000 rows. */
const ALIGNED_ROWS = 1000;

type Node = { type: string; name?: string; children?: Node[] };

/** A table's rows, also those in its thead, tbody and tfoot. */
function rowsOf(table: Node): Node[] {
  const out: Node[] = [];
  for (const c of table.children ?? []) {
    if (c.type !== "tag") continue;
    if (c.name === "tr") out.push(c);
    else if (c.name === "thead" || c.name === "tbody" || c.name === "tfoot")
      for (const r of c.children ?? []) if (r.type === "tag" && r.name === "tr") out.push(r);
  }
  return out;
}

/** Whether an element shows anything a text part could say: text, or an image's alt text. */
function saysSomething(elem: DomNode): boolean {
  for (const c of elem.children ?? []) {
    if (c.type === "text" && (c.data ?? "").trim() !== "") return true;
    if (c.type === "tag" && c.name === "img" && (c.attribs?.alt ?? "").trim() !== "") return true;
    if (c.type === "tag" && saysSomething(c)) return true;
  }
  return false;
}

type DomNode = { type: string; name?: string; data?: string; attribs?: Record<string, string>; children?: DomNode[] };

export async function textFromHtml(html: string): Promise<string> {
  const { convert } = await import("html-to-text");
  // Counted roughly (a row in a comment counts too): enough to choose how tables are laid out.
  let rows = 0;
  for (let i = html.indexOf("<tr"); i >= 0 && rows <= ALIGNED_ROWS; i = html.indexOf("<tr", i + 3)) rows++;
  const text = convert(html, {
    wordwrap: 78,
    // Whole: by default html-to-text cuts its input at 16 MiB characters, which would lose the end of a big report's text part.
    limits: { maxInputLength: Number.MAX_SAFE_INTEGER },
    formatters: {
      altText: (elem, _walk, builder) => {
        const alt = elem.attribs?.alt?.trim();
        if (alt) builder.addInline(alt);
      },
      // A big report's tables: a line per row, its cells between " | ".
      rowsTable: (elem, walk, builder, options) => {
        builder.openBlock({ leadingLineBreaks: options.leadingLineBreaks ?? 1 });
        for (const row of rowsOf(elem as Node)) {
          let first = true;
          for (const cell of row.children ?? []) {
            if (cell.type !== "tag" || (cell.name !== "td" && cell.name !== "th")) continue;
            if (!first) builder.addLiteral(" | ");
            walk((cell.children ?? []) as never, builder);
            first = false;
          }
          builder.addLineBreak();
        }
        builder.closeBlock({ trailingLineBreaks: options.trailingLineBreaks ?? 1 });
      },
    },
    selectors: [
      // Every table, not only those named in options: a report's tables are its content.
      rows > ALIGNED_ROWS
        ? { selector: "table", format: "rowsTable" }
        : { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false, maxColumnWidth: 40 } },
      // A link whose text is its address is said once; links to a place on the page or to a part not at all.
      // A link with nothing to show (a report's hidden prev/next links, `<a href="m_py.html"/>`) is left out when its address
      // is relative: html-to-text would write the bare address, glued to the next one ("m_py.htmlm_py.html").
      {
        selector: "a",
        options: {
          hideLinkHrefIfSameAsText: true,
          noAnchorUrl: true,
          linkBrackets: ["[", "]"],
          // html-to-text 9 passes the element third (its types name only two).
          pathRewrite: (href: string, ...rest: unknown[]) =>
            /^[A-Za-z][A-Za-z0-9+.-]*:|^\/\//.test(href) || !rest[1] || saysSomething(rest[1] as DomNode) ? href : "",
        },
      },
      // cid: and file addresses mean nothing in a text part; the alt text is what the image says.
      { selector: "img", format: "altText" },
      { selector: "h1", options: { uppercase: false } },
      { selector: "h2", options: { uppercase: false } },
      { selector: "h3", options: { uppercase: false } },
      { selector: "h4", options: { uppercase: false } },
      { selector: "h5", options: { uppercase: false } },
      { selector: "h6", options: { uppercase: false } },
    ],
  });
  return text.endsWith("\n") ? text : `${text}\n`;
}
