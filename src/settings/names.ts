/**
 * Each setting and what each front end calls it: the CLI's flag and environment variable, the
 * library's option. An error about a setting carries its name here (MailsendError.setting), and
 * the front end that reports it says that name in its own words.
 */

export interface SettingWords {
  /** The CLI's flag. */
  flag?: string;
  /** The environment variable (the CLI's, sendmail's, and the library's options.env). */
  env?: string;
  /** The library's option, as a path under `options`. */
  option?: string;
}

export const SETTINGS = {
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
  rateLimitUrl: { env: "MAILSEND_RATE_LIMIT_URL", option: "rateLimitUrl" },
  retries: { flag: "--retries", env: "MAILSEND_RETRIES", option: "retries" },
  maxWait: { flag: "--max-wait", env: "MAILSEND_MAX_WAIT", option: "maxWaitMs" },
  deadline: { flag: "--deadline", env: "MAILSEND_DEADLINE", option: "deadlineMs" },
  stateDir: { env: "MAILSEND_STATE_DIR", option: "stateDir" },
  // The outbox's notices (settings/notices.ts): read by the runner from the environment and the profile.
  notices: { env: "MAILSEND_NOTICES" },
  queueWarnAfter: { env: "MAILSEND_QUEUE_WARN_AFTER" },
  postmaster: { env: "MAILSEND_POSTMASTER" },
} as const satisfies Record<string, SettingWords>;

export type Setting = keyof typeof SETTINGS;

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
  if (front === "api") return source === "env" || w.option === undefined ? `options.env.${w.env}` : `options.${w.option}`;
  if (front === "sendmail" || source === "env" || w.flag === undefined) return w.env ?? w.flag!;
  if (source === "given" || w.env === undefined) return w.flag;
  return `${w.flag} / ${w.env}`;
}
