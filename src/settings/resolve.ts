/**
 * The one resolver of the connection settings: which transport, its address, port rules, TLS
 * mode, SMTP user, proxy, timeout, CA, and the key. Precedence: what the front end was given
 * (the CLI's flags, the library's options) > environment > profile > defaults. The profile
 * (profile.ts) arrives already layered under `env`; only the key needs it spelled out, as a
 * profile says where the key is, not what it is. Errors name the setting (MailsendError.setting)
 * in the words of the front end that asked (names.ts).
 */
import { DEFAULTS, noChannelError, smtpUserIsKey, type SmtpTlsMode, type TransportConfig } from "../core/config.js";
import type { Env } from "../core/env.js";
import { MailsendError, type ErrorCode, type Text } from "../core/errors.js";
import { expandHome } from "../core/home.js";
import type { TransportName } from "../core/transport.js";
import { USER_AGENT } from "../core/version.js";
import { fileError, readSource, readStdin, type InputStreams } from "../core/read.js";
import { settingName, type Front, type Setting, type Source } from "../core/setting-names.js";
import { readProfileKey, type ActiveProfile } from "./profile.js";
import { checkProxyFlag, proxyFor, smtpProxyFrom, type ProxyWords } from "./proxy.js";

/** The CLI's connection flags. */
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
  /** Seconds (the library's option is in milliseconds: Given.timeoutMs). */
  timeout?: number;
  /** --proxy: an HTTP proxy for REST, or "none" (overrides HTTPS_PROXY and friends). */
  proxy?: string;
  /** --smtp-proxy: a SOCKS or HTTP proxy for SMTP. */
  smtpProxy?: string;
}

/** What a front end was given, by setting: the CLI's flags, or the library's options (already type-checked). */
export interface Given extends ConnectionFlags {
  /** The library's key and key file (the CLI never takes a key as a flag's value). */
  apiKey?: string;
  apiKeyFile?: string;
  timeoutMs?: number;
}

/** The layers under one front end's reading: what it was given, the environment (with the profile under it). */
export interface Layers {
  /** The CLI or the library (sendmail's callers resolve as the CLI does; an error's words are said to them in theirs: MailsendError.in). */
  front: Exclude<Front, "sendmail">;
  given: Given;
  env: Env;
  /** The active profile: where the key is (its other settings are in `env`). */
  profile?: ActiveProfile | undefined;
  /** The transport when neither the front end nor the environment names one (else defaultTransportOf says). */
  defaultTransport?: TransportName | "auto";
  /** The library was given an environment to read (without one it reads none, and says so). */
  envGiven?: boolean;
}

/** The CLI's layers: flags over the environment (profile included). */
export function cliLayers(flags: ConnectionFlags, env: Env, profile?: ActiveProfile): Layers {
  return { front: "cli", given: flags, env, ...(profile ? { profile } : {}) };
}

function fromEnv(env: Env, name: string | undefined): string | undefined {
  const v = name === undefined ? undefined : env[name];
  return v === undefined || v === "" ? undefined : v;
}

const ENV: Partial<Record<Setting, string>> = {
  transport: "MAILSEND_TRANSPORT",
  baseUrl: "MAILSEND_BASE_URL",
  smtpHost: "MAILSEND_SMTP_HOST",
  smtpPort: "MAILSEND_SMTP_PORT",
  smtpTls: "MAILSEND_SMTP_TLS",
  smtpUser: "MAILSEND_SMTP_USER",
  caFile: "MAILSEND_CA_FILE",
  timeout: "MAILSEND_TIMEOUT",
};

/** A setting's value and where it came from: given > environment. */
function pick<T extends string | number>(
  l: Layers,
  setting: Setting,
  given: T | undefined,
): { value: T | string; source: Source } | undefined {
  if (given !== undefined) return { value: given, source: "given" };
  const v = fromEnv(l.env, ENV[setting]);
  return v === undefined ? undefined : { value: v, source: "env" };
}

/** The setting's name as this front end says it, for the source it came from (or every way to set it). */
export function named(l: Layers, setting: Setting, source?: Source): string {
  return settingName(setting, l.front, source);
}

function settingError(code: ErrorCode, setting: Setting, message: string, hint?: Text, cause?: unknown): MailsendError {
  return new MailsendError(code, message, {
    setting,
    ...(hint ? { hint } : {}),
    ...(cause !== undefined ? { cause } : {}),
  });
}

/**
 * A whole number: out of range, a flag's is a usage error (64), a variable's or an option's a
 * configuration error (78), each naming where it came from.
 */
