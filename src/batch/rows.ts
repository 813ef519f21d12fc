/**
 * Batch input as a stream of rows, never loaded whole: JSON lines, one JSON
 * array (split into its elements as the bytes arrive), or CSV with a header
 * row (RFC 4180: quoted fields, doubled quotes, line breaks inside quotes).
 */
import { finished } from "node:stream/promises";
import { MailsendError } from "../core/errors.js";

export type Format = "jsonl" | "json" | "csv";

export interface Row {
  /** 0-based position in the input: the item's identity in results and the journal. */
  index: number;
  /** Line where the row starts, for messages. */
  line: number;
  data?: Record<string, unknown>;
  error?: MailsendError;
}

export function formatFromName(name: string): Format | undefined {
  if (/\.jsonl$|\.ndjson$/i.test(name)) return "jsonl";
  if (/\.json$/i.test(name)) return "json";
  // Tab-separated is read as CSV: the separator is found in the header line.
  if (/\.csv$|\.tsv$|\.tab$/i.test(name)) return "csv";
  return undefined;
}

/** Guess from the first non-blank character: "[" array, "{" lines, else CSV. */
export function formatFromContent(head: string | Uint8Array): Format {
  if (typeof head !== "string") head = new TextDecoder(encodingOf(head)).decode(head);
  const c = head.trimStart()[0];
  if (c === "[") return "json";
  if (c === "{") return "jsonl";
  return "csv";
}

function rowError(index: number, line: number, message: string): Row {
  return { index, line, error: new MailsendError("invalid_json", `row ${index + 1} (line ${line}): ${message}`) };
}

function asObject(value: unknown, index: number, line: number): Row {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return rowError(index, line, "expected a JSON object (one send request)");
  }
  return { index, line, data: value as Record<string, unknown> };
}

/**
 * Where a chunk stops being UTF-8: the offset of the first byte that starts no character
 * (up to 3 continuation bytes at its start end a character split across chunks), or -1.
 * Only for saying where: the decoder decides what is valid.
 */
function firstBadByte(b: Uint8Array): number {
  let i = 0;
  while (i < b.length && i < 3 && (b[i]! & 0xc0) === 0x80) i++;
  while (i < b.length) {
    const c = b[i]!;
    const n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n === 0) return i;
    for (let k = 1; k < n && i + k < b.length; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += n;
  }
  return -1;
}

function notUtf8(chunk: Uint8Array, linesBefore: number, textBefore: string): MailsendError {
  const at = firstBadByte(chunk);
  let where = "";
  if (at >= 0) {
    let line = linesBefore + 1;
    for (let i = 0; i < at; i++) if (chunk[i] === 0x0a) line++;
    // The text of that line up to the byte, as far as it decodes: enough to find it in the sheet.
    const lineStart = chunk.lastIndexOf(0x0a, at - 1) + 1;
    const before =
      (lineStart === 0 ? textBefore.slice(textBefore.lastIndexOf("\n") + 1) : "") +
      new TextDecoder().decode(chunk.subarray(lineStart, at));
    const shown = before.replace(/\r/g, "").slice(-40);
    where = ` (line ${line}: the byte 0x${chunk[at]!.toString(16).toUpperCase().padStart(2, "0")}${shown ? ` after ${JSON.stringify(shown)}` : ""})`;
  }
  return new MailsendError("invalid_message", `the batch input is not valid UTF-8${where}`, {
    hint: (s) =>
      'It is likely in a legacy encoding: Excel\'s "CSV (Comma delimited)" writes the Windows code page (ü is the byte 0xFC there). ' +
      // sendBatch takes items, not a file: only re-saving it applies there.
      `Save it as "CSV UTF-8 (Comma delimited)" (LibreOffice: Character set "Unicode (UTF-8)")${s.pick({ cli: ", or name its encoding: --encoding windows-1252", api: "" })}. Nothing was sent.`,
  });
}

/**
 * The encoding a byte order mark names: UTF-16 for Excel's "Unicode Text" (tab-separated, a
 * BOM FF FE), else UTF-8 (its BOM, if any, is dropped by the decoder).
 */
export function encodingOf(head: Uint8Array): "utf-8" | "utf-16le" | "utf-16be" {
  if (head[0] === 0xff && head[1] === 0xfe) return "utf-16le";
  if (head[0] === 0xfe && head[1] === 0xff) return "utf-16be";
  return "utf-8";
}

