/**
 * `--inline-css`: the rules of <style> blocks copied onto the elements they
 * match (juice, loaded only when the HTML has a <style>), for clients that
 * drop <style>. Media queries and @font-face stay in a <style> block, where
 * the clients that read them find them.
 */
export async function inlineCss(html: string): Promise<string> {
  if (!/<style[\s>]/i.test(html)) return html;
  const { default: juice } = await import("juice");
  return juice(html, {
    preserveMediaQueries: true,
    preserveFontFaces: true,
    preserveKeyFrames: true,
    preservePseudos: true,
    applyWidthAttributes: true,
    applyHeightAttributes: false,
  });
}
