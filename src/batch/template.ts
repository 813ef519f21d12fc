/**
 * `{{column}}` placeholders filled per row: HTML-escaped in HTML templates,
 * as they are in text and subjects. A placeholder the row has no value for
 * is an error for that row, never an empty string in someone's inbox.
 */
import { MailsendError } from "../core/errors.js";
import { escapeHtml } from "../core/message.js";

/**
 * A placeholder's name: letters of any script (spreadsheets say "Prénom", "Straße", "名前"),
 * digits, `_ . -`, and single spaces between words ("First Name"). A name with a character
 * outside these would not be a placeholder at all, and would reach the inbox as written.
 */
export const PLACEHOLDER_SOURCE = String.raw`\{\{\s*([\p{L}\p{M}\p{N}_.\-]+(?:[ \t]+[\p{L}\p{M}\p{N}_.\-]+)*)\s*\}\}`;
const PLACEHOLDER = new RegExp(PLACEHOLDER_SOURCE, "gu");

export type TemplateMode = "html" | "text";

export function placeholders(template: string): string[] {
  return [...new Set([...template.matchAll(PLACEHOLDER)].map((m) => m[1]!))];
}

/**
 * How a name is compared when it is not spelled as the column is: case, accents composed or not,
 * and spaces, hyphens and underscores between words do not matter ({{first_name}} is the
 * column "First Name"), as a spreadsheet's header is written for people.
 */
export function looseName(name: string): string {
  return name.normalize("NFC").toLowerCase().trim().replace(/[\s_\-]+/g, "_");
}

function stringOf(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v);
}

/** The variable a placeholder names: spelled as it is, else the one variable spelled loosely the same. */
function valueOf(vars: Record<string, unknown>, name: string): string | undefined {
  if (Object.hasOwn(vars, name)) return stringOf(vars[name]);
  const loose = looseName(name);
  const same = Object.keys(vars).filter((k) => looseName(k) === loose);
  return same.length === 1 ? stringOf(vars[same[0]!]) : undefined;
}

export function render(template: string, vars: Record<string, unknown>, mode: TemplateMode, what: string): string {
  const missing = placeholders(template).filter((p) => valueOf(vars, p) === undefined);
  if (missing.length > 0) {
    const names = Object.keys(vars);
    const have = names.length > 0 ? ` This row's variables: ${names.slice(0, 20).join(", ")}${names.length > 20 ? ", ..." : ""}.` : "";
    throw new MailsendError("invalid_message", `${what}: no value for ${missing.map((m) => `{{${m}}}`).join(", ")}`, {
      hint: `Add the column (CSV) or field (JSON) to every row, or remove the placeholder.${have}`,
    });
  }
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const v = valueOf(vars, name)!;
    return mode === "html" ? escapeHtml(v) : v;
  });
}
