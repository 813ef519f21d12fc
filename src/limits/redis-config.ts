/**
 * Where the shared budget's Redis is, read from MAILSEND_RATE_LIMIT_URL and
 * its companions, without loading a Redis client: a bad URL fails before
 * anything else happens, and its message never holds the password.
 *
 *   redis://[user[:password]@]host[:port][/db]          plain TCP (port 6379)
 *   rediss://…                                          TLS, certificate verified
 *   redis-sentinel://[user[:password]@]host1[:26379][,host2[:26379]…]/master[/db]
 *   rediss-sentinel://…                                 TLS to the sentinels and the master
 *
 * `redis+sentinel://` is taken as `redis-sentinel://` (the spelling of some
 * Python tools). The user and password in the URL are those of the Redis
 * server; MAILSEND_RATE_LIMIT_PASSWORD_FILE names a file holding the password
 * instead, so it stays out of the URL (which ends up in logs and `env`
 * dumps). Sentinels that require a password of their own get it from
 * MAILSEND_RATE_LIMIT_SENTINEL_PASSWORD_FILE.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { readFileSync } = process.getBuiltinModule("node:fs");
import { MailsendError, type Text } from "../core/errors.js";
import { expandHome } from "../core/home.js";
import type { Env } from "../core/env.js";

export interface RedisNode {
  host: string;
  port: number;
}

export interface RedisConfig {
  /** Standalone server, or a master found through sentinels. */
  kind: "standalone" | "sentinel";
  /** The server (standalone), or the sentinels in the order given. */
  nodes: RedisNode[];
  /** Sentinel: the master's name as the sentinels know it. */
  masterName?: string;
  db: number;
  username?: string;
  password?: string;
  sentinelPassword?: string;
  tls: boolean;
  /** Extra CA certificates (--ca-file) to trust beside Node's own (and NODE_EXTRA_CA_CERTS). */
  caFile?: string;
  /** The URL as it may be printed: no user info, no password. */
  label: string;
  /** Where the password came from, for doctor: "URL", the file's path, or none. */
  passwordSource?: string;
}

export const URL_VARIABLE = "MAILSEND_RATE_LIMIT_URL";
export const PASSWORD_FILE_VARIABLE = "MAILSEND_RATE_LIMIT_PASSWORD_FILE";
export const SENTINEL_PASSWORD_FILE_VARIABLE = "MAILSEND_RATE_LIMIT_SENTINEL_PASSWORD_FILE";

const FORMS =
  "redis://[user:password@]host[:port][/db], rediss://… for TLS, or redis-sentinel://host1:26379,host2:26379/mymaster[/db]";

function invalid(
  message: Text,
  hint: Text = (s) => `Expected ${FORMS}. Or unset ${s.env("rateLimitUrl")} to keep the budget per machine.`,
): MailsendError {
  return new MailsendError("config_invalid", message, { hint });
}

function decode(part: string, what: string, shown: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw invalid((s) => `${s.env("rateLimitUrl")} (${shown}) has a badly %-encoded ${what}`);
  }
}

function parseNode(text: string, defaultPort: number, shown: string): RedisNode {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]/]+))(?::(\d{1,5}))?$/.exec(text);
  if (!m) throw invalid((s) => `${s.env("rateLimitUrl")} (${shown}) has no valid host:port in "${text}"`);
  const port = m[3] === undefined ? defaultPort : Number(m[3]);
  if (port < 1 || port > 65535)
    throw invalid((s) => `${s.env("rateLimitUrl")} (${shown}) has port ${m[3]}, outside 1-65535`);
  return { host: (m[1] ?? m[2])!, port };
}

function readSecretFile(path: string, variable: string, env: Env): string {
  let text: string;
  try {
    text = readFileSync(expandHome(path, env), "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new MailsendError(
      "config_invalid",
      (s) => `${s.env(variable)} names ${path}, which cannot be read (${code ?? (e as Error).message})`,
      {
        hint: (s) => `Point ${s.env(variable)} at a readable file holding only the password.`,
      },
    );
  }
  // One line, as a secret file written by echo or a secrets manager holds it.
  const secret = text.replace(/\r?\n$/, "");
  if (!secret)
    throw new MailsendError("config_invalid", (s) => `${s.env(variable)} names ${path}, which is empty`, {
      hint: (s) => `Write the password into ${path}, or unset ${s.env(variable)}.`,
    });
  return secret;
}

/** The URL's parts, its scheme one mailsend knows and nothing after the path; `shown` is what of it may be printed. */
interface UrlParts {
  scheme: string;
  authority: string;
  path: string;
  shown: string;
}

function urlParts(url: string): UrlParts {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(url);
  // Not a URL: nothing of it is printed, since what is a password in it cannot be told.
  if (!m) throw invalid((s) => `${s.env("rateLimitUrl")} is not a URL`);
  // What may be printed: the URL from after its last "@". A generic stripUserinfo cannot tell
  // redis://s3cr/et@host (a password cut by its "/") from an "@" in a path, and printed it whole.
  const shown = `${m[1]}://${url.slice(url.lastIndexOf("@") + 1 || m[1]!.length + 3)}`;
  const scheme = m[1]!.toLowerCase().replace("+", "-");
  const schemes = ["redis", "rediss", "redis-sentinel", "rediss-sentinel"];
  if (!schemes.includes(scheme))
    throw invalid(
      (s) =>
        `${s.env("rateLimitUrl")} must start with redis://, rediss://, redis-sentinel:// or rediss-sentinel://, not ${m[1]}://`,
    );
  // An "@" after the authority: a password with "/", "?" or "#" written as is, which cut the URL
  // there. Nothing after the host is repeated: it holds the rest of that password.
  if (`${m[3]}${m[4] ?? ""}${m[5] ?? ""}`.includes("@")) {
    throw invalid(
      (s) =>
        `${s.env("rateLimitUrl")} (${shown}) has its user or password cut: a "/", "?" or "#" in them must be %-encoded`,
      (s) =>
        `Write them as %2F, %3F and %23 (and "@" as %40, "%" as %25), or put the password in a file named by ${s.env(PASSWORD_FILE_VARIABLE)}.`,
    );
  }
  if (m[4] || m[5])
    throw invalid(
      (s) => `${s.env("rateLimitUrl")} (${shown}) has a query or fragment, which mailsend does not read`,
      (s) =>
        `TLS is chosen by the scheme (rediss://), the password may come from ${s.env(PASSWORD_FILE_VARIABLE)}, the CA from ${s.pick({ cli: "--ca-file or NODE_EXTRA_CA_CERTS", api: "caFile", sendmail: "MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS" })}.`,
    );
  return { scheme, authority: m[2]!, path: m[3]!, shown };
}

