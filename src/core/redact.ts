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
    // Most texts hold none of them (a batch redacts every message id): look before splitting.
    for (const f of forms) if (out.includes(f)) out = out.split(f).join(REDACTED);
    return out;
  };
}

/**
 * Any URL in `text` without its userinfo (`redis://user:secret@host` ->
 * `redis://host`), for printing a URL from the environment: an error about a
 * URL that does not parse must not print the password in it either.
 * The authority ends at the last "@" of the URL's run of non-blank
 * characters; an "@" after a path (`https://host/a@b`) is left alone unless
 * a ":" before the first "/" says it is a password holding a "/".
 */
export function stripUserinfo(text: string): string {
  return (
    text
      .replace(/\b([a-z][a-z0-9+.-]*:\/\/)(\S*)/gi, (whole: string, scheme: string, rest: string) => {
        const at = rest.lastIndexOf("@");
        if (at < 0) return whole;
        const before = rest.slice(0, at);
        // "redis://[user:password@]host": a placeholder in a usage text, not a password.
        if (before.startsWith("[")) return whole;
        const cut = before.search(/[/?#]/);
        if (cut >= 0 && !before.slice(0, cut).includes(":")) return whole;
        return scheme + rest.slice(at + 1);
      })
      // A URL that does not parse may hold a password with a space in it (`redis://:my pass@host`):
      // a "user:" right after the scheme, then an "@" on the same line, is userinfo all the same.
      // (Not a host's port followed by prose: "http://host:8025 or mail a@b".)
      .replace(/\b([a-z][a-z0-9+.-]*:\/\/)(?!\[)[^\s@/?#[\]]*:(?!\d+\s)[^\n@/?#]{0,256}@/gi, "$1")
  );
}

/**
 * Text on its way to a terminal, a log or --json: every URL without its
 * userinfo. The one pass every printing path (errors, hints, warnings,
 * doctor) makes; the key itself is kept out by makeRedactor where it is known.
 */
export function redactForPrint(text: string): string {
  return hideKeyLikeWords(stripUserinfo(text));
}

/** What a key-like value a person typed where another value goes is shown as, wherever it is repeated. */
export const KEY_NOT_SHOWN = "(a value that looks like an API key, not shown)";

/** A key's prefix (msk_…, sk_…): strong enough to find one inside a path or a URL. */
const KEY_PREFIXED = /^(?:msk|sk|pk|rk|ghp|gho|ghs|xox[abp])_[\w-]{8,}$/i;

/**
 * `text` with every word that looks like a key (looksLikeKey) replaced by KEY_NOT_SHOWN: a key
 * pasted after the wrong option (-t, --profile, --attach, --smtp-host…) comes back in the error
 * that quotes it, whoever built that message. A word is what stands between blanks, quotes and
 * brackets; a prefixed key is found in a host:port, a URL or a path too, where a long plain word
 * (a temp dir's name) is left alone.
 */
export function hideKeyLikeWords(text: string): string {
  if (!/[\w-]{8}/.test(text)) return text;
  return text.replace(/[^\s"'`()<>[\]{},;]{8,}/g, (word) => {
    const core = word.replace(/^[.:!?=]+|[.:!?]+$/g, "");
    // NAME=value (an environment variable in a hint) is two words; a key's own "=" is only its padding at the end.
    if (!/=[^=]/.test(core) && looksLikeKey(core)) return word.replace(core, KEY_NOT_SHOWN);
    // host:port: each side a word of its own; in a path, a URL or an address only a key's prefix counts.
    const named = /[@/.]/.test(core);
    return word.replace(/[^:@/.=]+/g, (piece) =>
      KEY_PREFIXED.test(piece) || (!named && looksLikeKey(piece)) ? KEY_NOT_SHOWN : piece,
    );
  });
}

/**
 * A bare word that is probably a key pasted onto the command line (`mailsend
 * send -s hi msk_live_…`): a key's prefix, or a long token of letters and
 * digits with nothing of a path, an address or a sentence in it (a commit's
 * hex SHA, a UUID or an environment variable's NAME is not one: `-s Build 3f9a…` is a subject to quote).
 */
export function looksLikeKey(word: string): boolean {
  return (
    KEY_PREFIXED.test(word) ||
    (word.length >= 24 &&
      /[a-z]/.test(word) &&
      /\d/.test(word) &&
      /^[\w+=-]+$/.test(word) &&
      !/^[0-9a-f-]+$/i.test(word))
  );
}

/** A word typed where a name or an id goes, as an error may repeat it: only its length when it looks like a key. */
export function shownWord(word: string, show: (w: string) => string = (w) => w): string {
  return looksLikeKey(word) ? KEY_NOT_SHOWN : show(word);
}

/**
 * The SMTP username as it may be printed (a dry run's AUTH line, a 535's hint): itself, unless it
 * is the key (a username copied from the password line) or looks like one; then only its length.
 */
export function shownSmtpUser(user: string, apiKey?: string): string {
  return (apiKey !== undefined && apiKey !== "" && user === apiKey) || looksLikeKey(user)
    ? `${REDACTED} (${user.length} characters: it looks like a key)`
    : user;
}
