import { describe, expect, test } from "vitest";
import {
  csvRows,
  encodingName,
  formatFromContent,
  formatFromName,
  jsonArray,
  jsonLines,
  rowsOf,
  type Row,
} from "../../src/batch/rows.js";
import { placeholders, render, strayBraces } from "../../src/message/template.js";

/** Feed the text in small pieces, as a stream would, to exercise every split point. */
async function* chunks(text: string | Buffer, size = 3): AsyncGenerator<Buffer> {
  const buf = Buffer.from(text);
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function all(gen: AsyncGenerator<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const r of gen) out.push(r);
  return out;
}

describe("batch rows", () => {
  test("JSON lines: blank lines skipped, a bad line is an error for that row only", async () => {
    const rows = await all(jsonLines(chunks('{"to":"a@example.com"}\n\n{bad\r\n{"to":"ü@example.com"}')));
    expect(rows.map((r) => [r.index, r.line, r.data?.to ?? r.error?.code])).toEqual([
      [0, 1, "a@example.com"],
      [1, 3, "invalid_json"],
      [2, 4, "ü@example.com"],
    ]);
  });

  test("a JSON array is split into its elements as it streams, strings with brackets and commas included", async () => {
    const text = '[\n {"subject":"a, [b] {c} \\"d\\"","n":[1,2]},\n {"subject":"e"}\n]\n';
    for (const size of [1, 2, 5, 100]) {
      const rows = await all(jsonArray(chunks(text, size)));
      expect(rows.map((r) => r.data?.subject)).toEqual(['a, [b] {c} "d"', "e"]);
      expect(rows[1]!.line).toBe(3);
    }
  });

  test("a JSON array that is not closed, or not an array, is an error", async () => {
    await expect(all(jsonArray(chunks('[{"a":1}')))).rejects.toThrow(/not closed/);
    await expect(all(jsonArray(chunks('{"a":1}')))).rejects.toThrow(/one array/);
    const rows = await all(jsonArray(chunks("[1, {}]")));
    expect(rows[0]!.error?.message).toMatch(/JSON object/);
  });

  test("CSV: quotes, doubled quotes, commas and line breaks in fields, CRLF, ragged rows", async () => {
    const text =
      'to,subject,name\r\na@example.com,"Hi, ""you""","Line\nbreak"\r\nb@example.com,plain,x\r\nc@example.com,short\r\n';
    for (const size of [1, 4, 1000]) {
      const rows = await all(csvRows(chunks(text, size)));
      expect(rows[0]!.data).toEqual({ to: "a@example.com", subject: 'Hi, "you"', name: "Line\nbreak" });
      expect(rows[1]!.data).toEqual({ to: "b@example.com", subject: "plain", name: "x" });
      expect(rows[1]!.line).toBe(4);
      expect(rows[2]!.error?.message).toMatch(/2 fields, the header has 3/);
    }
  });

  test("CSV without a final newline, and a header with a duplicate column", async () => {
    expect((await all(csvRows(chunks("to\na@example.com"))))[0]!.data).toEqual({ to: "a@example.com" });
    await expect(all(csvRows(chunks("to,to\na,b\n")))).rejects.toThrow(/twice/);
    // A comma file whose cells hold semicolons is fine.
    expect((await all(csvRows(chunks("to,note\na@example.com,x;y\n"))))[0]!.data).toEqual({
      to: "a@example.com",
      note: "x;y",
    });
  });

  test("CSV separated as spreadsheets save it: Excel's ';' (with or without its sep= line), tabs", async () => {
    const want = [
      { to: "a@example.com", first_name: "Ann", note: "x, y; z" },
      { to: "b@example.com", first_name: "Bob", note: "" },
    ];
    const texts = [
      '\ufeffto;first_name;note\r\na@example.com;Ann;"x, y; z"\r\nb@example.com;Bob;\r\n',
      'sep=;\r\nto;first_name;note\r\na@example.com;Ann;"x, y; z"\r\nb@example.com;Bob;\r\n',
      "to\tfirst_name\tnote\na@example.com\tAnn\tx, y; z\nb@example.com\tBob\t\n",
    ];
    for (const text of texts) {
      for (const size of [1, 5, 1000]) {
        const rows = await all(csvRows(chunks(text, size)));
        expect(rows.map((r) => r.data)).toEqual(want);
      }
    }
    const withSep = await all(csvRows(chunks(texts[1]!)));
    expect(withSep.map((r) => r.line)).toEqual([3, 4]);
    expect(formatFromName("list.tsv")).toBe("csv");
  });

  test("CSV from Excel with cells formatted past the data: unnamed empty columns and empty rows are left out", async () => {
    const text = "\ufeffto,first_name,,\r\na@example.com,Ann,,\r\n,,,\r\n\r\nb@example.com,Bob,,\r\n , ,,\r\n";
    for (const size of [1, 7, 1000]) {
      const rows = await all(csvRows(chunks(text, size)));
      expect(rows.map((r) => [r.index, r.line, r.data])).toEqual([
        [0, 2, { to: "a@example.com", first_name: "Ann" }],
        [1, 5, { to: "b@example.com", first_name: "Bob" }],
      ]);
    }
    // A value under no name is that row's error (it would be lost); so is a missing named cell.
    const rows = await all(csvRows(chunks("to,,plan\na@example.com,,gold\nb@example.com,oops,gold\nc@example.com\n")));
    expect(rows[0]!.data).toEqual({ to: "a@example.com", plan: "gold" });
    expect(rows[1]!.error?.message).toBe('row 2 (line 3): column 2 has the value "oops", but no name in the header');
    expect(rows[2]!.error?.message).toMatch(/1 fields, the header has 3/);
  });

  test("CSV whose lines end in more than one way (rows appended by another program), and a quote left open", async () => {
    const text = "to,x\na@example.com,1\r\nb@example.com,2\rc@example.com,3\n";
    for (const size of [1, 2, 1000]) {
      const rows = await all(csvRows(chunks(text, size)));
      expect(rows.map((r) => [r.line, r.data])).toEqual([
        [2, { to: "a@example.com", x: "1" }],
        [3, { to: "b@example.com", x: "2" }],
        [4, { to: "c@example.com", x: "3" }],
      ]);
    }
    await expect(all(csvRows(chunks('to,x\na@example.com,1\n\nb@example.com,"2\n')))).rejects.toThrow(
      "line 4: a quoted CSV field is not closed",
    );
  });

  test("CSV recipient columns in another case are the recipient fields; the same column twice is said with its spellings", async () => {
    const rows = await all(csvRows(chunks("To,CC,BCC,Plan\na@example.com,c@example.com,d@example.com,gold\n")));
    expect(rows[0]!.data).toEqual({ to: "a@example.com", cc: "c@example.com", bcc: "d@example.com", Plan: "gold" });
    await expect(all(csvRows(chunks("to,To\na,b\n")))).rejects.toThrow(
      'CSV header has the column "to" twice (as "to" and "To")',
    );
  });

  test('Excel\'s "Unicode Text" (UTF-16 with a byte order mark, tab-separated) is read as written', async () => {
    const text = "to\tfirst_name\r\nanna@example.com\tAnaïs 名前 😀\r\n";
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")]);
    const be = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, "utf16le").swap16()]);
    for (const bytes of [le, be]) {
      for (const size of [1, 3, 1000]) {
        const rows = await all(csvRows(chunks(bytes, size)));
        expect(rows.map((r) => r.data)).toEqual([{ to: "anna@example.com", first_name: "Anaïs 名前 😀" }]);
      }
    }
    expect(formatFromContent(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('[{"to":', "utf16le")]))).toBe(
      "json",
    );
    // One byte is not enough to see a byte order mark: read as UTF-8.
    expect(await all(csvRows(chunks("t", 1)))).toEqual([]);
  });

  test("an input in a legacy encoding is read by the encoding given: Excel's windows-1252 CSV, a JSON line", async () => {
    const csv = Buffer.from("to;last_name;plan\r\nanna@example.com;Müller;Gold \x80 5\r\n", "latin1");
    for (const size of [1, 3, 1000]) {
      const rows = await all(rowsOf("csv", chunks(csv, size), "windows-1252"));
      expect(rows.map((r) => r.data)).toEqual([{ to: "anna@example.com", last_name: "Müller", plan: "Gold € 5" }]);
    }
    const jsonl = Buffer.from('{"to":"a@example.com","name":"Groß"}\n', "latin1");
    expect((await all(rowsOf("jsonl", chunks(jsonl), "iso-8859-1")))[0]!.data).toEqual({
      to: "a@example.com",
      name: "Groß",
    });
    expect(encodingName("latin1")).toBe("windows-1252");
    expect(encodingName("klingon")).toBeUndefined();
  });

  test("input that is not UTF-8 (Excel's plain CSV is windows-1252) is refused with where and why", async () => {
    const bytes = Buffer.concat([
      Buffer.from("to,last_name\r\nanna@example.com,M"),
      Buffer.from([0xfc]),
      Buffer.from("ller\r\n"),
    ]);
    for (const size of [1, 3, 1000]) {
      const err = await all(csvRows(chunks(bytes, size))).catch(
        (e: unknown) => e as { message: string; hint?: string },
      );
      expect(err).toMatchObject({
        message: 'the batch input is not valid UTF-8 (line 2: the byte 0xFC after "anna@example.com,M")',
      });
      expect((err as { hint?: string }).hint).toMatch(/CSV UTF-8/);
    }
  });

  test("format from content", () => {
    expect(formatFromContent("  [")).toBe("json");
    expect(formatFromContent('{"a"')).toBe("jsonl");
    expect(formatFromContent("to,subject")).toBe("csv");
  });
});

