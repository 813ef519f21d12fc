/**
 * Which HTTP proxy a REST request to a given URL goes through, read as curl
 * reads it: `--proxy` / MAILSEND_PROXY first, else https_proxy / HTTPS_PROXY
 * for an https:// service and http_proxy / HTTP_PROXY for an http:// one,
 * else all_proxy / ALL_PROXY (the lower-case name wins when both are set);
 * then no_proxy / NO_PROXY may exempt the host, whichever way the proxy was
 * named. Pure: no connection is made here.
 *
 * NO_PROXY entries, comma- or space-separated: `*` (every host), a host name
 * (`example.com` or `.example.com`: that host and every host under it), an
 * IP address, a CIDR range (`10.0.0.0/8`, `fd00::/8`), any of them with
 * `:port` to exempt only that port.
 */
import type { ProxySetting } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { Env } from "../core/env.js";

/** What was decided for one URL: a proxy, or why none. */
export interface ProxyChoice {
  proxy?: ProxySetting;
  /** Set when a proxy was named but this host goes direct: "NO_PROXY (.internal)", "--proxy none". */
  bypass?: string;
}

const NONE = new Set(["none", "direct"]);

function get(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/** How a front end names where a proxy came from: what it was given (a flag, an option), and a variable. */
export interface ProxyWords {
  given: string;
  env: (name: string) => string;
}

const CLI_PROXY: ProxyWords = { given: "--proxy", env: (name) => name };
const CLI_SMTP_PROXY: ProxyWords = { given: "--smtp-proxy", env: (name) => name };

function first(env: Env, names: string[], words: ProxyWords): { value: string; source: string } | undefined {
  for (const name of names) {
    const value = get(env, name);
    if (value) return { value, source: words.env(name) };
  }
  return undefined;
}

const HTTP_PROXY = ["http:", "https:"] as const;
const SMTP_PROXY = ["http:", "https:", "socks4:", "socks4a:", "socks5:", "socks5h:"] as const;

/** The proxy URL as settings name it: "proxy:3128" is http://proxy:3128, as curl reads it. */
export function parseProxyUrl(value: string, source: string, kinds: readonly string[] = HTTP_PROXY): ProxySetting {
  const url = proxyUrlOf(value, source);
  const protocol = url.protocol === "socks:" ? "socks5:" : url.protocol;
  if (!kinds.includes(protocol)) {
    throw new MailsendError(
      "config_invalid",
      `the proxy in ${source} (${url.protocol}//${url.host}) is not one mailsend can use here: ${kinds.map((k) => `${k}//`).join(", ")}`,
      {
        hint:
          kinds.length === HTTP_PROXY.length
            ? "REST goes through an HTTP proxy (http://host:port). For SMTP through a SOCKS proxy, see --smtp-proxy."
            : "Name the proxy as socks5://host:1080 or http://host:3128.",
      },
    );
  }
  if (url.pathname !== "/" && url.pathname !== "") {
    throw new MailsendError(
      "config_invalid",
      `the proxy in ${source} (${url.protocol}//${url.host}) has a path; a proxy is only scheme://host:port`,
    );
  }
  // curl's default proxy port: 1080 whatever the scheme, except 443 for https://.
  const port = Number(url.port || (protocol === "https:" ? 443 : 1080));
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const { user, password } = credentialsOf(url, source);
  return {
    protocol: protocol as ProxySetting["protocol"],
    host,
    port,
    label: `${protocol}//${url.hostname}:${port}`,
    source,
    ...(user || password
      ? { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`, user, password }
      : {}),
  };
}

/** The value as a URL (http:// when it names no scheme); nothing of it is said when it is none, as it may hold a password. */
function proxyUrlOf(value: string, source: string): URL {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  // An "@" after the first "/", "?" or "#" of the authority: a user or password with one of those
  // written as is, which cut the URL there. What URL() would take for the host is that password's start.
  const afterScheme = text.slice(text.indexOf("//") + 2);
  const cut = afterScheme.search(/[/?#]/);
  if (cut >= 0 && afterScheme.slice(cut).includes("@")) {
    throw new MailsendError(
      "config_invalid",
      `the proxy in ${source} has its user or password cut: a "/", "?" or "#" in them must be %-encoded`,
      {
        hint: `Write them as %2F, %3F and %23 (and "@" as %40, "%" as %25) in ${source}.`,
      },
    );
  }
  try {
    return new URL(text);
  } catch {
    throw new MailsendError("config_invalid", `the proxy in ${source} is not a URL`, {
      hint: "Expected http://[user:password@]host:port (or https:// for TLS to the proxy).",
    });
  }
}

/** The user and password in the proxy URL, %-decoded. */
function credentialsOf(url: URL, source: string): { user: string; password: string } {
  // A "%" in a password must be written %25 in a URL: a lone one is said, never the value.
  const decoded = (part: string, what: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new MailsendError(
        "config_invalid",
        `the proxy in ${source} (${url.protocol}//${url.host}) has a badly %-encoded ${what}`,
        {
          hint: `Write each "%" in it as %25 (and "@", ":", "/" as %40, %3A, %2F).`,
        },
      );
    }
  };
  return { user: decoded(url.username, "user name"), password: decoded(url.password, "password") };
}

/** --smtp-proxy / MAILSEND_SMTP_PROXY: SMTP goes through a proxy only when asked (never HTTPS_PROXY's). */
export function smtpProxyFrom(
  flag: string | undefined,
  env: Env,
  words: ProxyWords = CLI_SMTP_PROXY,
): ProxySetting | undefined {
  const named =
    flag !== undefined ? { value: flag.trim(), source: words.given } : first(env, ["MAILSEND_SMTP_PROXY"], words);
  if (!named?.value || NONE.has(named.value.toLowerCase())) return undefined;
  return parseProxyUrl(named.value, named.source, SMTP_PROXY);
}

function ipv4(text: string): bigint | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return parts.reduce((n, p) => (n << 8n) | BigInt(p), 0n);
}

function ipv6(text: string): bigint | undefined {
  if (!text.includes(":") || !/^[0-9a-f:.]+$/i.test(text)) return undefined;
  let head = text;
  let tail4: bigint | undefined;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail4 = ipv4(dotted[1]!);
    if (tail4 === undefined) return undefined;
    head = `${text.slice(0, -dotted[1]!.length)}0:0`;
  }
  const halves = head.split("::");
  if (halves.length > 2) return undefined;
  const left = halves[0] ? halves[0].split(":") : [];
  const right = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - left.length - right.length;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return undefined;
  const groups = [...left, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...right];
  if (groups.some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) return undefined;
  let n = groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
  if (tail4 !== undefined) n = (n & ~0xffffffffn) | tail4;
  return n;
}