function whole(
  l: Layers,
  setting: Setting,
  given: number | undefined,
  min: number,
  max: number,
): { n: number; source: Source } | undefined {
  const p = pick(l, setting, given);
  if (p === undefined) return undefined;
  const n = typeof p.value === "number" ? p.value : /^\d+$/.test(p.value.trim()) ? Number(p.value) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    const code = p.source === "given" && l.front === "cli" ? "usage" : "config_invalid";
    throw settingError(
      code,
      setting,
      `${named(l, setting, p.source)} must be a whole number from ${min} to ${max}, got ${JSON.stringify(p.value)}`,
    );
  }
  return { n, source: p.source };
}

/**
 * The transport when none is named: where auto is allowed (send, batch) and an SMTP host is
 * configured, auto, so that a text body goes over SMTP as text/plain rather than as HTML over REST;
 * else rest.
 */
export function defaultTransportOf(l: Layers, allowAuto: boolean): TransportName | "auto" {
  return l.defaultTransport ?? (allowAuto && configuredChannelsOf(l).smtp ? "auto" : DEFAULTS.transport);
}

/** rest, smtp, or (where `auto` is allowed) auto: chosen per message among the configured channels. */
export function transportOf(l: Layers, allowAuto: boolean): TransportName | "auto" {
  const p = pick(l, "transport", l.given.transport);
  const name = (p?.value as string | undefined)?.trim() ?? defaultTransportOf(l, allowAuto);
  if (name === "auto" && allowAuto) return "auto";
  if (name === "rest" || name === "smtp") return name;
  if (name === "auto" && l.front !== "api") {
    // auto chooses per message (send, batch, the outbox); a command that needs one transport says so.
    const from = p?.source === "given" ? "--transport auto" : "MAILSEND_TRANSPORT=auto";
    throw settingError(
      "config_invalid",
      "transport",
      `${from}: this command needs one transport, rest or smtp (auto chooses per message, in mailsend send and batch)`,
      "Give --transport rest or --transport smtp here.",
    );
  }
  if (l.front === "api")
    throw settingError(
      "config_invalid",
      "transport",
      `transport must be "rest" or "smtp", got ${JSON.stringify(name)}`,
    );
  const choices = allowAuto ? "rest, smtp or auto" : "rest or smtp";
  throw settingError(
    "config_invalid",
    "transport",
    `transport must be ${choices}, got ${JSON.stringify(name)}`,
    `Set ${named(l, "transport").replace(" / ", " or ")} to ${choices}.`,
  );
}

/** Which channels `auto` may use: those with an address configured. */
export function configuredChannelsOf(l: Layers): { rest: boolean; smtp: boolean } {
  return {
    rest: pick(l, "baseUrl", l.given.baseUrl) !== undefined,
    smtp: pick(l, "smtpHost", l.given.smtpHost) !== undefined,
  };
}

/** The key must be one printable token: no spaces, no line breaks (a common copy-paste slip). */
export function checkKey(raw: string, source: string): string {
  const key = raw.replace(/\r?\n$/, "");
  if (key.length === 0) {
    throw new MailsendError("config_missing", `the API key from ${source} is empty`, {
      setting: "apiKey",
      hint: "Create a key in the dashboard's API Keys section (or with `mailsend sandbox`).",
    });
  }
  if (!/^[\x21-\x7E]+$/.test(key)) {
    throw new MailsendError(
      "config_invalid",
      `the API key from ${source} contains whitespace or non-printable characters`,
      {
        setting: "apiKey",
        hint: "Check for a stray space, quote or line break around the key.",
      },
    );
  }
  return key;
}

/** A key file: the CLI reads it as it reads any input (`-` is stdin); the library from the file system. */
async function readKeyFile(l: Layers, file: string, source: Source, io: InputStreams | undefined): Promise<string> {
  const name = named(l, "apiKeyFile", source);
  const path = source === "env" ? expandHome(file, l.env) : file;
  let buf: Buffer;
  try {
    buf = io
      ? await readSource(path, name, io)
      : await process
          .getBuiltinModule("node:fs/promises")
          .readFile(path)
          .catch((e: unknown) => Promise.reject(fileError(e, path, name)));
  } catch (e) {
    const m = e as MailsendError;
    throw settingError(
      "config_missing",
      "apiKeyFile",
      m.message,
      `${name} must name a readable file holding the key.`,
      e,
    );
  }
  return checkKey(buf.toString("utf8"), l.front === "cli" ? `${name} (${file})` : name);
}

