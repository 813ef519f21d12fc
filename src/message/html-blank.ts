/**
 * An HTML body that shows nothing unless its scripts run: single-page test reports (Playwright,
 * Allure, jest-html-reporters, Vite-built dashboards) write an empty <div id="root"> and build
 * the page with JavaScript, which no mail client runs. Sent as the body, the mail is blank.
 * A cheap look, only when the HTML has a <script> at all: no parser is loaded for it.
 */
const SCRIPT = /<script\b/i;
const HIDDEN = /<(script|style|head|template|noscript|title)\b[^>]*>[\s\S]*?<\/\1\s*>|<!--[\s\S]*?(?:-->|$)/gi;
/** Elements that show something without any text. */
const SHOWS = /<(?:img|svg|video|picture|input|button|hr|iframe|object|embed)\b/i;

export function blankWithoutScript(html: string): boolean {
  if (!SCRIPT.test(html)) return false;
  const shown = html.replace(HIDDEN, " ");
  if (SHOWS.test(shown)) return false;
  const text = shown.replace(/<[^>]*>/g, " ").replace(/&(?:nbsp|#160|#xa0|zwnj|#8203);/gi, " ");
  return !/\S/.test(text);
}