describe("templates", () => {
  test("HTML placeholders are escaped, text ones are not", () => {
    const vars = { name: "<Ann & Bob>", n: 3 };
    expect(render("<p>Hi {{name}}, {{ n }} new</p>", vars, "html", "html")).toBe(
      "<p>Hi &lt;Ann &amp; Bob&gt;, 3 new</p>",
    );
    expect(render("Hi {{name}}", vars, "text", "text")).toBe("Hi <Ann & Bob>");
  });

  test("a spreadsheet's column names: accented and other scripts, spaces, another case; never left in the mail as written", () => {
    const vars = { Prénom: "Anaïs", "First Name": "Ann", Plan: "Gold", 名前: "Yui", Straße: "Hauptstr. 1" };
    expect(render("{{Prénom}} {{ First Name }} {{名前}} {{Straße}}", vars, "text", "subject")).toBe(
      "Anaïs Ann Yui Hauptstr. 1",
    );
    // Case, spaces, hyphens and underscores between words, and decomposed accents do not matter.
    expect(render("{{first_name}} {{plan}} {{first-name}} {{pre\u0301nom}}", vars, "text", "subject")).toBe(
      "Ann Gold Ann Anaïs",
    );
    // A placeholder with no such column is an error, also one with accents (it was sent as written).
    expect(() => render("Bonjour {{Nom}}", vars, "text", "subject")).toThrow("subject: no value for {{Nom}}");
    expect(placeholders("{{Prénom}} {{ First Name }}")).toEqual(["Prénom", "First Name"]);
    // The spelling as written wins; two columns that only differ loosely are not guessed between.
    expect(render("{{plan}}", { plan: "a", Plan: "b" }, "text", "s")).toBe("a");
    expect(() => render("{{PLAN}}", { plan: "a", Plan: "b" }, "text", "s")).toThrow(/no value for \{\{PLAN\}\}/);
  });

  test("an empty value (a CSV cell left blank) is no value: the row is invalid, not 'Dear ,'; a default fills it", () => {
    const vars = { first_name: "", company: " ", plan: "Gold" };
    let err: { message: string; hint?: string } | undefined;
    try {
      render("Dear {{first_name}}, {{plan}}", vars, "text", "--text-file");
    } catch (e) {
      err = e as { message: string; hint?: string };
    }
    expect(err?.message).toBe("--text-file: no value for {{first_name}} (empty)");
    expect(err?.hint).toMatch(/\{\{first_name\|text\}\} \(\{\{first_name\|\}\} for nothing\)/);
    expect(render("Dear {{first_name|customer}}, {{ plan | none }}{{company|}}.", vars, "text", "s")).toBe(
      "Dear customer, Gold.",
    );
    expect(render("<p>{{first_name | <you> }}</p>", vars, "html", "s")).toBe("<p>&lt;you&gt;</p>");
    expect(render("{{missing|x}}", vars, "text", "s")).toBe("x");
    expect(placeholders("{{a|b}} {{ c | }}")).toEqual(["a", "c"]);
  });

  test("braces that are no placeholder are found, with context: a typo, an editor's markup inside", () => {
    expect(strayBraces("Dear {{first_name}}, {{plan|none}} {{ First Name }}")).toEqual([]);
    expect(strayBraces("<p>Dear {{ first_name }, your {{plan}}</p>")).toEqual([
      "<p>Dear {{ first_name }, your {{plan}}...",
    ]);
    expect(strayBraces("Hi {{<span>first_name</span>}}!")).toEqual(["Hi {{<span>first_name</span>}}!"]);
    expect(strayBraces("}} {{ {{ }} ".repeat(10))).toHaveLength(3);
    expect(strayBraces("<style>@media screen{.a{color:red}}</style>")).toEqual([]);
  });

  test("a missing variable's hint names the row's variables", () => {
    let hint: string | undefined;
    try {
      render("{{email}}", { "E-mail address": "x", plan: "p" }, "text", "s");
    } catch (e) {
      hint = (e as { hint?: string }).hint;
    }
    expect(hint).toMatch(/This row's variables: E-mail address, plan\./);
  });

  test("a missing variable names every missing placeholder", () => {
    expect(placeholders("{{a}} {{b}} {{a}}")).toEqual(["a", "b"]);
    expect(() => render("{{a}} {{b}} {{c}}", { b: "x" }, "text", "subject")).toThrow(
      "subject: no value for {{a}}, {{c}}",
    );
  });
});