const NO_KEY_HINT: Record<Layers["front"], Text> = {
  // sendmail's callers (which resolve as the CLI does) have no flag to pipe the key with.
  cli: (s) =>
    `Set ${s.env("apiKey")}, or ${s.env("apiKeyFile")} to a file holding it, ${s.pick({ cli: `or pipe it with ${s.flag("apiKey")}, `, api: "", sendmail: "" })}or name its variable or file in a profile (mailsend config set api_key_env NAME). To try mailsend locally, start \`mailsend sandbox\`.`,
  api: "Pass options.apiKey or options.apiKeyFile (the environment is read only when you pass options.env).",
};

/** The library's own two ways to give the key. */
async function givenKey(l: Layers): Promise<string | undefined> {
  const { apiKey, apiKeyFile } = l.given;
  if (apiKey !== undefined && apiKeyFile !== undefined) {
    throw settingError(
      "config_invalid",
      "apiKey",
      `give ${named(l, "apiKey", "given")} or ${named(l, "apiKeyFile", "given")}, not both`,
    );
  }
  if (apiKey !== undefined) return checkKey(apiKey, named(l, "apiKey", "given"));
  if (apiKeyFile !== undefined) return readKeyFile(l, apiKeyFile, "given", undefined);
  return undefined;
}

/** The key: --api-key-stdin (or the library's options), then MAILSEND_API_KEY / MAILSEND_API_KEY_FILE, then the profile. */
export async function keyOf(l: Layers, io: InputStreams | undefined): Promise<string> {
  if (l.given.apiKeyStdin) {
    if (!io || io.stdin.isTTY) {
      throw settingError(
        "usage",
        "apiKey",
        "--api-key-stdin reads the key from stdin, but stdin is a terminal",
        "Pipe it: mailsend send --api-key-stdin ... < keyfile",
      );
    }
    return checkKey((await readStdin(io.stdin)).toString("utf8"), "stdin");
  }
  const given = await givenKey(l);
  if (given !== undefined) return given;
  const direct = fromEnv(l.env, "MAILSEND_API_KEY");
  const file = fromEnv(l.env, "MAILSEND_API_KEY_FILE");
  if (direct !== undefined && file !== undefined) {
    throw settingError(
      "config_invalid",
      "apiKey",
      `both ${named(l, "apiKey", "env")} and ${named(l, "apiKeyFile", "env")} are set`,
      "Unset one of them so it is clear which key is used.",
    );
  }
  if (direct !== undefined) return checkKey(direct, named(l, "apiKey", "env"));
  if (file !== undefined) return readKeyFile(l, file, "env", io);
  const fromProfile = l.profile ? await readProfileKey(l.profile, l.env) : undefined;
  if (fromProfile) return checkKey(fromProfile.raw, fromProfile.source);
  const hint = l.envGiven
    ? "Pass options.apiKey or options.apiKeyFile, or set options.env.MAILSEND_API_KEY or options.env.MAILSEND_API_KEY_FILE."
    : NO_KEY_HINT[l.front];
  throw settingError(
    "config_missing",
    "apiKey",
    l.profile ? `no API key (profile "${l.profile.name}" does not say where it is)` : "no API key",
    hint,
  );
}

export interface ResolveOptions extends Partial<InputStreams> {
  /** --dry-run prints a redacted key and needs none. */
  needKey: boolean;
}

const NO_ADDRESS_HINT: Record<Layers["front"], { rest: Text; smtp: Text }> = {
  cli: {
    rest: (s) =>
      `Set ${s.either("baseUrl", " or ")} (or base_url in a profile: mailsend config set base_url URL) to the service's address (mailsend POSTs to <base-url>/send). For a local one, run \`mailsend sandbox\` and paste the export lines it prints.`,
    smtp: (s) =>
      `Set ${s.either("smtpHost", " or ")}. For a local one, run \`mailsend sandbox\` and paste the export lines it prints.`,
  },
  api: {
    rest: 'Pass options.baseUrl (mail is POSTed to <baseUrl>/send), or transport: "smtp" with options.smtp. createSandbox() gives a local one.',
    smtp: "Pass options.smtp.host. createSandbox() gives a local one.",
  },
};

