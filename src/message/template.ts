/**
 * `{{column}}` placeholders filled per row: HTML-escaped in HTML templates,
 * as they are in text and subjects. A placeholder the row has no value for
 * (no such field, or an empty CSV cell) is an error for that row, never an
 * empty string in someone's inbox ("Dear ,"), unless the placeholder gives
 * its own default: `{{first_name|there}}`, or `{{company|}}` for nothing.
 */
import { MailsendError } from "../core/errors.js";
import { escapeHtml } from "../core/message.js";

/**
 * A placeholder's name: letters of any script (spreadsheets say "Prénom", "Straße", "名前"),
 * digits, `_ . -`, and single spaces between words ("First Name"). A name with a character
 * outside these would not be a placeholder at all, and would reach the inbox as written.
 * After a `|`, the text used when the row's value is missing or empty.
 */
export const PLACEHOLDER_SOURCE = String.raw`\{\{\s*([\p{L}\p{M}\p{N}_.\-]+(?:[ \t]+[\p{L}\p{M}\p{N}_.\-]+)*)\s*(?:\|\s*([^{}|]*?))?\s*\}\}`;
const PLACEHOLDER = new RegExp(PLACEHOLDER_SOURCE, "gu");

export type TemplateMode = "html" | "text";

export function placeholders(template: string): string[] {
  return [...new Set([...template.matchAll(PLACEHOLDER)].map((m) => m[1]!))];
}

/**
 * Braces that are not part of a placeholder: `{{ first_name }` (a typo), `{{user.name | upcase}}`
 * (another template language), `{{<span>name</span>}}` (an editor split it). Nothing fills them,
 * so they would reach every inbox as written; up to three, each with a little context.
 */
export function strayBraces(template: string): string[] {
  const rest = template.replace(PLACEHOLDER, (m) => "\0".repeat(m.length));
  const out: string[] = [];
  let shownTo = 0;
  // Only openings: a lone "}}" is ordinary in CSS (@media screen{.a{color:red}}).
  for (const m of rest.matchAll(/\{\{/g)) {
    if (out.length === 3) break;
    // A brace inside the last snippet shown is in it already.
    if (m.index < shownTo) continue;
    const from = Math.max(0, m.index - 15);
    shownTo = Math.min(template.length, m.index + 30);
    out.push(
      `${from > 0 ? "..." : ""}${template.slice(from, shownTo).replace(/\s+/g, " ")}${shownTo < template.length ? "..." : ""}`,
    );
  }
  return out;
}

/**
 * How a name is compared when it is not spelled as the column is: case, accents composed or not,
 * and spaces, hyphens and underscores between words do not matter ({{first_name}} is the
 * column "First Name"), as a spreadsheet's header is written for people.
 */
export function looseName(name: string): string {
  return name
    .normalize("NFC")
    .toLowerCase()
    .trim()
    .replace(/[\s_-]+/g, "_");
}

function stringOf(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v);
}

/** The variable a placeholder names: spelled as it is, else the one variable spelled loosely the same. */
function variableValue(vars: Record<string, unknown>, name: string): string | undefined {
  if (Object.hasOwn(vars, name)) return stringOf(vars[name]);
  const loose = looseName(name);
  const same = Object.keys(vars).filter((k) => looseName(k) === loose);
  return same.length === 1 ? stringOf(vars[same[0]!]) : undefined;
}

export function render(template: string, vars: Record<string, unknown>, mode: TemplateMode, what: string): string {
  const missing = new Map<string, string>();
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (m[2] !== undefined || missing.has(m[1]!)) continue;
    const v = variableValue(vars, m[1]!);
    if (v === undefined) missing.set(m[1]!, `{{${m[1]}}}`);
    else if (!v.trim()) missing.set(m[1]!, `{{${m[1]}}} (empty)`);
  }
  if (missing.size > 0) {
    const names = Object.keys(vars);
    const have =
      names.length > 0
        ? ` This row's variables: ${names.slice(0, 20).join(", ")}${names.length > 20 ? ", ..." : ""}.`
        : "";
    const empty = [...missing.values()].some((m) => m.endsWith("(empty)"));
    const name = [...missing.keys()][0];
    throw new MailsendError("invalid_message", `${what}: no value for ${[...missing.values()].join(", ")}`, {
      hint: empty
        ? `Fill the empty cell (field), or give the placeholder a default for rows without one: {{${name}|text}} ({{${name}|}} for nothing).${have}`
        : `Add the column (CSV) or field (JSON) to every row, or remove the placeholder.${have}`,
    });
  }
  return template.replace(PLACEHOLDER, (_, name: string, fallback: string | undefined) => {
    const v = variableValue(vars, name);
    const out = v === undefined || !v.trim() ? fallback! : v;
    return mode === "html" ? escapeHtml(out) : out;
  });
}
