/**
 * One place that knows every shape in which the key could leak into a log:
 * as itself, as the base64 of AUTH LOGIN's password line, and inside AUTH
 * PLAIN's base64 "\0user\0key" blob.
 */
export const REDACTED = "[redacted]";

export function makeRedactor(secret: string | undefined, user = "mailsend"): (s: string) => string {
  if (!secret) return (s) => s;
  const forms = [
    secret,
    Buffer.from(secret).toString("base64"),
    Buffer.from(`\0${user}\0${secret}`).toString("base64"),
    Buffer.from(`${user}\0${user}\0${secret}`).toString("base64"),
    encodeURIComponent(secret),
  ].filter((f, i, all) => f.length > 0 && all.indexOf(f) === i);
  // Longest first, so a form containing another is replaced whole.
  forms.sort((a, b) => b.length - a.length);
  return (s) => {
    let out = s;
    for (const f of forms) out = out.split(f).join(REDACTED);
    return out;
  };
}