function address(text: string): { n: bigint; bits: number } | undefined {
  const v4 = ipv4(text);
  if (v4 !== undefined) return { n: v4, bits: 32 };
  const v6 = ipv6(text);
  return v6 === undefined ? undefined : { n: v6, bits: 128 };
}

/** Whether one NO_PROXY entry exempts host:port. */
function exempts(entry: string, host: string, port: number): boolean {
  let e = entry.toLowerCase();
  if (e === "*") return true;
  // [v6]:port, v4:port or name:port: only that port.
  let entryPort: number | undefined;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(e);
  if (bracket) {
    e = bracket[1]!;
    if (bracket[2]) entryPort = Number(bracket[2]);
  } else {
    const withPort = /^([^:]+):(\d+)$/.exec(e);
    if (withPort) {
      e = withPort[1]!;
      entryPort = Number(withPort[2]);
    }
  }
  if (entryPort !== undefined && entryPort !== port) return false;
  const [net, prefix] = e.split("/");
  const target = address(host);
  const range = address(net!);
  if (range && target) {
    if (range.bits !== target.bits) return false;
    const bits = prefix === undefined ? range.bits : Number(prefix);
    if (!Number.isInteger(bits) || bits < 0 || bits > range.bits) return false;
    const shift = BigInt(range.bits - bits);
    return range.n >> shift === target.n >> shift;
  }
  if (range || target) return false;
  const name = e.replace(/^\*?\./, "");
  return name !== "" && (host === name || host.endsWith(`.${name}`));
}

/** The proxy for requests to `target`, or none. */
export function proxyFor(target: URL, flag: string | undefined, env: Env, words: ProxyWords = CLI_PROXY): ProxyChoice {
  const explicit =
    flag !== undefined ? { value: flag.trim(), source: words.given } : first(env, ["MAILSEND_PROXY"], words);
  if (explicit && NONE.has(explicit.value.toLowerCase())) return { bypass: `${explicit.source} ${explicit.value}` };
  const named = explicit?.value
    ? explicit
    : first(
        env,
        target.protocol === "https:"
          ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
          : ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"],
        words,
      );
  if (!named) return {};
  const proxy = parseProxyUrl(named.value, named.source);
  const noProxy = first(env, ["no_proxy", "NO_PROXY"], words);
  if (noProxy) {
    const host = target.hostname
      .replace(/^\[|\]$/g, "")
      .toLowerCase()
      .replace(/\.$/, "");
    const port = Number(target.port || (target.protocol === "https:" ? 443 : 80));
    const hit = noProxy.value.split(/[\s,]+/).find((entry) => entry && exempts(entry, host, port));
    if (hit) return { bypass: `${noProxy.source} (${hit})` };
  }
  return { proxy };
}

/**
 * A proxy flag's own value: a URL with a password in it would sit in the
 * process list and the shell's history, so credentials come only from the
 * environment. The value itself is not repeated.
 */
export function checkProxyFlag(value: string | undefined, flag: string, variable: string): void {
  if (value === undefined) return;
  if (/^(?:[a-z][a-z0-9+.-]*:\/\/)?[^/@\s]*:[^/@\s]*@/i.test(value)) {
    throw new MailsendError(
      "usage",
      `${flag} must not hold a password: the command line is visible to other users (ps) and kept in the shell's history`,
      {
        hint: `Put the proxy URL with its credentials in ${variable} instead.`,
      },
    );
  }
}
