/**
 * The library speaks its own vocabulary. Errors, hints and warnings are
 * written once, in the CLI's terms (`--base-url / MAILSEND_BASE_URL`, `raise
 * --timeout`), because the CLI is where most people meet them; at the API's
 * edge (send, sendBatch) they are put in the API's terms (`baseUrl`, `raise
 * timeoutMs`), so a program's log never tells its user to pass a flag the
 * program does not have. test/unit/api-terms.test.ts runs every hint in the
 * sources through this and checks that no flag or variable name is left.
 */
import { reworded, type MailsendError } from "../core/errors.js";

/** A CLI flag and the option (or message field) of the API that sets the same thing. */
const FLAGS: ReadonlyArray<[string, string]> = [
  ["--api-key-stdin", "apiKey"],
  ["--base-url", "baseUrl"],
  ["--smtp-host", "smtp.host"],
  ["--smtp-port", "smtp.port"],
  ["--smtp-tls", "smtp.tls"],
  ["--smtp-user", "smtp.user"],
  ["--smtp-proxy", "smtp.proxy"],
  ["--proxy", "proxy"],
  ["--transport", "transport"],
  ["--timeout", "timeoutMs"],
  ["--max-wait", "maxWaitMs"],
  ["--no-wait", "wait: false"],
  ["--retries", "retries"],
  ["--deadline", "deadlineMs"],
  ["--rate-limit", "rateLimit"],
  ["--ca-file", "caFile"],
  ["--insecure", "insecure"],
  ["--idempotency-key", "idempotencyKey"],
  ["--verbose", "trace"],
  ["--from", "from"],
  ["--to", "to"],
  ["--cc", "cc"],
  ["--bcc", "bcc"],
  ["--subject", "subject"],
  ["--reply-to", "reply_to"],
  ["--name", "name"],
  ["--html-file", "template.html"],
  ["--text-file", "template.text"],
  ["--html", "html"],
  ["--text", "text"],
  ["--attach", "attachments"],
  ["--header", "headers"],
  ["--journal", "journal"],
  ["--fresh", "fresh"],
  // Not an option of sendBatch (which resumes a journal when it matches): the word, for the rare message.
  ["--resume", "resume"],
  // The library never embeds images itself: attachments given a cid are what it means there.
  ["--no-embed", "attachments without a cid"],
];

/** Environment variables and the option that does the same (the longest names first). */
const VARIABLES: ReadonlyArray<[string, string]> = [
  ["MAILSEND_API_KEY_FILE", "apiKeyFile"],
  ["MAILSEND_API_KEY", "apiKey"],
  ["MAILSEND_BASE_URL", "baseUrl"],
  ["MAILSEND_SMTP_HOST", "smtp.host"],
  ["MAILSEND_SMTP_PORT", "smtp.port"],
  ["MAILSEND_SMTP_TLS", "smtp.tls"],
  ["MAILSEND_SMTP_USER", "smtp.user"],
  ["MAILSEND_SMTP_PROXY", "smtp.proxy"],
  ["MAILSEND_PROXY", "proxy"],
  ["MAILSEND_TRANSPORT", "transport"],
  ["MAILSEND_TIMEOUT", "timeoutMs"],
  ["MAILSEND_MAX_WAIT", "maxWaitMs"],
  ["MAILSEND_RETRIES", "retries"],
  ["MAILSEND_DEADLINE", "deadlineMs"],
  ["MAILSEND_RATE_LIMIT_URL", "rateLimitUrl"],
  ["MAILSEND_RATE_LIMIT", "rateLimit"],
  ["MAILSEND_RATE_WINDOW", "rateWindowMs"],
  ["MAILSEND_STATE_DIR", "stateDir"],
  ["MAILSEND_CA_FILE", "caFile"],
  ["NODE_EXTRA_CA_CERTS", "caFile"],
];

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const VAR = "(?:MAILSEND_[A-Z_]+|NODE_EXTRA_CA_CERTS)(?:=[^\\s),;]*)?";