/** The user and password of the URL's user info (none without one). */
function urlCredentials(
  userinfo: string | undefined,
  env: Env,
  shown: string,
): { username?: string | undefined; password?: string | undefined } {
  if (userinfo === undefined) return {};
  const colon = userinfo.indexOf(":");
  const username = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), "user name", shown) || undefined;
  const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), "password", shown) || undefined;
  // redis://secret@host: what redis-cli takes as the password alone, unless the password file gives it.
  if (colon < 0 && username && !env[PASSWORD_FILE_VARIABLE]?.trim()) return { password: username };
  return { username, password };
}

/** The master's name (sentinel only) and the database number the URL's path gives. */
function masterAndDb(
  pathText: string,
  sentinel: boolean,
  shown: string,
): { masterName: string | undefined; db: number } {
  const path = pathText.split("/").filter((p) => p !== "");
  let masterName: string | undefined;
  if (sentinel) {
    const first = path.shift();
    masterName = first === undefined ? undefined : decode(first, "master name", shown);
    if (!masterName)
      throw invalid(
        (s) =>
          `${s.env("rateLimitUrl")} (${shown}) names no master: add it as the path, e.g. redis-sentinel://host:26379/mymaster`,
      );
  }
  if (path.length > 1 || (path[0] !== undefined && !/^\d{1,5}$/.test(path[0]))) {
    throw invalid(
      (s) =>
        `${s.env("rateLimitUrl")} (${shown}) has the path "${pathText}"; after the host only a database number may follow (${sentinel ? "/mymaster/0" : "/0"})`,
    );
  }
  return { masterName, db: path[0] === undefined ? 0 : Number(path[0]) };
}

/** The server's password (from the URL or its file, never both, and where it came from) and the sentinels' own. */
function passwords(
  fromUrl: string | undefined,
  env: Env,
  shown: string,
): { password?: string | undefined; passwordSource?: string | undefined; sentinelPassword?: string | undefined } {
  let password = fromUrl;
  let passwordSource: string | undefined = password ? "the URL" : undefined;
  const passwordFile = env[PASSWORD_FILE_VARIABLE]?.trim();
  if (passwordFile) {
    if (password)
      throw invalid(
        (s) => `both ${s.env("rateLimitUrl")} and ${s.env(PASSWORD_FILE_VARIABLE)} give a Redis password`,
        (s) => `Keep one: take the password out of the URL (${shown}), or unset ${s.env(PASSWORD_FILE_VARIABLE)}.`,
      );
    password = readSecretFile(passwordFile, PASSWORD_FILE_VARIABLE, env);
    passwordSource = passwordFile;
  }
  const sentinelFile = env[SENTINEL_PASSWORD_FILE_VARIABLE]?.trim();
  const sentinelPassword = sentinelFile
    ? readSecretFile(sentinelFile, SENTINEL_PASSWORD_FILE_VARIABLE, env)
    : undefined;
  return { password, passwordSource, sentinelPassword };
}

/** The Redis of MAILSEND_RATE_LIMIT_URL; undefined when it is not set. */
export function redisConfigFrom(env: Env, opts: { caFile?: string } = {}): RedisConfig | undefined {
  const url = env[URL_VARIABLE]?.trim();
  if (!url) return undefined;
  const { scheme, authority, path, shown } = urlParts(url);
  const at = authority.lastIndexOf("@");
  const { username, password: urlPassword } = urlCredentials(at < 0 ? undefined : authority.slice(0, at), env, shown);
  const hostPart = authority.slice(at + 1);
  const sentinel = scheme.endsWith("-sentinel");
  const { masterName, db } = masterAndDb(path, sentinel, shown);

  if (!hostPart) throw invalid((s) => `${s.env("rateLimitUrl")} (${shown}) names no host`);
  const hosts = sentinel ? hostPart.split(",") : [hostPart];
  const nodes = hosts.map((h) => parseNode(h, sentinel ? 26379 : 6379, shown));
  const { password, passwordSource, sentinelPassword } = passwords(urlPassword, env, shown);

  const tls = scheme.startsWith("rediss");
  const label = `${scheme}://${nodes.map((n) => `${n.host.includes(":") ? `[${n.host}]` : n.host}:${n.port}`).join(",")}${masterName ? `/${masterName}` : ""}${db ? `/${db}` : ""}`;
  return {
    kind: sentinel ? "sentinel" : "standalone",
    nodes,
    ...(masterName ? { masterName } : {}),
    db,
    ...(username ? { username } : {}),
    ...(password ? { password } : {}),
    ...(sentinelPassword ? { sentinelPassword } : {}),
    tls,
    ...(opts.caFile ? { caFile: opts.caFile } : {}),
    label,
    ...(passwordSource ? { passwordSource } : {}),
  };
}