/** The settings both channels share: timeout, CA, certificate checking. */
function common(l: Layers) {
  const given = l.given.timeoutMs;
  const timeoutMs =
    given !== undefined
      ? whole(l, "timeout", given, 1, 3_600_000)!.n
      : (whole(l, "timeout", l.front === "cli" ? l.given.timeout : undefined, 1, 3600)?.n ?? DEFAULTS.timeoutSeconds) *
        1000;
  // The library reads NODE_EXTRA_CA_CERTS only from the options.env it is given (the CLI's process has Node read it).
  const caFile =
    l.given.caFile ??
    fromEnv(l.env, "MAILSEND_CA_FILE") ??
    (l.front === "api" ? fromEnv(l.env, "NODE_EXTRA_CA_CERTS") : undefined);
  return { timeoutMs, tls: { insecure: l.given.insecure ?? false, ...(caFile ? { caFile } : {}) } };
}

/** Where a proxy came from, in the front end's words (the library's variables are those of options.env). */
function proxyWords(l: Layers, setting: "proxy" | "smtpProxy"): ProxyWords {
  return { given: named(l, setting, "given"), env: (name) => (l.front === "api" ? `options.env.${name}` : name) };
}

function restConfig(l: Layers, apiKey: string): TransportConfig {
  const { timeoutMs, tls } = common(l);
  const baseUrl = pick(l, "baseUrl", l.given.baseUrl)?.value as string | undefined;
  if (!baseUrl) throw settingError("config_missing", "baseUrl", "no REST base URL", NO_ADDRESS_HINT[l.front].rest);
  if (l.front === "cli") checkProxyFlag(l.given.proxy, "--proxy", "MAILSEND_PROXY (or HTTPS_PROXY)");
  let target: URL | undefined;
  try {
    target = new URL(baseUrl);
  } catch {
    // A base URL that does not parse is the transport's to report.
  }
  const { proxy, bypass } = target ? proxyFor(target, l.given.proxy, l.env, proxyWords(l, "proxy")) : {};
  return {
    transport: "rest",
    baseUrl,
    apiKey,
    timeoutMs,
    userAgent: USER_AGENT,
    ...tls,
    ...(proxy ? { proxy } : {}),
    ...(bypass ? { proxyBypass: bypass } : {}),
  };
}

/** The SMTP username set to the key itself: refused, naming where the username came from. */
export function checkSmtpUser(l: Layers, user: string, apiKey: string): void {
  const where =
    l.given.smtpUser !== undefined
      ? named(l, "smtpUser", "given")
      : l.front === "cli"
        ? "MAILSEND_SMTP_USER, or the profile's smtp_user"
        : named(l, "smtpUser", "env");
  const userIsKey = smtpUserIsKey(user, apiKey, where);
  if (userIsKey) throw userIsKey;
}

function smtpConfig(l: Layers, apiKey: string): TransportConfig {
  const { timeoutMs, tls } = common(l);
  const host = pick(l, "smtpHost", l.given.smtpHost)?.value as string | undefined;
  if (!host) throw settingError("config_missing", "smtpHost", "no SMTP host", NO_ADDRESS_HINT[l.front].smtp);
  const port = whole(l, "smtpPort", l.given.smtpPort, 1, 65535)?.n ?? DEFAULTS.smtpPort;
  const tlsPick = pick(l, "smtpTls", l.given.smtpTls);
  const tlsName = tlsPick?.value as string | undefined;
  if (tlsName !== undefined && tlsName !== "starttls" && tlsName !== "implicit") {
    const choices = l.front === "api" ? '"starttls" or "implicit"' : "starttls or implicit";
    throw settingError(
      "config_invalid",
      "smtpTls",
      `${l.front === "api" ? "the SMTP TLS mode" : "SMTP TLS mode"} must be ${choices}, got ${JSON.stringify(tlsName)}`,
    );
  }
  const mode: SmtpTlsMode = (tlsName as SmtpTlsMode | undefined) ?? (port === 465 ? "implicit" : "starttls");
  if ((port === 465 && mode === "starttls") || (port === 587 && mode === "implicit")) {
    const tlsWord = l.front === "cli" ? "--smtp-tls" : named(l, "smtpTls", tlsPick?.source);
    throw new MailsendError(
      "tls_mismatch",
      `port ${port} is for ${port === 465 ? "implicit TLS" : "STARTTLS"}, but ${tlsWord} is ${mode}`,
      {
        setting: "smtpTls",
        hint: `Use 587 with starttls or 465 with implicit (the defaults), or leave ${tlsWord} unset.`,
      },
    );
  }
  const user = (pick(l, "smtpUser", l.given.smtpUser)?.value as string | undefined) ?? DEFAULTS.smtpUser;
  checkSmtpUser(l, user, apiKey);
  if (l.front === "cli") checkProxyFlag(l.given.smtpProxy, "--smtp-proxy", "MAILSEND_SMTP_PROXY");
  const proxy = smtpProxyFrom(l.given.smtpProxy, l.env, proxyWords(l, "smtpProxy"));
  return { transport: "smtp", host, port, tls: mode, user, apiKey, timeoutMs, ...tls, ...(proxy ? { proxy } : {}) };
}

