/**
 * Secrets typed on the command line: the options mailsend refuses to have
 * (a key as an option's value would stay in `ps`, shell history and CI
 * logs), and commander's messages made safe to print. Loaded with the
 * program (it is small); the refusal itself is built only when needed.
 */
import { MailsendError } from "../core/errors.js";

/**
 * Options that would carry a secret on the command line, where `ps`, shell
 * history and CI logs keep it. mailsend has none of them on purpose;
 * `--api-key-stdin` is the one key option there is.
 */
export const SECRET_OPTION = /^--(?:api[-_]?key|apikey|key|token|auth[-_]?token|password|passwd|pass|secret)(?==|$)/i;

/** Where a key goes instead. */
export const KEY_HINT =
  "Put the API key in the environment (MAILSEND_API_KEY, e.g. from a CI secret), or in a file named by MAILSEND_API_KEY_FILE, or pipe it with --api-key-stdin.";

/** Whether a word is one of SECRET_OPTION's options (with or without `=value`). */
export function isSecretOption(word: string): boolean {
  return SECRET_OPTION.test(word);
}

/**
 * The refusal of `--api-key KEY`, `--token=KEY`, `--password KEY`…: where the
 * key goes instead. The value is never repeated (not even in part). Words
 * after `--` are arguments, not options.
 */
export function secretOptionError(argv: readonly string[]): MailsendError | undefined {
  const end = argv.indexOf("--");
  const word = (end < 0 ? argv : argv.slice(0, end)).find(isSecretOption);
  if (word === undefined) return undefined;
  const flag = word.includes("=") ? word.slice(0, word.indexOf("=")) : word;
  const password = /pass/i.test(flag);
  return new MailsendError(
    "usage",
    `${flag} is not an option: mailsend never takes a key${password ? " or password" : ""} on the command line, where ps, shell history and CI logs would keep it (the value was not used and is not shown)`,
    {
      hint:
        KEY_HINT +
        (password
          ? " Over SMTP the key is the password. A Redis password goes in a file named by MAILSEND_RATE_LIMIT_PASSWORD_FILE."
          : ""),
    },
  );
}

/**
 * Commander's messages as they may be printed: the value of an unknown
 * `--opt=value` is cut off (it may be a key pasted after the wrong option),
 * and an invalid option argument is not repeated when it looks like a
 * secret (a long unbroken token, or a key's prefix) rather than a typo.
 */
export function hideOptionValues(message: string): string {
  return message
    .replace(/'(--?[^'=\s]+)=[^']*'/g, "'$1=…' (the value is not shown)")
    .replace(/argument '([^']*)' is invalid/g, (whole, value: string) =>
      looksSecret(value) ? `argument (${value.length} characters, not shown) is invalid` : whole,
    );
}

/** A value that could be a key: 16+ characters without spaces, or a known key prefix. */
export function looksSecret(value: string): boolean {
  return /^(?:msk|sk|pk|rk|key|ghp|gho|ghs|xox[abp])[_-]/i.test(value) || (value.length >= 16 && !/\s/.test(value));
}

export { looksLikeKey } from "../core/redact.js";