async function* decoded(input: AsyncIterable<Buffer | string>, encoding?: string): AsyncGenerator<string> {
  let decoder: InstanceType<typeof TextDecoder> | undefined;
  /** The first bytes, until there are enough to see a byte order mark. */
  let head = Buffer.alloc(0);
  let lines = 0;
  // The end of the text decoded so far, to show what precedes a bad byte on its line.
  let tail = "";
  const decode = (bytes: Buffer, last: boolean): string => {
    // A legacy encoding given (--encoding windows-1252) decodes every byte; UTF-8 and UTF-16 stay strict.
    decoder ??= new TextDecoder(encoding ?? encodingOf(bytes), { fatal: true });
    try {
      return decoder.decode(bytes, { stream: !last });
    } catch (e) {
      if (!(e instanceof TypeError)) throw e;
      if (decoder.encoding !== "utf-8")
        throw new MailsendError(
          "invalid_message",
          `the batch input is not valid ${decoder.encoding}${encoding ? "" : " (its byte order mark says it is)"}`,
        );
      if (last && bytes.length === 0)
        throw new MailsendError("invalid_message", "the batch input is not valid UTF-8 (it ends inside a character)");
      throw notUtf8(bytes, lines, tail);
    }
  };
  for await (const chunk of input) {
    let text: string;
    if (typeof chunk === "string") text = chunk;
    else {
      let bytes = chunk;
      if (!decoder) {
        head = Buffer.concat([head, chunk]);
        if (head.length < 2) continue;
        bytes = head;
      }
      text = decode(bytes, false);
    }
    for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lines++;
    tail = (tail + text).slice(-200);
    yield text;
  }
  const rest = decode(decoder ? Buffer.alloc(0) : head, true);
  if (rest) yield rest;
}

export async function* jsonLines(input: AsyncIterable<Buffer | string>, encoding?: string): AsyncGenerator<Row> {
  let buf = "";
  let line = 0;
  let index = 0;
  const one = (text: string, at: number): Row | undefined => {
    const t = text.replace(/\r$/, "");
    if (!t.trim()) return undefined;
    try {
      return asObject(JSON.parse(t), index++, at);
    } catch (e) {
      return rowError(index++, at, `not valid JSON (${(e as Error).message})`);
    }
  };
  for await (const text of decoded(input, encoding)) {
    buf += text;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const row = one(buf.slice(0, nl), ++line);
      buf = buf.slice(nl + 1);
      if (row) yield row;
    }
  }
  const last = one(buf, ++line);
  if (last) yield last;
}

/**
 * The scanner of jsonArray: it tracks strings and nesting depth to find where each element
 * ends, and where in the array it is.
 */
class ArrayScanner {
  state: "before" | "between" | "in" | "after" = "before";
  #depth = 0;
  #inString = false;
  #escaped = false;
  #element = "";
  #line = 1;
  #elementLine = 1;
  #index = 0;

  /** The rows of the elements that end in `text`, the next piece of the input. */
  scan(text: string): Row[] {
    const out: Row[] = [];
    for (const ch of text) {
      if (ch === "\n") this.#line++;
      if (this.state === "before") {
        if (ch === "[") this.state = "between";
        else if (!/\s/.test(ch))
          throw new MailsendError(
            "invalid_json",
            `line ${this.#line}: a JSON batch must be one array of send requests`,
          );
      } else if (this.state === "after") {
        if (!/\s/.test(ch))
          throw new MailsendError("invalid_json", `line ${this.#line}: text after the end of the JSON array`);
      } else this.#inArray(ch, out);
    }
    return out;
  }

