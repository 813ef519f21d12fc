/**
 * `{{column}}` placeholders filled per row: HTML-escaped in HTML templates,
 * as they are in text and subjects. A placeholder the row has no value for
 * is an error for that row, never an empty string in someone's inbox.
 */
import { MailsendError } from "../core/errors.js";
import { escapeHtml } from "../core/message.js";

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}/g;

export type TemplateMode = "html" | "text";

export function placeholders(template: string): string[] {
  return [...new Set([...template.matchAll(PLACEHOLDER)].map((m) => m[1]!))];
}

function valueOf(vars: Record<string, unknown>, name: string): string | undefined {
  const v = vars[name];
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v);
}

export function render(template: string, vars: Record<string, unknown>, mode: TemplateMode, what: string): string {
  const missing = placeholders(template).filter((p) => valueOf(vars, p) === undefined);
  if (missing.length > 0) {
    throw new MailsendError("invalid_message", `${what}: no value for ${missing.map((m) => `{{${m}}}`).join(", ")}`, {
      hint: "Add the column (CSV) or field (JSON) to every row, or remove the placeholder.",
    });
  }
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const v = valueOf(vars, name)!;
    return mode === "html" ? escapeHtml(v) : v;
  });
}
