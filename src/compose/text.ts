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
    else if (c.name === "thead" || c.name === "tbody" || c.name === "tfoot") for (const r of c.children ?? []) if (r.type === "tag" && r.name === "tr") out.push(r);
  }
  return out;
}

export async function textFromHtml(html: string): Promise<string> {
  const { convert } = await import("html-to-text");
  // Counted roughly (a row in a comment counts too): enough to choose how tables are laid out.
  let rows = 0;
  for (let i = html.indexOf("<tr"); i >= 0 && rows <= ALIGNED_ROWS; i = html.indexOf("<tr", i + 3)) rows++;
  const text = convert(html, {
    wordwrap: 78,
    formatters: {
      altText: (elem, _walk, builder) => {
        const alt = elem.attribs?.["alt"]?.trim();
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
      rows > ALIGNED_ROWS ? { selector: "table", format: "rowsTable" } : { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false, maxColumnWidth: 40 } },
      // A link whose text is its address is said once; links to a place on the page or to a part not at all.
      { selector: "a", options: { hideLinkHrefIfSameAsText: true, noAnchorUrl: true, linkBrackets: ["[", "]"] } },
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
