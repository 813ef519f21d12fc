/**
 * Each setting and what each front end calls it: the CLI's flag and environment variable, the
 * library's option. An error about a setting carries its name here (MailsendError.setting), and
 * the front end that reports it says that name in its own words: a message or hint that names a
 * setting is written as words (`(say) => ...`), which each front end says with its own `Say`.
 * The table sits in core because errors of every room name settings.
 */

export interface SettingWords {
  /** The CLI's flag. */
  flag?: string;
  /** The environment variable (the CLI's, sendmail's, and the library's options.env). */
  env?: string;
  /** The library's option, as a path under `options`. */
  option?: string;
}

/** A setting, by the name errors carry (MailsendError.setting). */
export type Setting =
  | "transport"
  | "baseUrl"
  | "smtpHost"
  | "smtpPort"
  | "smtpTls"
  | "smtpUser"
  | "smtpProxy"
  | "proxy"
  | "apiKey"
  | "apiKeyFile"
  | "caFile"
  | "insecure"
  | "timeout"
  | "rateLimit"
  | "rateWindow"
  | "rateReserve"
  | "rateLimitUrl"
  | "retries"
  | "maxWait"
  | "deadline"
  | "stateDir"
  | "notices"
  | "queueWarnAfter"
  | "postmaster";

export const SETTINGS: Readonly<Record<Setting, SettingWords>> = {
  transport: { flag: "--transport", env: "MAILSEND_TRANSPORT", option: "transport" },
  baseUrl: { flag: "--base-url", env: "MAILSEND_BASE_URL", option: "baseUrl" },
  smtpHost: { flag: "--smtp-host", env: "MAILSEND_SMTP_HOST", option: "smtp.host" },
  smtpPort: { flag: "--smtp-port", env: "MAILSEND_SMTP_PORT", option: "smtp.port" },
  smtpTls: { flag: "--smtp-tls", env: "MAILSEND_SMTP_TLS", option: "smtp.tls" },
  smtpUser: { flag: "--smtp-user", env: "MAILSEND_SMTP_USER", option: "smtp.user" },
  smtpProxy: { flag: "--smtp-proxy", env: "MAILSEND_SMTP_PROXY", option: "smtp.proxy" },
  proxy: { flag: "--proxy", env: "MAILSEND_PROXY", option: "proxy" },
  apiKey: { flag: "--api-key-stdin", env: "MAILSEND_API_KEY", option: "apiKey" },
  apiKeyFile: { env: "MAILSEND_API_KEY_FILE", option: "apiKeyFile" },
  caFile: { flag: "--ca-file", env: "MAILSEND_CA_FILE", option: "caFile" },
  insecure: { flag: "--insecure", option: "insecure" },
  timeout: { flag: "--timeout", env: "MAILSEND_TIMEOUT", option: "timeoutMs" },
  rateLimit: { flag: "--rate-limit", env: "MAILSEND_RATE_LIMIT", option: "rateLimit" },
  rateWindow: { env: "MAILSEND_RATE_WINDOW", option: "rateWindowMs" },
  rateReserve: { env: "MAILSEND_RATE_RESERVE" },
  rateLimitUrl: { env: "MAILSEND_RATE_LIMIT_URL", option: "rateLimitUrl" },
  retries: { flag: "--retries", env: "MAILSEND_RETRIES", option: "retries" },
  maxWait: { flag: "--max-wait", env: "MAILSEND_MAX_WAIT", option: "maxWaitMs" },
  deadline: { flag: "--deadline", env: "MAILSEND_DEADLINE", option: "deadlineMs" },
  stateDir: { env: "MAILSEND_STATE_DIR", option: "stateDir" },
  // The outbox's notices (settings/notices.ts): read by the runner from the environment and the profile.
  notices: { env: "MAILSEND_NOTICES" },
  queueWarnAfter: { env: "MAILSEND_QUEUE_WARN_AFTER" },
  postmaster: { env: "MAILSEND_POSTMASTER" },
};

/** Who reads the settings and reports on them: the CLI (flags), the library (options), sendmail's callers (variables only). */
export type Front = "cli" | "api" | "sendmail";

/** Where a value came from: a flag or an option (what the front end was given), or the environment. */
export type Source = "given" | "env";

/**
 * A setting as `front` names it. From a known source, that one (`--timeout`, `MAILSEND_TIMEOUT`,
 * `options.timeoutMs`, `options.env.MAILSEND_TIMEOUT`); without one, every way the front end
 * has to set it (`--base-url / MAILSEND_BASE_URL`).
 */
export function settingName(setting: Setting, front: Front, source?: Source): string {
  const w: SettingWords = SETTINGS[setting];
  if (front === "api")
    return source === "env" || w.option === undefined ? `options.env.${w.env}` : `options.${w.option}`;
  if (front === "sendmail" || source === "env" || w.flag === undefined) return w.env ?? w.flag!;
  if (source === "given" || w.env === undefined) return w.flag;
  return `${w.flag} / ${w.env}`;
}

/**
 * What a message or the send command calls a field that is not a setting: the CLI's flag and the
 * library's name for the same (a field of the message, an option of sendBatch).
 */
