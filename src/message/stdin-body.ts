/**
 * A body piped to `mailsend send` without a body flag: is it HTML or text?
 *
 * `df -h | mailsend send ...` is how cron users write it (it is how `mail -s`
 * works), and `./report.sh | mailsend send ...` pipes a finished HTML page.
 * The rule is conservative: stdin is HTML only when it STARTS as HTML, so that
 * text with something tag-like inside (`<none>` from docker images, `a < b`,
 * `at <anonymous>`, `List<String>`, an address `<a@example.com>`) is never
 * read as markup. Documented in the README ("Piping a body") and in
 * `mailsend send --help`; `--stdin-type html|text` overrides it.
 *
 *   After a byte-order mark, white space, an `<?xml ...?>` prolog and HTML
 *   comments, stdin is HTML when it begins with
 *     - `<!DOCTYPE html` (any case), or
 *     - the start tag of an HTML element (`<html>`, `<p>`, `<table class=x>`,
 *       `<div>`, `<h1>`, `<b>`, ...: a name from the HTML standard's list of
 *       elements, followed by white space, `>` or `/>`), whose `>` comes
 *       within the first 1000 characters, and the text then has an end tag of
 *       an HTML element somewhere (`</p>`, `</table>`), unless that first
 *       element is one that has none (`<br>`, `<img ...>`, `<meta ...>`).
 *   Everything else is text.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { fstatSync } = process.getBuiltinModule("node:fs");
import { binaryKind } from "../core/binary.js";
import { MailsendError } from "../core/errors.js";

export type StdinType = "html" | "text";

export interface StdinDecision {
  type: StdinType;
  /** Why, in words (shown by -v and in --json). */
  reason: string;
}

/** The elements of the HTML standard (including the obsolete ones old report generators still write). */
const HTML_ELEMENTS = new Set(
  (
    "a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption center cite code col colgroup " +
    "data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure font footer form frame frameset " +
    "h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu meta meter nav " +
    "noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script search section select slot small " +
    "source span strike strong style sub summary sup svg table tbody td template textarea tfoot th thead time title tr track tt u ul var video wbr"
  ).split(" "),
);

/** Elements without an end tag. */
const VOID_ELEMENTS = new Set("area base br col embed hr img input link meta param source track wbr".split(" "));

/** How far into stdin the start tag must close. */
const TAG_WITHIN = 1000;

/** Skip what may come before the first element: BOM, white space, an XML prolog, comments. */
function skipPreamble(s: string): string {
  let rest = s.replace(/^\uFEFF/, "");
  for (let i = 0; i < 100; i++) {
    const trimmed = rest.replace(/^\s+/, "");
    if (trimmed.startsWith("<!--")) {
      const end = trimmed.indexOf("-->", 4);
      if (end < 0) return trimmed;
      rest = trimmed.slice(end + 3);
    } else if (/^<\?xml[\s?]/i.test(trimmed)) {
      const end = trimmed.indexOf("?>");
      if (end < 0) return trimmed;
      rest = trimmed.slice(end + 2);
    } else return trimmed;
  }
  return rest;
}

/** Decide, by the rule above, whether a piped body is HTML or text. */
export function classifyStdin(body: string): StdinDecision {
  const start = skipPreamble(body);
  if (/^<!doctype\s+html[\s>]/i.test(start)) return { type: "html", reason: "it starts with <!DOCTYPE html>" };
  const tag = /^<([a-zA-Z][a-zA-Z0-9]*)(?=[\s/>])/.exec(start);
  const name = tag?.[1]?.toLowerCase();
  const asText = (reason: string): StdinDecision => ({ type: "text", reason });
  if (name === undefined)
    return asText(
      "it does not start with HTML markup (<!DOCTYPE html>, <html> or an element such as <p>, <table>, <div>)",
    );
  if (!HTML_ELEMENTS.has(name)) return asText(`it starts with <${tag![1]}>, which is not an HTML element`);
  const close = start.indexOf(">");
  if (close < 0 || close > TAG_WITHIN) return asText(`its start <${tag![1]} is not a complete tag`);
  if (!VOID_ELEMENTS.has(name) && !hasEndTagOfElement(start.slice(close))) {
    return asText(`it starts with <${tag![1]}> but has no end tag of an HTML element`);
  }
  return { type: "html", reason: `it starts with the HTML element <${name}>` };
}

function hasEndTagOfElement(s: string): boolean {
  const re = /<\/([a-zA-Z][a-zA-Z0-9]*)\s*>/g;
  for (let m = re.exec(s); m; m = re.exec(s)) if (HTML_ELEMENTS.has(m[1]!.toLowerCase())) return true;
  return false;
}

/**
 * Whether stdin is a pipe or a regular file (`< report.html`), where zero
 * bytes mean the producer wrote nothing; not /dev/null or another device,
 * where zero bytes mean there was never a body to read.
 */
export function pipedOrFile(stdin: NodeJS.ReadableStream & { isTTY?: boolean; fd?: number }): boolean {
  if (stdin.isTTY) return false;
  if (typeof stdin.fd !== "number") return true;
  try {
    const st = fstatSync(stdin.fd);
    return !(st.isCharacterDevice() || st.isBlockDevice());
  } catch {
    // A closed descriptor reads as an empty pipe.
    return true;
  }
}

/**
 * The refusals of body bytes that cannot be a body: binary data, or (for a
 * pipe or a file on stdin: a producer that wrote nothing) no bytes at all.
 */
export function checkBodyBytes(buf: Buffer, source: string, refuseEmpty: boolean): void {
  const binary = binaryKind(buf);
  if (binary !== undefined) {
    throw new MailsendError("invalid_message", `${source} is ${binary}, not a message body`, {
      hint: "To send a file, use --attach <path> (with --text or --html for the body); a text body must be UTF-8 text.",
    });
  }
  if (buf.length === 0 && refuseEmpty) {
    throw new MailsendError("empty_input", `${source} was empty (0 bytes): there is no body to send`, {
      hint:
        "The body is read from stdin: the command piping it (report | mailsend send ...) wrote nothing; check that it ran. " +
        "Or give the body with --text, --html or a body file.",
    });
  }
}
