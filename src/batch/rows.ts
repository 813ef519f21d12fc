/**
 * Batch input as a stream of rows, never loaded whole: JSON lines, one JSON
 * array (split into its elements as the bytes arrive), or CSV with a header
 * row (RFC 4180: quoted fields, doubled quotes, line breaks inside quotes).
 */
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
  if (/\.csv$/i.test(name)) return "csv";
  return undefined;
}

/** Guess from the first non-blank character: "[" array, "{" lines, else CSV. */
export function formatFromContent(head: string): Format {
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

async function* decoded(input: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  try {
    for await (const chunk of input) yield typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    const rest = decoder.decode();
    if (rest) yield rest;
  } catch (e) {
    if (e instanceof TypeError) throw new MailsendError("invalid_message", "the batch input is not valid UTF-8");
    throw e;
  }
}

export async function* jsonLines(input: AsyncIterable<Buffer | string>): AsyncGenerator<Row> {
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
  for await (const text of decoded(input)) {
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
 * The elements of one top-level JSON array, each parsed on its own: a
 * scanner tracks strings and nesting depth to find where each one ends.
 */
export async function* jsonArray(input: AsyncIterable<Buffer | string>): AsyncGenerator<Row> {
  let state: "before" | "between" | "in" | "after" = "before";
  let depth = 0;
  let inString = false;
  let escaped = false;
  let element = "";
  let line = 1;
  let elementLine = 1;
  let index = 0;
  const finish = (): Row | undefined => {
    const text = element.trim();
    element = "";
    if (!text) return undefined;
    try {
      return asObject(JSON.parse(text), index++, elementLine);
    } catch (e) {
      return rowError(index++, elementLine, `not valid JSON (${(e as Error).message})`);
    }
  };
  for await (const text of decoded(input)) {
    const out: Row[] = [];
    for (const ch of text) {
      if (ch === "\n") line++;
      if (state === "before") {
        if (ch === "[") state = "between";
        else if (!/\s/.test(ch)) throw new MailsendError("invalid_json", `line ${line}: a JSON batch must be one array of send requests`);
        continue;
      }
      if (state === "after") {
        if (!/\s/.test(ch)) throw new MailsendError("invalid_json", `line ${line}: text after the end of the JSON array`);
        continue;
      }
      if (inString) {
        element += ch;
        if (escaped) escaped = false;
        else if (ch === "\\") escaped = true;
        else if (ch === '"') inString = false;
        continue;
      }
      if (state === "between") {
        if (/\s/.test(ch)) continue;
        if (ch === "]") {
          state = "after";
          continue;
        }
        state = "in";
        elementLine = line;
      }
      if (ch === '"') inString = true;
      if (ch === "{" || ch === "[") depth++;
      if (ch === "}" || ch === "]") {
        if (depth === 0 && ch === "]") {
          const row = finish();
          if (row) out.push(row);
          state = "after";
          continue;
        }
        depth--;
      }
      if (ch === "," && depth === 0) {
        const row = finish();
        if (row) out.push(row);
        else out.push(rowError(index++, line, "empty element"));
        state = "between";
        continue;
      }
      element += ch;
    }
    yield* out;
  }
  if (state !== "after") throw new MailsendError("invalid_json", "the JSON array is not closed (missing ])");
}

/** RFC 4180 records; the first is the header. Values are strings. */
export async function* csvRows(input: AsyncIterable<Buffer | string>): AsyncGenerator<Row> {
  let header: string[] | undefined;
  let field = "";
  let record: string[] = [];
  let quoted = false;
  let afterQuote = false;
  let line = 1;
  let recordLine = 1;
  let index = 0;
  let pendingCR = false;
  const rows: Row[] = [];
  const endRecord = () => {
    record.push(field);
    field = "";
    const r = record;
    record = [];
    const blank = r.length === 1 && r[0] === "";
    if (blank) return;
    if (!header) {
      header = r.map((h) => h.trim());
      const dup = header.find((h, i) => header!.indexOf(h) !== i);
      if (dup !== undefined) throw new MailsendError("invalid_message", `CSV header has the column "${dup}" twice`);
      if (header.some((h) => !h)) throw new MailsendError("invalid_message", "CSV header has an empty column name");
      // Excel in many locales saves "CSV" with ";" between fields (and some tools with tabs): read
      // as commas, the whole header is one column, and every row would fail on its templates.
      const other = header.length === 1 ? [";", "\t"].find((d) => header![0]!.includes(d)) : undefined;
      if (other !== undefined) {
        const name = other === ";" ? "semicolons" : "tabs";
        throw new MailsendError("invalid_message", `CSV header ${JSON.stringify(header[0])} is one column: the file separates its fields with ${name}, and mailsend reads comma-separated CSV`, {
          hint: `Save it as comma-separated CSV (Excel: "CSV UTF-8 (Comma delimited)"), or give JSON lines. Nothing was sent.`,
        });
      }
      return;
    }
    if (r.length !== header.length) {
      rows.push({
        index: index++,
        line: recordLine,
        error: new MailsendError("invalid_message", `row ${index} (line ${recordLine}): ${r.length} fields, the header has ${header.length}`),
      });
      return;
    }
    rows.push({ index: index++, line: recordLine, data: Object.fromEntries(header.map((h, i) => [h, r[i]!])) });
  };
  for await (const text of decoded(input)) {
    for (const ch of text) {
      if (pendingCR) {
        pendingCR = false;
        if (ch === "\n") continue;
      }
      if (quoted) {
        if (ch === '"') {
          quoted = false;
          afterQuote = true;
        } else {
          if (ch === "\n") line++;
          field += ch;
        }
        continue;
      }
      if (ch === '"') {
        if (afterQuote) {
          field += '"';
          quoted = true;
          afterQuote = false;
        } else if (field === "") quoted = true;
        else field += ch;
        continue;
      }
      afterQuote = false;
      if (ch === ",") {
        record.push(field);
        field = "";
      } else if (ch === "\n" || ch === "\r") {
        if (ch === "\r") pendingCR = true;
        endRecord();
        line++;
        recordLine = line;
      } else field += ch;
    }
    yield* rows.splice(0);
  }
  if (quoted) throw new MailsendError("invalid_message", `line ${recordLine}: a quoted CSV field is not closed`);
  if (field !== "" || record.length > 0) endRecord();
  yield* rows.splice(0);
}

export function rowsOf(format: Format, input: AsyncIterable<Buffer | string>): AsyncGenerator<Row> {
  if (format === "jsonl") return jsonLines(input);
  if (format === "json") return jsonArray(input);
  return csvRows(input);
}