/** One channel's settings, with the key given (or "" when none is needed). */
export function channelConfig(l: Layers, name: TransportName, apiKey: string): TransportConfig {
  return name === "rest" ? restConfig(l, apiKey) : smtpConfig(l, apiKey);
}

/** The configured transport's settings and the key: for a run over one transport. */
export async function resolveConfig(l: Layers, opts: ResolveOptions): Promise<TransportConfig> {
  const transport = transportOf(l, false) as TransportName;
  common(l);
  const apiKey = opts.needKey ? await keyOf(l, streamsOf(opts)) : "";
  return channelConfig(l, transport, apiKey);
}

// "stdin" in opts, not opts.stdin: the CLI's stream is a getter, made only when the key is read from it.
const streamsOf = (opts: ResolveOptions): InputStreams | undefined =>
  "stdin" in opts ? (opts as InputStreams) : undefined;

/** A run's settings: its transport (or auto), its key, and its channels. */
export interface Settings {
  transport: TransportName | "auto";
  /** "" when the run needs none (--dry-run, --check, the relay's check). */
  apiKey: string;
  /** The channels with an address set: those auto chooses among. */
  configured: { rest: boolean; smtp: boolean };
  /** One channel's settings with the key (under auto, the one a message chose). */
  channel(name: TransportName): TransportConfig;
}

/**
 * The settings of a run that may use either channel (send, batch, the outbox). Over one
 * transport its settings are checked now; under auto, a channel's when it is asked for, so that
 * a message is not refused for the settings of the channel it does not use.
 */
export async function resolveSettings(l: Layers, opts: ResolveOptions & { needChannel?: boolean }): Promise<Settings> {
  const transport = transportOf(l, true);
  const configured = configuredChannelsOf(l);
  if (transport === "auto" && opts.needChannel && !configured.rest && !configured.smtp) {
    throw noChannelError();
  }
  common(l);
  const apiKey = opts.needKey ? await keyOf(l, streamsOf(opts)) : "";
  const fixed = transport === "auto" ? undefined : channelConfig(l, transport, apiKey);
  return {
    transport,
    apiKey,
    configured,
    channel: (name) => (fixed?.transport === name ? fixed : channelConfig(l, name, apiKey)),
  };
}

/** Every channel's settings, or what stops it: an address not set (config_missing) or a setting that is wrong. */
export function allChannels(s: Settings): {
  configs: Partial<Record<TransportName, TransportConfig>>;
  errors: Partial<Record<TransportName, unknown>>;
} {
  const configs: Partial<Record<TransportName, TransportConfig>> = {};
  const errors: Partial<Record<TransportName, unknown>> = {};
  for (const name of ["rest", "smtp"] as const) {
    try {
      configs[name] = s.channel(name);
    } catch (e) {
      errors[name] = e;
    }
  }
  return { configs, errors };
}

/** An error that only says a channel's address is not set: optional unless it is the selected one. */
export function notConfigured(e: unknown): boolean {
  return (
    e instanceof MailsendError && e.code === "config_missing" && (e.setting === "baseUrl" || e.setting === "smtpHost")
  );
}

// The CLI's entry points (flags, then the environment with the profile under it).

export function resolveTransportName(flags: ConnectionFlags, env: Env): TransportName {
  return transportOf(cliLayers(flags, env), false) as TransportName;
}

/** send's and batch's --transport: rest, smtp, or auto (chosen from the message: transports/choose.ts). */
export function resolveTransportChoice(flags: ConnectionFlags, env: Env): TransportName | "auto" {
  return transportOf(cliLayers(flags, env), true);
}

export function configuredChannels(flags: ConnectionFlags, env: Env): { rest: boolean; smtp: boolean } {
  return configuredChannelsOf(cliLayers(flags, env));
}

export async function resolveApiKey(
  flags: ConnectionFlags,
  env: Env,
  io: InputStreams,
  profile?: ActiveProfile,
): Promise<string> {
  return keyOf(cliLayers(flags, env, profile), io);
}

export async function resolveTransportConfig(
  flags: ConnectionFlags,
  env: Env,
  opts: ResolveOptions & InputStreams & { profile?: ActiveProfile | undefined },
): Promise<TransportConfig> {
  return resolveConfig(cliLayers(flags, env, opts.profile), opts);
}