/** Whole phrases that only make sense on a command line, in the API's words. */
const PHRASES: ReadonlyArray<[RegExp, string]> = [
  [/Pipe it: mailsend send --api-key-stdin \.\.\. < keyfile/g, "Pass apiKey (or apiKeyFile)."],
  [/Run again with --verbose and report the output \(it never contains your key\)\./g, "Pass a trace function to see the exchange, and report it (it never contains your key)."],
  // "--smtp-tls implicit" -> smtp.tls "implicit": a value after a flag becomes a quoted option value.
  [/--smtp-tls (starttls|implicit)\b/g, 'smtp.tls: "$1"'],
  [/--transport (rest|smtp)\b/g, 'transport: "$1"'],
  // Word by word these would read "pass caFile <pem> or set caFile": one option does what the three do.
  [/pass --ca-file <pem> or set (?:MAILSEND_CA_FILE or )?NODE_EXTRA_CA_CERTS/g, "set caFile to its CA certificate (a PEM file)"],
  [/set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file, or pass --ca-file <pem>/g, "set caFile to its PEM file"],
  // A batch input file's encoding: sendBatch takes items, not a file; only re-saving it applies.
  [/, or name its encoding: --encoding [\w-]+/g, ""],
];

/** A CLI sentence in the API's terms. */
export function inApiTerms(text: string): string {
  // A command to run (`mailsend sandbox keys add --save`) stays as it is.
  const kept: string[] = [];
  let s = text.replace(/`mailsend [^`]*`/g, (c) => `\u0000${kept.push(c) - 1}\u0000`);
  for (const [re, to] of PHRASES) s = s.replace(re, to);
  // "--flag / MAILSEND_X", "--flag or MAILSEND_X", "--flag (MAILSEND_X=...)": the flag alone says it.
  const FLAG = `(--[a-z][a-z-]*|[A-Za-z.]+: "[a-z]+")`;
  s = s.replace(new RegExp(`${FLAG}\\s*\\((?:or )?${VAR}(?:\\s*(?:/|,|or)\\s*${VAR})*\\)`, "g"), "$1");
  s = s.replace(new RegExp(`${FLAG}\\s*(?:/|or)\\s*${VAR}`, "g"), "$1");
  for (const [flag, option] of FLAGS) s = s.replace(new RegExp(`${escape(flag)}(?![a-z-])`, "g"), option);
  // options.env.MAILSEND_X is already the library's name for where the value came from.
  for (const [name, option] of VARIABLES) s = s.replace(new RegExp(`(?<!env\\.)${escape(name)}(?:=[^\\s),;]*)?(?![A-Z_])`, "g"), option);
  // A variable with no option of its own is read from options.env.
  s = s.replace(/(?<![\w.])MAILSEND_[A-Z_]+/g, "env.$&");
  // What the rewriting may leave: "baseUrl / baseUrl", "apiKey (or apiKey)".
  s = s.replace(/\b([\w.]+) (?:\/|or) \1\b/g, "$1").replace(/\b([\w.]+) \(or \1\)/g, "$1");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i: string) => kept[Number(i)]!);
}

/** The same error, its message and hint in the API's terms (everything else kept). */
export function errorInApiTerms(e: MailsendError): MailsendError {
  return reworded(e, inApiTerms);
}

/** Each flag and the variable that sets the same thing (through the option both name). */
const FLAG_VARIABLES = new Map(FLAGS.flatMap(([flag, option]) => VARIABLES.filter(([, o]) => o === option).map(([name]) => [flag, name] as const)));

/**
 * A sentence of the send path in the terms of sendmail's callers (cron, PHP, mail), who have no
 * flags: "--smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT)" becomes the
 * variables, "--transport rest" MAILSEND_TRANSPORT=rest, "--idempotency-key K" the header.
 */
export function inSendmailTerms(text: string): string {
  return (
    text
      // "--a / --b (MAILSEND_A / MAILSEND_B)": the part in parentheses.
      .replace(/(--[a-z][a-z-]*(?: \/ --[a-z][a-z-]*)*) \((MAILSEND_[A-Z_]+(?: \/ MAILSEND_[A-Z_]+)*)\)/g, "$2")
      // "resending with --idempotency-key K": in a message handed to sendmail, the key is a header.
      .replace(/--idempotency-key (\S+?)(?=[\s).,;]|$)/g, "the header X-Idempotency-Key: $1")
      // "--base-url / MAILSEND_BASE_URL": the variable.
      .replace(/--[a-z][a-z-]* \/ (MAILSEND_[A-Z_]+)/g, "$1")
      // "--transport rest", "--timeout": the variable, with its value.
      .replace(/(--[a-z][a-z-]*)(?![a-z-])( (?:rest|smtp|auto|starttls|implicit)\b)?/g, (all: string, flag: string, value: string | undefined) => {
        const name = FLAG_VARIABLES.get(flag);
        return name ? `${name}${value ? `=${value.trim()}` : ""}` : all;
      })
  );
}

/** The same error, its message and hint in sendmail's callers' terms (everything else kept). */
export function errorInSendmailTerms(e: MailsendError): MailsendError {
  return reworded(e, inSendmailTerms);
}
