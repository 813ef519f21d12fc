/**
 * Where the transport settings and the key come from.
 * Precedence: flags > environment > profile > defaults. The profile (see
 * profile.ts) arrives already layered under `env`; only the key needs it
 * spelled out, as a profile says where the key is, not what it is.
 */
import { DEFAULTS, smtpUserIsKey, type SmtpTlsMode, type TransportConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { expandHome } from "../core/home.js";
import type { TransportName } from "../core/transport.js";
import { USER_AGENT } from "../core/version.js";
import { readProfileKey, type ActiveProfile } from "./profile.js";
import { checkProxyFlag, proxyFor, smtpProxyFrom } from "./proxy.js";
import { readSource, readStdin, type InputStreams } from "../core/read.js";

export interface ConnectionFlags {
  transport?: string;
  baseUrl?: string;
  smtpHost?: string;
  smtpPort?: number;
  smtpTls?: string;
  smtpUser?: string;
  apiKeyStdin?: boolean;
  caFile?: string;
  insecure?: boolean;
  timeout?: number;
  /** --proxy: an HTTP proxy for REST, or "none" (overrides HTTPS_PROXY and friends). */
  proxy?: string;
  /** --smtp-proxy: a SOCKS or HTTP proxy for SMTP. */
  smtpProxy?: string;
}

export type Env = Record<string, string | undefined>;

function configError(message: string, hint: string): MailsendError {
  return new MailsendError("config_missing", message, { hint });
}

function fromEnv(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === "" ? undefined : v;
}

/**
 * A whole number from a flag or, without it, from an environment variable: out of range, a
 * flag's is a usage error (64) naming the flag, a variable's a configuration error (78) naming
 * the variable (DESIGN.md section 3).
 */
function intFrom(flag: string | number | undefined, env: Env, variable: string, flagName: string, min: number, max: number): number | undefined {
  const fromFlag = flag !== undefined;
  const value = fromFlag ? flag : fromEnv(env, variable);
  if (value === undefined) return undefined;
  const n = typeof value === "number" ? value : /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new MailsendError(fromFlag ? "usage" : "config_invalid", `${fromFlag ? flagName : variable} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

export function resolveTransportName(flags: ConnectionFlags, env: Env): TransportName {
  const name = flags.transport ?? fromEnv(env, "MAILSEND_TRANSPORT") ?? DEFAULTS.transport;
  if (name === "auto") {
    // auto chooses per message (mailsend send, batch); a command that needs one transport says so.
    const from = flags.transport !== undefined ? "--transport auto" : "MAILSEND_TRANSPORT=auto";
    throw new MailsendError("config_invalid", `${from}: this command needs one transport, rest or smtp (auto chooses per message, in mailsend send and batch)`, {
      hint: "Give --transport rest or --transport smtp here.",
    });
  }
  if (name !== "rest" && name !== "smtp") {
    throw new MailsendError("config_invalid", `transport must be rest or smtp, got ${JSON.stringify(name)}`, {
      hint: "Set --transport or MAILSEND_TRANSPORT to rest or smtp.",
    });
  }
  return name;
}

/** send's --transport: rest, smtp, or auto (chosen from the message: transports/choose.ts). */
export function resolveTransportChoice(flags: ConnectionFlags, env: Env): TransportName | "auto" {
  const name = flags.transport ?? fromEnv(env, "MAILSEND_TRANSPORT");
  if (name === "auto") return "auto";
  try {
    return resolveTransportName(flags, env);
  } catch (e) {
    throw new MailsendError("config_invalid", `transport must be rest, smtp or auto, got ${JSON.stringify(name)}`, {
      cause: e,
      hint: "Set --transport or MAILSEND_TRANSPORT to rest, smtp or auto.",
    });
  }
}

/** Which channels `--transport auto` may use: those with an address configured. */
export function configuredChannels(flags: ConnectionFlags, env: Env): { rest: boolean; smtp: boolean } {
  return {
    rest: (flags.baseUrl ?? fromEnv(env, "MAILSEND_BASE_URL")) !== undefined,
    smtp: (flags.smtpHost ?? fromEnv(env, "MAILSEND_SMTP_HOST")) !== undefined,
  };
}

/** The key must be one printable token: no spaces, no line breaks (a common copy-paste slip). */
export function checkKey(raw: string, source: string): string {
  const key = raw.replace(/\r?\n$/, "");
  if (key.length === 0) {
    throw new MailsendError("config_missing", `the API key from ${source} is empty`, {
      hint: "Create a key in the dashboard's API Keys section (or with `mailsend sandbox`).",
    });
  }
  if (!/^[\x21-\x7E]+$/.test(key)) {
    throw new MailsendError("config_invalid", `the API key from ${source} contains whitespace or non-printable characters`, {
      hint: "Check for a stray space, quote or line break around the key.",
    });
  }
  return key;
}

export async function resolveApiKey(flags: ConnectionFlags, env: Env, io: InputStreams, profile?: ActiveProfile): Promise<string> {
  if (flags.apiKeyStdin) {
    if (io.stdin.isTTY) {
      throw new MailsendError("usage", "--api-key-stdin reads the key from stdin, but stdin is a terminal", {
        hint: "Pipe it: mailsend send --api-key-stdin ... < keyfile",
      });
    }
    return checkKey((await readStdin(io.stdin)).toString("utf8"), "stdin");
  }
  const direct = fromEnv(env, "MAILSEND_API_KEY");
  const file = fromEnv(env, "MAILSEND_API_KEY_FILE");
  if (direct !== undefined && file !== undefined) {
    throw new MailsendError("config_invalid", "both MAILSEND_API_KEY and MAILSEND_API_KEY_FILE are set", {
      hint: "Unset one of them so it is clear which key is used.",
    });
  }
  if (direct !== undefined) return checkKey(direct, "MAILSEND_API_KEY");
  if (file !== undefined) {
    let buf: Buffer;
    try {
      buf = await readSource(expandHome(file, env), "MAILSEND_API_KEY_FILE", io);
    } catch (e) {
      const m = e as MailsendError;
      throw new MailsendError("config_missing", m.message, { cause: e, hint: "MAILSEND_API_KEY_FILE must name a readable file holding the key." });
    }
    return checkKey(buf.toString("utf8"), `MAILSEND_API_KEY_FILE (${file})`);
  }
  const fromProfile = profile ? await readProfileKey(profile, env) : undefined;
  if (fromProfile) return checkKey(fromProfile.raw, fromProfile.source);
  throw configError(
    profile ? `no API key (profile "${profile.name}" does not say where it is)` : "no API key",
    "Set MAILSEND_API_KEY, or MAILSEND_API_KEY_FILE to a file holding it, or pipe it with --api-key-stdin, or name its variable or file in a profile (mailsend config set api_key_env NAME). To try mailsend locally, start `mailsend sandbox`.",
  );
}

export interface ResolveOptions extends InputStreams {
  /** --dry-run prints a redacted key and needs none. */
  needKey: boolean;
  /** The active profile (its settings are already layered into `env`): where the key is. */
  profile?: ActiveProfile | undefined;
}

export async function resolveTransportConfig(flags: ConnectionFlags, env: Env, opts: ResolveOptions): Promise<TransportConfig> {
  const transport = resolveTransportName(flags, env);
  const timeoutSeconds = intFrom(flags.timeout, env, "MAILSEND_TIMEOUT", "--timeout", 1, 3600) ?? DEFAULTS.timeoutSeconds;
  const caFile = flags.caFile ?? fromEnv(env, "MAILSEND_CA_FILE");
  const tls = { insecure: flags.insecure ?? false, ...(caFile ? { caFile } : {}) };
  const apiKey = opts.needKey ? await resolveApiKey(flags, env, opts, opts.profile) : "";

  if (transport === "rest") {
    const baseUrl = flags.baseUrl ?? fromEnv(env, "MAILSEND_BASE_URL");
    if (!baseUrl) {
      throw configError(
        "no REST base URL",
        "Set --base-url or MAILSEND_BASE_URL (or base_url in a profile: mailsend config set base_url URL) to the service's address (mailsend POSTs to <base-url>/send). For a local one, run `mailsend sandbox` and paste the export lines it prints.",
      );
    }
    checkProxyFlag(flags.proxy, "--proxy", "MAILSEND_PROXY (or HTTPS_PROXY)");
    let target: URL | undefined;
    try {
      target = new URL(baseUrl);
    } catch {
      // A base URL that does not parse is the transport's to report.
    }
    const { proxy, bypass } = target ? proxyFor(target, flags.proxy, env) : {};
    return { transport, baseUrl, apiKey, timeoutMs: timeoutSeconds * 1000, userAgent: USER_AGENT, ...tls, ...(proxy ? { proxy } : {}), ...(bypass ? { proxyBypass: bypass } : {}) };
  }

  const host = flags.smtpHost ?? fromEnv(env, "MAILSEND_SMTP_HOST");
  if (!host) {
    throw configError(
      "no SMTP host",
      "Set --smtp-host or MAILSEND_SMTP_HOST. For a local one, run `mailsend sandbox` and paste the export lines it prints.",
    );
  }
  const port = intFrom(flags.smtpPort, env, "MAILSEND_SMTP_PORT", "--smtp-port", 1, 65535) ?? DEFAULTS.smtpPort;
  const tlsName = flags.smtpTls ?? fromEnv(env, "MAILSEND_SMTP_TLS");
  if (tlsName !== undefined && tlsName !== "starttls" && tlsName !== "implicit") {
    throw new MailsendError("config_invalid", `SMTP TLS mode must be starttls or implicit, got ${JSON.stringify(tlsName)}`);
  }
  const mode: SmtpTlsMode = (tlsName as SmtpTlsMode | undefined) ?? (port === 465 ? "implicit" : "starttls");
  if ((port === 465 && mode === "starttls") || (port === 587 && mode === "implicit")) {
    throw new MailsendError("tls_mismatch", `port ${port} is for ${port === 465 ? "implicit TLS" : "STARTTLS"}, but --smtp-tls is ${mode}`, {
      hint: "Use 587 with starttls or 465 with implicit (the defaults), or leave --smtp-tls unset.",
    });
  }
  const user = flags.smtpUser ?? fromEnv(env, "MAILSEND_SMTP_USER") ?? DEFAULTS.smtpUser;
  const userIsKey = smtpUserIsKey(user, apiKey, flags.smtpUser !== undefined ? "--smtp-user" : "MAILSEND_SMTP_USER, or the profile's smtp_user");
  if (userIsKey) throw userIsKey;
  checkProxyFlag(flags.smtpProxy, "--smtp-proxy", "MAILSEND_SMTP_PROXY");
  const proxy = smtpProxyFrom(flags.smtpProxy, env);
  return { transport, host, port, tls: mode, user, apiKey, timeoutMs: timeoutSeconds * 1000, ...tls, ...(proxy ? { proxy } : {}) };
}