/** A field of the message or of a batch that the send command takes as a flag. */
export type Field =
  | "from"
  | "to"
  | "cc"
  | "bcc"
  | "subject"
  | "replyTo"
  | "name"
  | "header"
  | "htmlFile"
  | "textFile"
  | "idempotencyKey"
  | "journal"
  | "fresh"
  | "resume"
  | "noWait"
  | "noEmbed";

export const FIELDS: Readonly<Record<Field, { flag: string; option: string }>> = {
  from: { flag: "--from", option: "from" },
  to: { flag: "--to", option: "to" },
  cc: { flag: "--cc", option: "cc" },
  bcc: { flag: "--bcc", option: "bcc" },
  subject: { flag: "--subject", option: "subject" },
  replyTo: { flag: "--reply-to", option: "reply_to" },
  name: { flag: "--name", option: "name" },
  header: { flag: "--header", option: "headers" },
  htmlFile: { flag: "--html-file", option: "template.html" },
  textFile: { flag: "--text-file", option: "template.text" },
  idempotencyKey: { flag: "--idempotency-key", option: "idempotencyKey" },
  journal: { flag: "--journal", option: "journal" },
  fresh: { flag: "--fresh", option: "fresh" },
  // Not an option of sendBatch (which resumes a journal when it matches): the word, for the rare message.
  resume: { flag: "--resume", option: "resume" },
  noWait: { flag: "--no-wait", option: "wait: false" },
  // The library never embeds images itself: attachments given a cid are what it means there.
  noEmbed: { flag: "--no-embed", option: "attachments without a cid" },
};

/** A front end's way of saying settings and fields inside a sentence. */
export interface Say {
  readonly front: Front;
  /** What one sets it with: `--timeout`, `timeoutMs`, `MAILSEND_TIMEOUT` (a field keeps its flag for sendmail). */
  flag(name: Setting | Field): string;
  /** Its variable, or a variable of no setting: `MAILSEND_API_KEY`, `apiKey`; `env.MAILSEND_MAX_SIZE` in the library. */
  env(name: Setting | string): string;
  /** Every way to set it, joined by `join`: `--base-url / MAILSEND_BASE_URL`, `baseUrl`, `MAILSEND_BASE_URL`. */
  either(setting: Setting, join?: string): string;
  /** A pair set together: `--smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT)`, `smtp.host / smtp.port`. */
  pair(a: Setting, b: Setting, withVariables?: boolean, join?: string): string;
  /**
   * A setting with its value: `--smtp-tls implicit`, `smtp.tls: "implicit"`, `MAILSEND_SMTP_TLS=implicit`;
   * withVariable adds the variable to the CLI's: `--smtp-tls implicit (MAILSEND_SMTP_TLS=implicit)`.
   */
  value(setting: Setting, value: string, withVariable?: boolean): string;
  /** Resending with this key: `--idempotency-key K`, `idempotencyKey K`, the header for sendmail's callers. */
  idempotencyKey(key: string | undefined): string;
  /** A phrase each front end words its own way (sendmail's callers read the CLI's unless given theirs). */
  pick(words: { cli: string; api: string; sendmail?: string }): string;
}

/** Words of a front end that name settings; a plain string names none. */
export type Words = (say: Say) => string;

const isSetting = (name: string): name is Setting => Object.hasOwn(SETTINGS, name);
const words = (name: Setting | Field): { flag?: string; env?: string; option?: string } =>
  isSetting(name) ? SETTINGS[name] : FIELDS[name as Field];

function sayer(front: Front): Say {
  const option = (name: Setting | Field) => words(name).option ?? name;
  const say: Say = {
    front,
    flag: (name) => {
      const w = words(name);
      if (front === "api") return option(name);
      return (front === "sendmail" ? (w.env ?? w.flag) : (w.flag ?? w.env))!;
    },
    env: (name) => {
      if (!isSetting(name)) return front === "api" ? `env.${name}` : name;
      const w: SettingWords = SETTINGS[name];
      return front === "api" ? w.option! : w.env!;
    },
    either: (setting, join = " / ") => {
      const w: SettingWords = SETTINGS[setting];
      if (front === "api") return w.option!;
      if (front === "sendmail" || w.flag === undefined) return w.env!;
      return w.env === undefined ? w.flag : `${w.flag}${join}${w.env}`;
    },
    pair: (a, b, withVariables = false, join = " / ") => {
      if (front === "cli")
        return `${say.flag(a)}${join}${say.flag(b)}${withVariables ? ` (${say.env(a)}${join}${say.env(b)})` : ""}`;
      return `${say.flag(a)}${join}${say.flag(b)}`;
    },
    value: (setting, value, withVariable = false) => {
      const w: SettingWords = SETTINGS[setting];
      if (front === "api") return `${w.option}: "${value}"`;
      return front === "sendmail"
        ? `${w.env}=${value}`
        : `${w.flag} ${value}${withVariable ? ` (${w.env}=${value})` : ""}`;
    },
    idempotencyKey: (key) =>
      front === "sendmail" ? `the header X-Idempotency-Key: ${key}` : `${say.flag("idempotencyKey")} ${key}`,
    pick: (p) => (front === "api" ? p.api : front === "sendmail" ? (p.sendmail ?? p.cli) : p.cli),
  };
  return say;
}

/** Each front end's Say. */
export const SAY: Readonly<Record<Front, Say>> = { cli: sayer("cli"), api: sayer("api"), sendmail: sayer("sendmail") };