  /** A character between the array's "[" and "]": part of an element, or what ends one (or the array). */
  #inArray(ch: string, out: Row[]): void {
    if (this.#inString) {
      this.#element += ch;
      if (this.#escaped) this.#escaped = false;
      else if (ch === "\\") this.#escaped = true;
      else if (ch === '"') this.#inString = false;
      return;
    }
    if (this.state === "between") {
      if (/\s/.test(ch)) return;
      if (ch === "]") {
        this.state = "after";
        return;
      }
      this.state = "in";
      this.#elementLine = this.#line;
    }
    if (ch === '"') this.#inString = true;
    if (ch === "{" || ch === "[") this.#depth++;
    if (ch === "}" || ch === "]") {
      if (this.#depth === 0 && ch === "]") {
        const row = this.#finish();
        if (row) out.push(row);
        this.state = "after";
        return;
      }
      this.#depth--;
    }
    if (ch === "," && this.#depth === 0) {
      out.push(this.#finish() ?? rowError(this.#index++, this.#line, "empty element"));
      this.state = "between";
      return;
    }
    this.#element += ch;
  }

  /** The element read so far as a row; none when it is empty. */
  #finish(): Row | undefined {
    const text = this.#element.trim();
    this.#element = "";
    if (!text) return undefined;
    try {
      return asObject(JSON.parse(text), this.#index++, this.#elementLine);
    } catch (e) {
      return rowError(this.#index++, this.#elementLine, `not valid JSON (${(e as Error).message})`);
    }
  }
}

/** The elements of one top-level JSON array, each parsed on its own. */
export async function* jsonArray(input: AsyncIterable<Buffer | string>, encoding?: string): AsyncGenerator<Row> {
  const scanner = new ArrayScanner();
  for await (const text of decoded(input, encoding)) yield* scanner.scan(text);
  if (scanner.state !== "after") throw new MailsendError("invalid_json", "the JSON array is not closed (missing ])");
}

/**
 * The separator a CSV file uses, from its header line: commas, or what spreadsheets write
 * besides (Excel in locales with a decimal comma writes ";", "Text (Tab delimited)" tabs).
 * The most frequent outside quotes wins; a tie, or none, is a comma.
 */
export function separatorOf(headerLine: string): string {
  const count: Record<string, number> = { ",": 0, ";": 0, "\t": 0 };
  let quoted = false;
  for (const ch of headerLine) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && ch in count) count[ch]!++;
  }
  return [";", "\t"].reduce((best, c) => (count[c]! > count[best]! ? c : best), ",");
}

/** Header names that are recipient fields whatever their case ("To", "CC", "BCC"): read otherwise, they would be variables, and the row would go to fewer people than the sheet says. */
const RECIPIENT_COLUMNS = new Set(["to", "cc", "bcc"]);

/**
 * What the records of a CSV file mean: the first that is not blank is the header, each
 * later one a row. Columns without a name (the empty cells a spreadsheet writes after the
 * last column it formatted) are left out while their cells are empty; records whose cells
 * are all empty (formatted rows below the data) are no rows.
 */
function csvTable(): (cells: string[], line: number) => Row | undefined {
  let header: string[] | undefined;
  /** Positions of the named columns. */
  let named: number[] = [];
  let index = 0;
  const rowError = (line: number, message: string, hint?: string): Row => ({
    index,
    line,
    error: new MailsendError("invalid_message", `row ${++index} (line ${line}): ${message}`, hint ? { hint } : {}),
  });
  return (r, line) => {
    if (r.every((c) => c.trim() === "")) return undefined;
    if (!header) {
      header = r.map((h) => {
        const name = h.trim();
        return RECIPIENT_COLUMNS.has(name.toLowerCase()) ? name.toLowerCase() : name;
      });
      named = header.flatMap((h, i) => (h ? [i] : []));
      const dup = header.find((h, i) => h && header!.indexOf(h) !== i);
      if (dup !== undefined) {
        const spelled = [...new Set(r.map((c) => c.trim()).filter((_, i) => header![i] === dup))];
        throw new MailsendError(
          "invalid_message",
          `CSV header has the column "${dup}" twice${spelled.length > 1 ? ` (as ${spelled.map((x) => JSON.stringify(x)).join(" and ")})` : ""}`,
        );
      }
      return undefined;
    }
    // A row may stop before trailing unnamed columns, or go on after the header with empty cells.
    if (r.length <= named[named.length - 1]!)
      return rowError(line, `${r.length} fields, the header has ${header.length}`);
    const stray = r.findIndex((c, i) => (i >= header!.length || !header![i]) && c.trim() !== "");
    if (stray >= header.length) return rowError(line, `${r.length} fields, the header has ${header.length}`);
    if (stray >= 0) {
      return rowError(
        line,
        `column ${stray + 1} has the value ${JSON.stringify(r[stray]!.slice(0, 40))}, but no name in the header`,
        "Give the column a name in the header row (it is then a template variable), or clear its cells.",
      );
    }
    return { index: index++, line, data: Object.fromEntries(named.map((i) => [header![i]!, r[i]!])) };
  };
}

