/**
 * The text/plain alternative of an HTML body (html-to-text, loaded only when
 * a message needs one): headings and paragraphs as lines, links as
 * "text [url]", tables as aligned columns, images by their alt text.
 */
export async function textFromHtml(html: string): Promise<string> {
  const { convert } = await import("html-to-text");
  const text = convert(html, {
    wordwrap: 78,
    formatters: {
      altText: (elem, _walk, builder) => {
        const alt = elem.attribs?.["alt"]?.trim();
        if (alt) builder.addInline(alt);
      },
    },
    selectors: [
      // Every table, not only those named in options: a report's tables are its content.
      { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false, maxColumnWidth: 40 } },
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
