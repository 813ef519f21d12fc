/**
 * The config file: named profiles, each a set of defaults for the settings
 * that also have an environment variable, and where the API key is (an
 * environment variable's name or a file's path, never the key itself).
 *
 *   {
 *     "profile": "work",
 *     "profiles": {
 *       "work": { "base_url": "https://api.example.com", "from": "ci@example.com", "api_key_env": "WORK_MAILSEND_KEY" }
 *     }
 *   }
 *
 * A profile is a layer under the environment: layeredEnv() fills in the
 * MAILSEND_* variables the environment leaves unset, so every reader of
 * those variables (resolve.ts, the rate limit, the sender) gets
 * flags > environment > profile > defaults without knowing about profiles.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { closeSync, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, statSync } =
  process.getBuiltinModule("node:fs");
import { writeFileAtomic } from "../core/atomic.js";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { formatMailbox, parseMailbox1 } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import { homeDir } from "../core/home.js";
import { parseLocatedJson, JsonSyntaxError, type LocatedJson } from "../core/located-json.js";
import { shownPath } from "../core/read.js";
import { checkRootOnly, octal } from "../core/trusted-dir.js";
import { SYSTEM_CONFIG_PATH } from "./system-config.js";
import type { Env } from "../core/env.js";

type Kind = "string" | "url" | "choice" | "int" | "address" | "name" | "envname" | "path" | "redis-url" | "proxy-url";

export interface SettingSpec {
  kind: Kind;
  /** The environment variable of the same setting; the profile's value is used when it is unset. */
  env?: string;
  choices?: readonly string[];
  min?: number;
  max?: number;
  description: string;
}

