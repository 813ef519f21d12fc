/**
 * The API's options -> the same TransportConfig and budget the CLI builds
 * from flags and environment. Precedence: options > `env` (only when the
 * caller passes one) > defaults. Errors name the option, not a flag.
 */
import { readFile } from "node:fs/promises";
import { DEFAULTS, smtpUserIsKey, type SmtpTlsMode, type TransportConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { expandHome } from "../core/home.js";
import type { TransportName } from "../core/transport.js";
import { USER_AGENT } from "../core/version.js";
import { checkKey } from "../input/config.js";
import { fileError } from "../core/read.js";
import { proxyFor, smtpProxyFrom } from "../input/proxy.js";
import { openSlotStore } from "../limits/budget.js";
import { DEFAULT_DEADLINE_MS } from "../limits/deliver.js";
import type { DeliverOptions } from "../limits/deliver.js";
import type { Limits } from "../limits/sliding-log.js";
import type { ConnectionOptions, DeliveryOptions } from "./types.js";

type Env = Record<string, string | undefined>;

const DEFAULT_RETRIES = 3;
const DEFAULT_MAX_WAIT_MS = 300_000;

function invalid(message: string, hint?: string): MailsendError {
  return new MailsendError("config_invalid", message, hint ? { hint } : {});
}

function fromEnv(env: Env | undefined, name: string): string | undefined {
  const v = env?.[name];
  return v === undefined || v === "" ? undefined : v;
}

/** A whole number from an option (a number) or a variable (decimal digits). */
function whole(value: number | string | undefined, what: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined;
  const n = typeof value === "number" ? value : /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw invalid(`${what} must be a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? " up" : ` to ${max}`}, got ${JSON.stringify(value)}`);
  }
  return n;
}

function str(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw invalid(`${what} must be a string`);
  return value;
}

export function resolveTransportName(o: ConnectionOptions): TransportName {
  const name = str(o.transport, "options.transport") ?? fromEnv(o.env, "MAILSEND_TRANSPORT") ?? (o.smtp && !o.baseUrl ? "smtp" : DEFAULTS.transport);
  if (name !== "rest" && name !== "smtp") {
    throw invalid(`transport must be "rest" or "smtp", got ${JSON.stringify(name)}`);
  }
  return name;
}

async function resolveKey(o: ConnectionOptions): Promise<string> {
  const direct = str(o.apiKey, "options.apiKey");
  const file = str(o.apiKeyFile, "options.apiKeyFile");
  if (direct !== undefined && file !== undefined) throw invalid("give options.apiKey or options.apiKeyFile, not both");
  if (direct !== undefined) return checkKey(direct, "options.apiKey");
  const readKeyFile = async (path: string, what: string) => {
    try {
      return checkKey((await readFile(path)).toString("utf8"), what);
    } catch (e) {
      if (e instanceof MailsendError) throw e;
      const err = fileError(e, path, what);
      throw new MailsendError("config_missing", err.message, { cause: e, hint: `${what} must name a readable file holding the key.` });
    }
  };
  if (file !== undefined) return readKeyFile(file, "options.apiKeyFile");
  const envKey = fromEnv(o.env, "MAILSEND_API_KEY");
  const envFile = fromEnv(o.env, "MAILSEND_API_KEY_FILE");
  if (envKey !== undefined && envFile !== undefined) {
    throw invalid("both MAILSEND_API_KEY and MAILSEND_API_KEY_FILE are set in options.env", "Unset one of them so it is clear which key is used.");
  }
  if (envKey !== undefined) return checkKey(envKey, "MAILSEND_API_KEY");
  if (envFile !== undefined) return readKeyFile(expandHome(envFile, o.env ?? {}), "MAILSEND_API_KEY_FILE");
  throw new MailsendError("config_missing", "no API key", {
    hint: o.env
      ? "Pass options.apiKey or options.apiKeyFile, or set MAILSEND_API_KEY / MAILSEND_API_KEY_FILE in options.env."
      : "Pass options.apiKey or options.apiKeyFile (the environment is read only when you pass options.env).",
  });
}