/**
 * The separator of a CSV text, from its first line: the one an Excel "sep=;" line names (that
 * line is no record), else the header's (separatorOf). Returns the text the records start at
 * and the number of lines before it.
 */
function csvStart(text: string): { sep: string; records: string; linesBefore: number } {
  const eol = text.search(/\r|\n/);
  const first = eol >= 0 ? text.slice(0, eol) : text;
  const named = /^sep=(.)$/i.exec(first);
  if (!named) return { sep: separatorOf(first), records: text, linesBefore: 0 };
  const next = eol < 0 ? text.length : text.startsWith("\r\n", eol) ? eol + 2 : eol + 1;
  return { sep: named[1]!, records: text.slice(next), linesBefore: 1 };
}

/**
 * RFC 4180 records (csv-parse, quotes relaxed as spreadsheets read them: a quote inside an
 * unquoted cell is a character); the first is the header. Values are strings. The
 * separator is the first line's (csvStart); what the records mean is csvTable's.
 */
export async function* csvRows(input: AsyncIterable<Buffer | string>, encoding?: string): AsyncGenerator<Row> {
  const { parse } = await import("csv-parse");
  const table = csvTable();
  const rows: Row[] = [];
  let parser: ReturnType<typeof parse> | undefined;
  /** The line the last record ended on: the next one starts on the line after it. */
  let lastLine = 0;
  const open = (head: string): string => {
    const { sep, records, linesBefore } = csvStart(head);
    lastLine = linesBefore;
    parser = parse({
      delimiter: sep,
      relax_quotes: true,
      relax_column_count: true,
      // Lines may end either way in one file (rows appended by another program).
      record_delimiter: ["\r\n", "\n", "\r"],
      // Each record as it is parsed, with where it ends; none goes on down the stream.
      on_record: (cells: string[], info) => {
        const row = table(cells, lastLine + 1);
        lastLine = linesBefore + info.lines;
        if (row) rows.push(row);
        return null;
      },
    });
    // Its failures come through the write and end callbacks below; the event would be unhandled.
    parser.on("error", () => {});
    return records;
  };
  /** A CR that ended the last text: written with the next, so that a CRLF split between two is one line end. */
  let cr = "";
  const write = (text: string, last = false) => {
    const all = cr + text;
    cr = !last && all.endsWith("\r") ? "\r" : "";
    return new Promise<void>((resolve, reject) =>
      parser!.write(cr ? all.slice(0, -1) : all, (e) => (e ? reject(e) : resolve())),
    );
  };
  let head = "";
  try {
    for await (const text of decoded(input, encoding)) {
      if (parser) await write(text);
      else {
        head += text;
        // The first line's end, and the character after it (the LF of a CRLF); a header line
        // longer than this is not waited for to the end (its start decides).
        const eol = head.search(/\r|\n/);
        if ((eol < 0 || eol === head.length - 1) && head.length < 64 * 1024) continue;
        await write(open(head));
      }
      yield* rows.splice(0);
    }
    await write(parser ? "" : open(head), true);
    await finished(parser!.end(), { readable: false });
  } catch (e) {
    yield* rows.splice(0);
    throw csvError(e, lastLine + 1);
  }
  yield* rows.splice(0);
}

/** csv-parse's failure in our words (the record it is in starts at `line`); any other error as it is. */
function csvError(e: unknown, line: number): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (code === "CSV_QUOTE_NOT_CLOSED")
    return new MailsendError("invalid_message", `line ${line}: a quoted CSV field is not closed`);
  if (typeof code === "string" && code.startsWith("CSV_"))
    return new MailsendError("invalid_message", `line ${line}: the CSV cannot be read (${(e as Error).message})`);
  return e;
}

/**
 * The rows of an input in `format`. `encoding` (a WHATWG label: windows-1252, iso-8859-15, ...)
 * is the input's when it is not UTF-8; without it, UTF-8, or UTF-16 by its byte order mark.
 */
export function rowsOf(format: Format, input: AsyncIterable<Buffer | string>, encoding?: string): AsyncGenerator<Row> {
  if (format === "jsonl") return jsonLines(input, encoding);
  if (format === "json") return jsonArray(input, encoding);
  return csvRows(input, encoding);
}

/** The decoder's name for an encoding label, or undefined when there is no such encoding. */
export function encodingName(label: string): string | undefined {
  try {
    return new TextDecoder(label).encoding;
  } catch {
    return undefined;
  }
}