/** Every key a profile may hold. README's "Profiles" section lists the same (a unit test checks). */
export const PROFILE_SETTINGS = {
  transport: { kind: "choice", choices: ["rest", "smtp"], env: "MAILSEND_TRANSPORT", description: "rest or smtp" },
  base_url: { kind: "url", env: "MAILSEND_BASE_URL", description: "REST base address" },
  smtp_host: { kind: "string", env: "MAILSEND_SMTP_HOST", description: "SMTP server host" },
  smtp_port: { kind: "int", min: 1, max: 65535, env: "MAILSEND_SMTP_PORT", description: "587 or 465" },
  smtp_tls: {
    kind: "choice",
    choices: ["starttls", "implicit"],
    env: "MAILSEND_SMTP_TLS",
    description: "starttls or implicit",
  },
  smtp_user: { kind: "string", env: "MAILSEND_SMTP_USER", description: "SMTP username" },
  from: { kind: "address", env: "MAILSEND_FROM", description: 'sender, "Name <addr>" or addr' },
  name: { kind: "name", description: "display name of the profile's from" },
  rate_limit: {
    kind: "int",
    min: 0,
    max: 1_000_000,
    env: "MAILSEND_RATE_LIMIT",
    description: "requests per minute (0 = off)",
  },
  timeout: { kind: "int", min: 1, max: 3600, env: "MAILSEND_TIMEOUT", description: "seconds" },
  retries: { kind: "int", min: 0, max: 100, env: "MAILSEND_RETRIES", description: "retries of a temporary failure" },
  max_wait: { kind: "int", min: 0, max: 86_400, env: "MAILSEND_MAX_WAIT", description: "longest wait in seconds" },
  api_key_env: { kind: "envname", description: "name of the environment variable holding the key" },
  api_key_file: {
    kind: "path",
    description: "path of a file holding the key (~ and paths relative to the config file allowed)",
  },
  postmaster: {
    kind: "address",
    env: "MAILSEND_POSTMASTER",
    description: "who also gets the outbox's notices of mail it gave up or still retries (MAILSEND_NOTICES)",
  },
  aliases: {
    kind: "path",
    env: "MAILSEND_ALIASES",
    description: "sendmail: an aliases file (/etc/aliases format) mapping local names such as root to addresses",
  },
  // What a daemon calling sendmail (cron, PHP-FPM) cannot be given by its environment: the shared
  // budget's Redis, the proxy, a private CA. Never a password: the URLs are refused with one.
  ca_file: {
    kind: "path",
    env: "MAILSEND_CA_FILE",
    description: "a PEM file of CA certificates to trust too (the service, its proxy, the budget's Redis)",
  },
  proxy: {
    kind: "proxy-url",
    env: "MAILSEND_PROXY",
    description: 'HTTP proxy for REST, or "none"; no password (that only in the environment)',
  },
  rate_limit_url: {
    kind: "redis-url",
    env: "MAILSEND_RATE_LIMIT_URL",
    description: "the shared budget's Redis: redis://, rediss:// or redis-sentinel://, without a password",
  },
  rate_limit_password_file: {
    kind: "path",
    env: "MAILSEND_RATE_LIMIT_PASSWORD_FILE",
    description: "path of a file holding that Redis's password",
  },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof PROFILE_SETTINGS;
export type ProfileSettings = { [K in SettingName]?: string | number };

export const SETTING_NAMES = Object.keys(PROFILE_SETTINGS) as SettingName[];

export function isSettingName(s: string): s is SettingName {
  return Object.hasOwn(PROFILE_SETTINGS, s);
}

/** A field that would hold a key, a password or a token: refused, whatever its value. */
export function looksLikeKeyField(name: string): boolean {
  if (isSettingName(name)) return false;
  // "key" as a word of the name (api_key, apiKey, smtp-key, key, apikey), not inside one (nosuchkey, monkey).
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  if (words.some((w) => w === "key" || w === "keys" || w === "apikey")) return true;
  return /token|secret|passw|^pass$|_pass$|credential/i.test(name);
}

const KEY_FIELD_HINT =
  'The config file says WHERE the key is, never the key: use "api_key_env": "SOME_VARIABLE" or "api_key_file": "~/.secrets/mailsend" instead.';

/** What is wrong with a value for a setting, without repeating the value (it might be a secret in the wrong place). */
export function settingProblem(name: SettingName, value: unknown): string | undefined {
  const spec: SettingSpec = PROFILE_SETTINGS[name];
  switch (spec.kind) {
    case "int":
      return typeof value === "number" && Number.isInteger(value) && value >= spec.min! && value <= spec.max!
        ? undefined
        : `${name} must be a whole number from ${spec.min} to ${spec.max}`;
    case "choice":
      return typeof value === "string" && spec.choices!.includes(value)
        ? undefined
        : `${name} must be ${spec.choices!.join(" or ")}`;
    default:
      break;
  }
  if (typeof value !== "string" || value === "") return `${name} must be a non-empty string`;
  if (/[\u0000-\u001f\u007f]/.test(value)) return `${name} must be one line without control characters`;
  switch (spec.kind) {
    case "url": {
      let u: URL;
      try {
        u = new URL(value);
      } catch {
        return `${name} must be an http:// or https:// URL`;
      }
      return u.protocol === "http:" || u.protocol === "https:"
        ? undefined
        : `${name} must be an http:// or https:// URL`;
    }
    case "address":
      try {
        parseMailbox1(value, name);
        return undefined;
      } catch {
        return `${name} must be one address, "Name <addr>" or addr`;
      }
    case "redis-url":
      if (!/^(?:rediss?|rediss?[+-]sentinel):\/\//i.test(value))
        return `${name} must start with redis://, rediss://, redis-sentinel:// or rediss-sentinel://`;
      return passwordIn(value)
        ? `${name} must not hold a password: put it in a file named by rate_limit_password_file (mode 0600)`
        : undefined;
    case "proxy-url":
      return passwordIn(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`)
        ? `${name} must not hold a password: give a proxy that needs one in the environment (MAILSEND_PROXY or HTTPS_PROXY)`
        : undefined;
    case "envname":
      return /^[A-Z_][A-Z0-9_]*$/.test(value)
        ? undefined
        : `${name} must be the NAME of an environment variable (capitals, digits and _, like WORK_MAILSEND_KEY), not the key`;
    default:
      return undefined;
  }
}

/** A URL's user part (before its last "@"), if any. */
function userPartIn(url: string): string | undefined {
  const rest = url.slice(url.indexOf("//") + 2);
  const at = rest.lastIndexOf("@");
  return at >= 0 ? rest.slice(0, at) : undefined;
}

/** Whether a URL has a password in its user part (user:password@ or :password@). */
function passwordIn(url: string): boolean {
  return /:./.test(userPartIn(url) ?? "");
}

/** A value given on the command line (`config set`), as the file stores it. */
export function parseSettingValue(name: SettingName, raw: string): string | number {
  const spec: SettingSpec = PROFILE_SETTINGS[name];
  const value = spec.kind === "int" && /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
  const problem = settingProblem(name, value);
  if (problem) throw new MailsendError("usage", problem);
  return value;
}

function homeOf(env: Env): string {
  return homeDir(env);
}

function expandHome(p: string, env: Env): string {
  if (p === "~") return homeOf(env);
  if (p.startsWith("~/")) return join(homeOf(env), p.slice(2));
  return p;
}

/**
 * This user's config file, the one `config set` writes: MAILSEND_CONFIG, else
 * $XDG_CONFIG_HOME/mailsend/config.json, else ~/.config/mailsend/config.json (%APPDATA% on Windows).
 */
export function configPath(env: Env, platform = process.platform): string {
  if (env.MAILSEND_CONFIG) return resolve(expandHome(env.MAILSEND_CONFIG, env));
  if (platform === "win32")
    return join(env.APPDATA || join(homeOf(env), "AppData", "Roaming"), "mailsend", "config.json");
  const xdg =
    env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(homeOf(env), ".config");
  return join(xdg, "mailsend", "config.json");
}

/** Which config file is read. */
export interface ConfigSource {
  /** The file read (it may not exist: then there are no profiles). */
  path: string;
  /** It is the system's file, read because this user has no file of their own. */
  system: boolean;
  /** This user's own file (configPath): where `config set` and `config unset` write. */
  userPath: string;
}

/** Whether there is something at `path` (what cannot be looked at counts: reading it says why). */
function present(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code !== "ENOENT" && code !== "ENOTDIR";
  }
}

/**
 * MAILSEND_CONFIG when set; else this user's file; else, when this user has none, the system's
 * file if there is one (not on Windows). One whole file: the two are never merged, so what a
 * user's file leaves out is not taken from the system's.
 */
export function configSource(env: Env, systemPath = SYSTEM_CONFIG_PATH, platform = process.platform): ConfigSource {
  const userPath = configPath(env, platform);
  const own = { path: userPath, system: false, userPath };
  if (env.MAILSEND_CONFIG || platform === "win32" || present(userPath) || !present(systemPath)) return own;
  return { path: systemPath, system: true, userPath };
}

export interface ConfigFile {
  path: string;
  exists: boolean;
  /** The system's file, read because this user has none (configSource). */
  system?: boolean;
  /** The top-level "profile": the profile used when none is asked for. */
  defaultProfile?: string;
  profiles: Record<string, ProfileSettings>;
  /** The parsed document, for rewriting it (`config set`). */
  data: Record<string, unknown>;
}

function invalid(
  path: string,
  where: { line: number; column?: number } | undefined,
  message: string,
  hint?: string,
): MailsendError {
  const at = where ? `:${where.line}${where.column ? `:${where.column}` : ""}` : "";
  return new MailsendError("config_invalid", `${shownPath(path)}${at}: ${message}`, hint ? { hint } : {});
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Where a key sits in the config file, for the error that names it. */
type KeyAt = (obj: object, key: string) => ReturnType<LocatedJson["keyPosition"]>;

const keyFields = (obj: Record<string, unknown>) => Object.keys(obj).filter(looksLikeKeyField);

/** The top level holds "profiles" and optionally "profile", never an API key. */
function checkTopLevel(path: string, data: Record<string, unknown>, at: KeyAt): void {
  const topKeyLike = keyFields(data);
  if (topKeyLike.length > 0) {
    throw invalid(
      path,
      at(data, topKeyLike[0]!),
      `${topKeyLike.join(", ")}: the config file must not hold an API key`,
      KEY_FIELD_HINT,
    );
  }
  const unknownTop = Object.keys(data).filter((k) => k !== "profile" && k !== "profiles");
  if (unknownTop.length > 0) {
    const list = unknownTop.map((k) => `${JSON.stringify(k)} (line ${at(data, k)?.line})`).join(", ");
    throw invalid(
      path,
      at(data, unknownTop[0]!),
      `unknown top-level key${unknownTop.length > 1 ? "s" : ""} ${list}`,
      'The file holds "profiles" (an object of named profiles) and optionally "profile" (the name of the default one).',
    );
  }
}

/** Settings each valid alone that a profile must not hold together (or one without the other). */
function checkProfileCombinations(path: string, name: string, value: Record<string, unknown>, at: KeyAt): void {
  // redis://word@host: without a password file the word is the password (as redis-cli reads it),
  // which a profile must not hold; with one, it is the ACL user name.
  const userPart = typeof value.rate_limit_url === "string" ? userPartIn(value.rate_limit_url) : undefined;
  if (userPart && !userPart.includes(":") && value.rate_limit_password_file === undefined) {
    throw invalid(
      path,
      at(value, "rate_limit_url"),
      `profile "${name}": rate_limit_url has a user part and there is no rate_limit_password_file: alone, that part is read as the Redis password, which a profile must not hold`,
      "Set rate_limit_password_file (a file holding the password) first: the user part is then the ACL user name. Or remove the user part.",
    );
  }
  if (value.api_key_env !== undefined && value.api_key_file !== undefined) {
    throw invalid(path, at(value, "api_key_file"), `profile "${name}": give api_key_env or api_key_file, not both`);
  }
  if (value.name !== undefined && value.from === undefined) {
    throw invalid(
      path,
      at(value, "name"),
      `profile "${name}": name is the display name of the profile's from; set from too`,
    );
  }
}

/** One named profile: a valid name, known settings with valid values, no API key. */
function checkProfile(path: string, name: string, value: unknown, pos: ReturnType<KeyAt>, at: KeyAt): ProfileSettings {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name)) {
    throw invalid(
      path,
      pos,
      `profile name ${JSON.stringify(name)} must be letters, digits, ".", "_" or "-" (up to 64)`,
    );
  }
  if (!isObject(value)) throw invalid(path, pos, `profile "${name}" must be an object`);
  const keyLike = keyFields(value);
  if (keyLike.length > 0) {
    throw invalid(
      path,
      at(value, keyLike[0]!),
      `profile "${name}": ${keyLike.join(", ")}: a profile must not hold an API key`,
      KEY_FIELD_HINT,
    );
  }
  const unknown = Object.keys(value).filter((k) => !isSettingName(k));
  if (unknown.length > 0) {
    const list = unknown.map((k) => `${JSON.stringify(k)} (line ${at(value, k)?.line})`).join(", ");
    throw invalid(
      path,
      at(value, unknown[0]!),
      `profile "${name}": unknown key${unknown.length > 1 ? "s" : ""} ${list}`,
      `A profile may hold: ${SETTING_NAMES.join(", ")}.`,
    );
  }
  for (const [k, v] of Object.entries(value)) {
    const problem = settingProblem(k as SettingName, v);
    if (problem) throw invalid(path, at(value, k), `profile "${name}": ${problem}`);
  }
  checkProfileCombinations(path, name, value, at);
  return value as ProfileSettings;
}