/** The transport settings and the key, validated as the CLI validates its flags. */
export async function resolveConnection(o: ConnectionOptions, opts: { needKey: boolean }): Promise<TransportConfig> {
  if (o.env !== undefined && (o.env === null || typeof o.env !== "object")) throw invalid("options.env must be an object of variables");
  const transport = resolveTransportName(o);
  const timeoutMs =
    whole(o.timeoutMs, "options.timeoutMs", 1, 3_600_000) ??
    (whole(fromEnv(o.env, "MAILSEND_TIMEOUT"), "MAILSEND_TIMEOUT", 1, 3600) ?? DEFAULTS.timeoutSeconds) * 1000;
  const caFile = str(o.caFile, "options.caFile") ?? (o.env ? (fromEnv(o.env, "MAILSEND_CA_FILE") ?? fromEnv(o.env, "NODE_EXTRA_CA_CERTS")) : undefined);
  const tls = { insecure: o.insecure === true, ...(caFile ? { caFile } : {}) };
  const apiKey = opts.needKey ? await resolveKey(o) : "";

  if (transport === "rest") {
    const baseUrl = str(o.baseUrl, "options.baseUrl") ?? fromEnv(o.env, "MAILSEND_BASE_URL");
    if (!baseUrl) {
      throw new MailsendError("config_missing", "no REST base URL", {
        hint: 'Pass options.baseUrl (mail is POSTed to <baseUrl>/send), or transport: "smtp" with options.smtp. createSandbox() gives a local one.',
      });
    }
    let target: URL | undefined;
    try {
      target = new URL(baseUrl);
    } catch {
      // The transport reports a base URL that does not parse.
    }
    // The environment's proxies only with options.env, like every other variable.
    const { proxy, bypass } = target ? proxyFor(target, str(o.proxy, "options.proxy"), o.env ?? {}) : {};
    return { transport, baseUrl, apiKey, timeoutMs, userAgent: USER_AGENT, ...tls, ...(proxy ? { proxy } : {}), ...(bypass ? { proxyBypass: bypass } : {}) };
  }

  const smtp = o.smtp ?? {};
  if (typeof smtp !== "object") throw invalid("options.smtp must be an object");
  const s = smtp as Partial<NonNullable<ConnectionOptions["smtp"]>>;
  const host = str(s.host, "options.smtp.host") ?? fromEnv(o.env, "MAILSEND_SMTP_HOST");
  if (!host) {
    throw new MailsendError("config_missing", "no SMTP host", { hint: "Pass options.smtp.host. createSandbox() gives a local one." });
  }
  const port =
    whole(s.port, "options.smtp.port", 1, 65535) ?? whole(fromEnv(o.env, "MAILSEND_SMTP_PORT"), "MAILSEND_SMTP_PORT", 1, 65535) ?? DEFAULTS.smtpPort;
  const tlsName = str(s.tls, "options.smtp.tls") ?? fromEnv(o.env, "MAILSEND_SMTP_TLS");
  if (tlsName !== undefined && tlsName !== "starttls" && tlsName !== "implicit") {
    throw invalid(`the SMTP TLS mode must be "starttls" or "implicit", got ${JSON.stringify(tlsName)}`);
  }
  const mode: SmtpTlsMode = tlsName ?? (port === 465 ? "implicit" : "starttls");
  if ((port === 465 && mode === "starttls") || (port === 587 && mode === "implicit")) {
    throw new MailsendError("tls_mismatch", `port ${port} is for ${port === 465 ? "implicit TLS" : "STARTTLS"}, but the TLS mode is ${mode}`, {
      hint: "Use 587 with starttls or 465 with implicit, or leave smtp.tls unset.",
    });
  }
  const user = str(s.user, "options.smtp.user") ?? fromEnv(o.env, "MAILSEND_SMTP_USER") ?? DEFAULTS.smtpUser;
  const userIsKey = smtpUserIsKey(user, apiKey, s.user !== undefined ? "options.smtp.user" : "MAILSEND_SMTP_USER");
  if (userIsKey) throw userIsKey;
  const smtpProxy = smtpProxyFrom(str(s.proxy, "options.smtp.proxy"), o.env ?? {});
  return { transport, host, port, tls: mode, user, apiKey, timeoutMs, ...tls, ...(smtpProxy ? { proxy: smtpProxy } : {}) };
}

