import { MailsendError } from "./errors.js";
import type { TransportName } from "./transport.js";

export type SmtpTlsMode = "starttls" | "implicit";

export interface TlsOptions {
  /** PEM file with extra CA certificates to trust. */
  caFile?: string;
  /** Skip certificate verification (loud warning in the CLI). */
  insecure: boolean;
}

/** A proxy: HTTP for REST (resolved for the base URL: see src/settings/proxy.ts), HTTP or SOCKS for SMTP. */
export interface ProxySetting {
  protocol: "http:" | "https:" | "socks4:" | "socks4a:" | "socks5:" | "socks5h:";
  host: string;
  port: number;
  /** scheme://host:port: what messages print (never the user or password). */
  label: string;
  /** Where it was named: "--proxy", "MAILSEND_PROXY", "HTTPS_PROXY", "https_proxy", ... */
  source: string;
  /** The Proxy-Authorization value from the URL's user:password. */
  authorization?: string;
  user?: string;
  /** For SOCKS (HTTP proxies get `authorization`). Never printed. */
  password?: string;
}

export interface RestConfig extends TlsOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  userAgent: string;
  /** The proxy the requests go through; absent: direct. */
  proxy?: ProxySetting;
  /** A proxy was named but the base URL goes direct: why (for doctor and -v). */
  proxyBypass?: string;
}

export interface SmtpConfig extends TlsOptions {
  host: string;
  port: number;
  tls: SmtpTlsMode;
  user: string;
  apiKey: string;
  timeoutMs: number;
  /** Name announced in EHLO. */
  clientName?: string;
  /** --smtp-proxy: the SMTP connection goes through it. */
  proxy?: ProxySetting;
}

export type TransportConfig = ({ transport: "rest" } & RestConfig) | ({ transport: "smtp" } & SmtpConfig);

export const DEFAULTS = {
  transport: "rest" as TransportName,
  smtpPort: 587,
  smtpUser: "mailsend",
  timeoutSeconds: 30,
  rateLimit: 60,
};

/**
 * The SMTP username set to the API key itself (the key is the password; the username is the
 * service's fixed name): refused before anything prints or sends it. `where` names the settings
 * it came from. The value is never repeated.
 */
export function smtpUserIsKey(user: string, apiKey: string | undefined, where: string): MailsendError | undefined {
  if (!apiKey || user !== apiKey) return undefined;
  return new MailsendError(
    "config_invalid",
    `the SMTP username is the API key itself (${where}): over SMTP the key is the password, and the username is the service's fixed name`,
    {
      hint: `Unset it (the default username, "mailsend", is the service's), or set it to the username the service gives. If the key was typed on a command line, remove it from your shell history.`,
    },
  );
}

/** `--transport auto` with neither channel configured: the resolver finds it up front, the chooser per message. */
export function noChannelError(): MailsendError {
  return new MailsendError(
    "config_missing",
    (s) => `${s.value("transport", "auto")}: neither a REST base URL nor an SMTP host is configured`,
    {
      setting: "baseUrl",
      hint: (s) =>
        `Set ${s.pick({
          cli: `${s.env("baseUrl")} or ${s.env("smtpHost")} (or ${s.pair("baseUrl", "smtpHost")})`,
          api: `${s.env("baseUrl")} or ${s.env("smtpHost")}`,
          sendmail: `${s.env("baseUrl")} or ${s.env("smtpHost")}`,
        })}. For a local one, run \`mailsend sandbox\` and paste the export lines it prints.`,
    },
  );
}