/** Validate a parsed config document; errors name the file and the line. */
export function checkConfigData(path: string, parsed: LocatedJson): ConfigFile {
  const data = parsed.value;
  const at: KeyAt = (obj, key) => parsed.keyPosition(obj, key);
  if (!isObject(data))
    throw invalid(
      path,
      { line: 1 },
      "the config file must hold a JSON object",
      'Start from: {"profiles": {"default": {}}}',
    );
  checkTopLevel(path, data, at);
  const profilesValue = data.profiles ?? {};
  if (!isObject(profilesValue))
    throw invalid(path, at(data, "profiles"), '"profiles" must be an object of named profiles');
  const profiles: Record<string, ProfileSettings> = {};
  for (const [name, value] of Object.entries(profilesValue)) {
    profiles[name] = checkProfile(path, name, value, at(profilesValue, name), at);
  }
  let defaultProfile: string | undefined;
  if (data.profile !== undefined) {
    if (typeof data.profile !== "string" || !Object.hasOwn(profiles, data.profile)) {
      const names = Object.keys(profiles);
      throw invalid(
        path,
        at(data, "profile"),
        `"profile" must name one of the profiles (${names.length ? names.join(", ") : "there are none"})`,
      );
    }
    defaultProfile = data.profile;
  }
  return { path, exists: true, ...(defaultProfile ? { defaultProfile } : {}), profiles, data };
}