/** The errors that only say "aborted during a wait", not how the last attempt went. */
export const abortedWaits: WeakSet<MailsendError> = new WeakSet();

export function aborted(signal: AbortSignal): MailsendError {
  const e = new MailsendError("temporary_failure", "aborted before the message was sent", {
    cause: signal.reason,
    hint: "Nothing was sent; it is safe to try again.",
  });
  abortedWaits.add(e);
  return e;
}

export interface Budget {
  options: Omit<DeliverOptions, "signal" | "sleep" | "onWait" | "trace">;
  close(): Promise<void>;
}

/** The shared budget and retry settings: the CLI's defaults, the state dir's budget file unless switched off. */
export function openBudget(o: DeliveryOptions & { env?: Env }, apiKey: string, caFile?: string): Budget {
  const limits: Limits = {
    limit: whole(o.rateLimit, "options.rateLimit", 0) ?? whole(fromEnv(o.env, "MAILSEND_RATE_LIMIT"), "MAILSEND_RATE_LIMIT", 0) ?? DEFAULTS.rateLimit,
    windowMs:
      whole(o.rateWindowMs, "options.rateWindowMs", 1000) ??
      (whole(fromEnv(o.env, "MAILSEND_RATE_WINDOW"), "MAILSEND_RATE_WINDOW", 1) ?? 60) * 1000,
  };
  const retries = whole(o.retries, "options.retries", 0, 100) ?? whole(fromEnv(o.env, "MAILSEND_RETRIES"), "MAILSEND_RETRIES", 0, 100) ?? DEFAULT_RETRIES;
  const maxWaitMs =
    whole(o.maxWaitMs, "options.maxWaitMs", 0) ??
    (whole(fromEnv(o.env, "MAILSEND_MAX_WAIT"), "MAILSEND_MAX_WAIT", 0) ?? DEFAULT_MAX_WAIT_MS / 1000) * 1000;
  const deadlineMs =
    whole(o.deadlineMs, "options.deadlineMs", 0) ?? (whole(fromEnv(o.env, "MAILSEND_DEADLINE"), "MAILSEND_DEADLINE", 0) ?? DEFAULT_DEADLINE_MS / 1000) * 1000;
  const stateDir = str(o.stateDir, "options.stateDir");
  const redisUrl = str(o.rateLimitUrl, "options.rateLimitUrl");
  // openSlotStore() reads only these names: the caller's env when given, the options over it.
  // Where the platform keeps state (XDG_STATE_HOME, HOME, LOCALAPPDATA) is taken from the
  // process like HOME is, so the default file is the one the CLI's processes share.
  const platformDirs = Object.fromEntries(
    (["XDG_STATE_HOME", "HOME", "LOCALAPPDATA"] as const).flatMap((k) => (process.env[k] ? [[k, process.env[k]]] : [])),
  );
  const storeEnv: Env = {
    ...platformDirs,
    ...(o.env ?? {}),
    ...(stateDir ? { MAILSEND_STATE_DIR: stateDir } : {}),
    ...(redisUrl ? { MAILSEND_RATE_LIMIT_URL: redisUrl } : {}),
  };
  let store;
  try {
    store = openSlotStore(apiKey, limits, storeEnv, caFile ? { caFile } : {});
  } catch (e) {
    if (e instanceof MailsendError) throw e;
    throw invalid(`cannot use the rate-limit state dir: ${(e as Error).message}`, "Pass options.stateDir (a writable dir), or rateLimit: 0 to switch the local budget off.");
  }
  return {
    options: { ...(store ? { store } : {}), limits, retries, maxWaitMs, noWait: o.wait === false, deadlineMs },
    close: async () => store?.close(),
  };
}
