import { describe, expect, test } from "vitest";
import { csvRows, formatFromContent, jsonArray, jsonLines, type Row } from "../../src/batch/rows.js";
import { placeholders, render } from "../../src/batch/template.js";

/** Feed the text in small pieces, as a stream would, to exercise every split point. */
async function* chunks(text: string, size = 3): AsyncGenerator<Buffer> {
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
    const text = 'to,subject,name\r\na@example.com,"Hi, ""you""","Line\nbreak"\r\nb@example.com,plain,x\r\nc@example.com,short\r\n';
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
    // A semicolon (or tab) separated file: said at its header, not as a template error on every row.
    await expect(all(csvRows(chunks("to;first_name\na@example.com;Ann\n")))).rejects.toThrow(/separates its fields with semicolons/);
    await expect(all(csvRows(chunks("to\tfirst_name\na@example.com\tAnn\n")))).rejects.toThrow(/with tabs/);
    // A comma file whose cells hold semicolons is fine.
    expect((await all(csvRows(chunks("to,note\na@example.com,x;y\n"))))[0]!.data).toEqual({ to: "a@example.com", note: "x;y" });
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
    expect(render("<p>Hi {{name}}, {{ n }} new</p>", vars, "html", "html")).toBe("<p>Hi &lt;Ann &amp; Bob&gt;, 3 new</p>");
    expect(render("Hi {{name}}", vars, "text", "text")).toBe("Hi <Ann & Bob>");
  });

  test("a spreadsheet's column names: accented and other scripts, spaces, another case; never left in the mail as written", () => {
    const vars = { Prénom: "Anaïs", "First Name": "Ann", Plan: "Gold", 名前: "Yui", "Straße": "Hauptstr. 1" };
    expect(render("{{Prénom}} {{ First Name }} {{名前}} {{Straße}}", vars, "text", "subject")).toBe("Anaïs Ann Yui Hauptstr. 1");
    // Case, spaces, hyphens and underscores between words, and decomposed accents do not matter.
    expect(render("{{first_name}} {{plan}} {{first-name}} {{pre\u0301nom}}", vars, "text", "subject")).toBe("Ann Gold Ann Anaïs");
    // A placeholder with no such column is an error, also one with accents (it was sent as written).
    expect(() => render("Bonjour {{Nom}}", vars, "text", "subject")).toThrow("subject: no value for {{Nom}}");
    expect(placeholders("{{Prénom}} {{ First Name }}")).toEqual(["Prénom", "First Name"]);
    // The spelling as written wins; two columns that only differ loosely are not guessed between.
    expect(render("{{plan}}", { plan: "a", Plan: "b" }, "text", "s")).toBe("a");
    expect(() => render("{{PLAN}}", { plan: "a", Plan: "b" }, "text", "s")).toThrow(/no value for \{\{PLAN\}\}/);
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
    expect(() => render("{{a}} {{b}} {{c}}", { b: "x" }, "text", "subject")).toThrow("subject: no value for {{a}}, {{c}}");
  });
});
