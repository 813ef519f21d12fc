/**
 * A column named like a send-request field is that field: when a template
 * uses it too ({{name}} meant as "Dear Alice"), the batch says so once.
 */
import { describe, expect, test } from "vitest";
import { FieldClashes } from "../../src/batch/item.js";

describe("FieldClashes", () => {
  test("a name column used by the HTML template: one warning, naming the field, what it does and the fix", () => {
    const c = new FieldClashes({ subject: "Your {{plan}} plan", htmlTemplate: "<p>Dear {{name}}</p>" }, "csv");
    const first = c.check({ to: "a@example.com", name: "Alice", plan: "gold" });
    expect(first).toHaveLength(1);
    expect(first[0]).toMatch(/^column "name" is the send request's field name: /);
    expect(first[0]).toMatch(/sender's display name/);
    expect(first[0]).toMatch(/\{\{name\}\} in --html-file/);
    expect(first[0]).toMatch(/Rename the column \(e\.g\. to first_name\) if it is only meant for the template/);
    // Once per field, not once per row.
    expect(c.check({ to: "b@example.com", name: "Bob", plan: "silver" })).toEqual([]);
  });

  test("every template is looked at; a field no template fills says the rows get no value; JSON says field", () => {
    const c = new FieldClashes(
      {
        subject: "{{subject}} for {{reply_to}}",
        textTemplate: "{{reply_to}}",
        templateFlag: "--markdown-file",
        htmlTemplate: "<p>{{reply_to}}</p>",
      },
      "jsonl",
    );
    const w = c.check({ to: "a@example.com", subject: "S", reply_to: "r@example.com" });
    expect(w).toHaveLength(2);
    expect(w.find((x) => x.includes('"subject"'))).toMatch(
      /^field "subject" .*subject line.*it also fills \{\{subject\}\} in --subject\./,
    );
    expect(w.find((x) => x.includes('"reply_to"'))).toMatch(
      /\{\{reply_to\}\} in --subject and --markdown-file gets no value from it/,
    );
  });

  test("no warning: to (every row's recipient), template-only columns, a field no template uses, a JSON row's own vars", () => {
    const c = new FieldClashes({ htmlTemplate: "Hi {{to}} {{first_name}} {{name}}" }, "json");
    expect(c.check({ to: "a@example.com", first_name: "Alice", reply_to: "r@example.com" })).toEqual([]);
    expect(c.check({ to: "a@example.com", name: "Sender", vars: { name: "Alice" } })).toEqual([]);
    expect(c.check({ to: "a@example.com", name: null })).toEqual([]);
    // An empty CSV cell is an absent field: it sets no display name.
    expect(new FieldClashes({ htmlTemplate: "Dear {{name}}" }, "csv").check({ to: "a@example.com", name: "" })).toEqual(
      [],
    );
    expect(new FieldClashes({}, "csv").check({ name: "x" })).toEqual([]);
    // Placeholders that are not fields, even ones an object has by inheritance.
    expect(
      new FieldClashes({ subject: "{{constructor}} {{toString}}" }, "csv").check({ constructor: "x", toString: "y" }),
    ).toEqual([]);
  });
});
