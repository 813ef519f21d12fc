/**
 * The API's options -> the same TransportConfig and budget the CLI builds
 * from flags and environment. Precedence: options > `env` (only when the
 * caller passes one) > defaults, through the resolvers of src/settings/.
 * Errors name the option (or options.env's variable), not a flag.
 */
import { DEFAULTS, type TransportConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { TransportName } from "../core/transport.js";
import { budgetOf } from "../settings/budget.js";
import { SETTINGS } from "../core/setting-names.js";
import { resolveConfig, transportOf, type Given, type Layers } from "../settings/resolve.js";
import { openSlotStore } from "../limits/budget.js";
import type { DeliverOptions } from "../limits/deliver.js";
import type { ConnectionOptions, DeliveryOptions } from "./types.js";
import type { Env } from "../core/env.js";

function invalid(message: string, hint?: string): MailsendError {
  return new MailsendError("config_invalid", message, hint ? { hint } : {});
}

function str(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw invalid(`${what} must be a string`);
  return value;
}

/** The options as the resolver's layers: each option type-checked, options.env read only when given. */
function layersOf(o: ConnectionOptions): Layers {
  if (o.env !== undefined && (o.env === null || typeof o.env !== "object"))
    throw invalid("options.env must be an object of variables");
  const smtp = o.smtp ?? {};
  if (typeof smtp !== "object") throw invalid("options.smtp must be an object");
  const s = smtp as Partial<NonNullable<ConnectionOptions["smtp"]>>;
  // A number option that is not one is the resolver's to refuse, in the same words as an out-of-range one.
  const num = (v: unknown) => (v === undefined || v === null ? undefined : (v as number));
  const given: Given = {
    ...defined("transport", str(o.transport, "options.transport")),
    ...defined("baseUrl", str(o.baseUrl, "options.baseUrl")),
    ...defined("apiKey", str(o.apiKey, "options.apiKey")),
    ...defined("apiKeyFile", str(o.apiKeyFile, "options.apiKeyFile")),
    ...defined("caFile", str(o.caFile, "options.caFile")),
    ...defined("proxy", str(o.proxy, "options.proxy")),
    ...defined("timeoutMs", num(o.timeoutMs)),
    ...defined("smtpHost", str(s.host, "options.smtp.host")),
    ...defined("smtpPort", num(s.port)),
    ...defined("smtpTls", str(s.tls, "options.smtp.tls")),
    ...defined("smtpUser", str(s.user, "options.smtp.user")),
    ...defined("smtpProxy", str(s.proxy, "options.smtp.proxy")),
    insecure: o.insecure === true,
  };
  return {
    front: "api",
    given,
    env: o.env ?? {},
    envGiven: o.env !== undefined,
    defaultTransport: o.smtp && !o.baseUrl ? "smtp" : DEFAULTS.transport,
  };
}

const defined = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
  v === undefined ? {} : ({ [k]: v } as { [P in K]: V });

export function resolveTransportName(o: ConnectionOptions): TransportName {
  return transportOf(layersOf(o), false) as TransportName;
}

/** The transport settings and the key, through the resolver the CLI uses. */
export async function resolveConnection(o: ConnectionOptions, opts: { needKey: boolean }): Promise<TransportConfig> {
  return resolveConfig(layersOf(o), opts);
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
  const { limits, retries, maxWaitMs, deadlineMs, noWait } = budgetOf("api", o, o.env ?? {});
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
    ...(stateDir ? { [SETTINGS.stateDir.env!]: stateDir } : {}),
    ...(redisUrl ? { [SETTINGS.rateLimitUrl.env!]: redisUrl } : {}),
  };
  let store;
  try {
    store = openSlotStore(apiKey, limits, storeEnv, caFile ? { caFile } : {});
  } catch (e) {
    if (e instanceof MailsendError) throw e;
    throw invalid(
      `cannot use the rate-limit state dir: ${(e as Error).message}`,
      "Pass options.stateDir (a writable dir), or rateLimit: 0 to switch the local budget off.",
    );
  }
  return {
    options: { ...(store ? { store } : {}), limits, retries, maxWaitMs, noWait, deadlineMs },
    close: async () => store?.close(),
  };
}
