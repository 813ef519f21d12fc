import type { TransportName } from "./transport.js";

export type SmtpTlsMode = "starttls" | "implicit";

export interface TlsOptions {
  /** PEM file with extra CA certificates to trust. */
  caFile?: string;
  /** Skip certificate verification (loud warning in the CLI). */
  insecure: boolean;
}

export interface RestConfig extends TlsOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  userAgent: string;
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
}

export type TransportConfig =
  | ({ transport: "rest" } & RestConfig)
  | ({ transport: "smtp" } & SmtpConfig);

export const DEFAULTS = {
  transport: "rest" as TransportName,
  smtpPort: 587,
  smtpUser: "mailsend",
  timeoutSeconds: 30,
  rateLimit: 60,
};