/**
 * The system's file, once it is open: read only when root alone can change it, as the opened
 * file's own status shows (a link root made to a root-only file is followed, as for a conffile).
 */
function readSystemText(path: string): string {
  const fd = openSync(path, "r");
  try {
    const link = lstatSync(path);
    checkRootOnly([
      { path: dirname(path), what: "directory of the system config file", st: statSync(dirname(path)) },
      ...(link.isSymbolicLink() ? [{ path, what: "symbolic link to the system config file", st: link }] : []),
      { path, what: "system config file", st: fstatSync(fd) },
    ]);
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * Read and check the config file; a file that does not exist is an empty one. `system`: the
 * system's file, read only when root alone can change it.
 */
export function readConfigFile(path: string, system = false): ConfigFile {
  let text: string;
  try {
    text = system ? readSystemText(path) : readFileSync(path, "utf8");
  } catch (e) {
    if (e instanceof MailsendError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { path, exists: false, profiles: {}, data: {} };
    const why =
      code === "EACCES" || code === "EPERM"
        ? "permission denied"
        : code === "EISDIR"
          ? "it is a directory"
          : (code ?? String(e));
    throw new MailsendError("config_invalid", `cannot read the config file ${shownPath(path)} (${why})`, {
      cause: e,
      hint: system
        ? "It is the system's config file, read by every user without one of their own: let them read it (chmod 644: it holds no key), or give this user a config file of its own (MAILSEND_CONFIG)."
        : "Fix its permissions, or point MAILSEND_CONFIG at another file.",
    });
  }
  let parsed: LocatedJson;
  try {
    parsed = parseLocatedJson(text);
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    throw invalid(
      path,
      e.position,
      `not valid JSON: ${e.reason}`,
      "The config file is JSON: double-quoted names and strings, no comments, no trailing commas.",
    );
  }
  const cfg = checkConfigData(path, parsed);
  return system ? { ...cfg, system } : cfg;
}

/** The config file in use (configSource), read and checked. */
export function readConfig(env: Env, systemPath = SYSTEM_CONFIG_PATH): ConfigFile {
  const source = configSource(env, systemPath);
  return readConfigFile(source.path, source.system);
}

export interface ActiveProfile {
  name: string;
  /** The config file it is in. */
  file: string;
  /** That is the system's file (ConfigFile.system). */
  system?: boolean;
  settings: ProfileSettings;
}

/** Which profile applies: --profile, else MAILSEND_PROFILE, else the file's "profile", else one named "default". */
export function selectProfile(cfg: ConfigFile, requested: string | undefined, env: Env): ActiveProfile | undefined {
  const fromEnv = env.MAILSEND_PROFILE || undefined;
  const asked = requested ?? fromEnv;
  const name = asked ?? cfg.defaultProfile ?? (Object.hasOwn(cfg.profiles, "default") ? "default" : undefined);
  if (name === undefined) return undefined;
  if (!Object.hasOwn(cfg.profiles, name)) {
    const via = requested !== undefined ? "--profile" : "MAILSEND_PROFILE";
    const names = Object.keys(cfg.profiles);
    const where = shownPath(cfg.path);
    throw new MailsendError(
      "config_missing",
      cfg.exists
        ? `no profile "${name}" (from ${via}) in ${where}`
        : `no profile "${name}" (from ${via}): there is no config file at ${where}`,
      {
        hint: `${names.length ? `Profiles there: ${names.join(", ")}. ` : ""}Create it with: mailsend config set --profile ${name} base_url https://...`,
      },
    );
  }
  return { name, file: cfg.path, ...(cfg.system ? { system: true } : {}), settings: cfg.profiles[name]! };
}

const unset = (env: Env, name: string) => env[name] === undefined || env[name] === "";

/** The environment with the profile's settings filled in where the environment has none. */
export function layeredEnv(env: Env, profile: ActiveProfile | undefined): Env {
  if (!profile) return env;
  const out: Env = { ...env };
  for (const name of SETTING_NAMES) {
    const spec: SettingSpec = PROFILE_SETTINGS[name];
    const value = profile.settings[name];
    if (spec.env === undefined || value === undefined || !unset(env, spec.env)) continue;
    // The profile's Redis password is for the profile's Redis: not sent to one the environment names.
    if (name === "rate_limit_password_file" && !unset(env, "MAILSEND_RATE_LIMIT_URL")) continue;
    // A file's path: ~ expanded, and relative to the config file (as api_key_file), not to the
    // directory a daemon happens to run in.
    out[spec.env] =
      spec.kind === "path" ? resolve(dirname(profile.file), expandHome(String(value), env)) : String(value);
  }
  // The display name belongs to the profile's own from: fold it in, so a sender from
  // the environment or a flag never gets the profile's name.
  const { from, name } = profile.settings;
  if (typeof from === "string" && typeof name === "string" && unset(env, "MAILSEND_FROM")) {
    out.MAILSEND_FROM = formatMailbox({ name, address: parseMailbox1(from, "from").address });
  }
  return out;
}

export interface Settings {
  /** The environment with the active profile's settings under it. */
  env: Env;
  profile?: ActiveProfile;
}

/** The settings a command runs with: read the config file, pick the profile, layer it under the environment. */
export function loadSettings(requested: string | undefined, env: Env, systemPath = SYSTEM_CONFIG_PATH): Settings {
  const cfg = readConfig(env, systemPath);
  const profile = selectProfile(cfg, requested, env);
  return profile ? { env: layeredEnv(env, profile), profile } : { env };
}

/**
 * The key the profile points at. Called only when the environment and the
 * flags give none. Every failure is a configuration error naming the profile.
 */
export async function readProfileKey(
  profile: ActiveProfile,
  env: Env,
): Promise<{ raw: string; source: string } | undefined> {
  const label = `profile "${profile.name}" (${shownPath(profile.file)})`;
  const { api_key_env: varName, api_key_file: file } = profile.settings;
  if (typeof varName === "string") {
    const raw = env[varName];
    if (raw === undefined || raw === "") {
      throw new MailsendError("config_missing", `${label} takes the API key from $${varName}, which is not set`, {
        hint: `Set ${varName} (in CI: from the secret store), or change the profile: mailsend config set --profile ${profile.name} api_key_env OTHER_VARIABLE`,
      });
    }
    return { raw, source: `$${varName} (${label})` };
  }
  if (typeof file === "string") {
    const path = resolve(dirname(profile.file), expandHome(file, env));
    try {
      return { raw: readFileSync(path, "utf8"), source: `${shownPath(path)} (${label})` };
    } catch (e) {
      throw unreadableKeyFile(e, path, label, profile);
    }
  }
  return undefined;
}

/** Who owns `path` and its mode, for saying why this user may not read it. */
function ownerOf(path: string): string {
  try {
    const st = statSync(path);
    return `; it is uid ${st.uid}'s, mode ${octal(st.mode)}`;
  } catch {
    return "";
  }
}

/** The profile's key file could not be read: why, and what this user can do. */
function unreadableKeyFile(e: unknown, path: string, label: string, profile: ActiveProfile): MailsendError {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "EACCES" || code === "EPERM") {
    const uid = process.geteuid?.();
    const me = uid === undefined ? "" : ` (uid ${uid})`;
    // A key readable by root alone is right for root and the services; another user needs a key of its own.
    const own =
      "give this user a key file of its own, readable by it alone: MAILSEND_API_KEY_FILE=<path> in its environment, or a config file of its own whose profile names it (see docs/install.md)";
    return new MailsendError(
      "config_missing",
      `${label} takes the API key from ${shownPath(path)}, which cannot be read (permission denied: this user${me} may not read it${ownerOf(path)})`,
      {
        cause: e,
        hint: profile.system
          ? `That key is for root and the system's services. To send as this user, ${own}.`
          : `Let this user read it, or ${own}.`,
      },
    );
  }
  const why = code === "ENOENT" ? "it does not exist" : code === "EISDIR" ? "it is a directory" : (code ?? String(e));
  return new MailsendError(
    "config_missing",
    `${label} takes the API key from ${shownPath(path)}, which cannot be read (${why})`,
    {
      cause: e,
      hint: `Put the key in that file (mode 0600), or change the profile: mailsend config set --profile ${profile.name} api_key_file <path>`,
    },
  );
}

/** Write the config file atomically: a 0600 temp file beside it, fsynced, renamed over it. */
export function writeConfigFile(path: string, data: Record<string, unknown>): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileAtomic(path, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
}
