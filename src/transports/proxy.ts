/**
 * REST through an HTTP proxy on node:http: a CONNECT tunnel for an https://
 * service (TLS to the service inside it, verified as on a direct connection),
 * the absolute form (`POST http://host/send`) for an http:// one.
 *
 * Written on node:http rather than with undici's ProxyAgent or the
 * https-proxy-agent package: a one-shot send through a proxy then loads
 * no package that a direct send does not. And https-proxy-agent hands a refused
 * CONNECT back as if the service had answered it (a proxy's 403 would read as a revoked
 * key); here every failure of the proxy's part is an error naming the proxy.
 */
import type http from "node:http";
import type https from "node:https";
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { connect: netConnect, isIP } = process.getBuiltinModule("node:net");
import type net from "node:net";
import type tls from "node:tls";
import type { ProxySetting } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { trustedCas } from "../net/ca.js";
import { UNREACHABLE, UNTRUSTED } from "../net/errors.js";

function setting(proxy: ProxySetting): string {
  return proxy.source === "--proxy" ? "--proxy (or MAILSEND_PROXY)" : proxy.source;
}

function named(proxy: ProxySetting): string {
  return `the proxy ${proxy.label} (from ${proxy.source})`;
}

/** How the proxy answered a CONNECT (or, for http://, the request itself) when it did not let it through. */
export function proxyStatusError(status: number, proxy: ProxySetting, target: string): MailsendError {
  const where = setting(proxy);
  // 401 is not a proxy's status, but tinyproxy answers it to credentials it refuses (407 only when
  // none came). To a CONNECT it cannot be the service's: the tunnel was never opened.
  if (status === 407 || status === 401) {
    return new MailsendError(
      "auth_failed",
      `${named(proxy)} ${proxy.authorization ? "refused its user and password" : "requires a user and password"} (HTTP ${status === 407 ? "407 Proxy Authentication Required" : "401 Unauthorized"})`,
      {
        status,
        local: true,
        hint: `${proxy.authorization ? "Check" : "Give"} the proxy's credentials in ${where === "--proxy (or MAILSEND_PROXY)" ? "MAILSEND_PROXY" : where}, as the user:password@ before the proxy's host in that URL (%-encode special characters). Nothing was sent.`,
      },
    );
  }
  if (status === 403) {
    return new MailsendError("auth_failed", `${named(proxy)} does not allow connections to ${target} (HTTP 403)`, {
      status,
      local: true,
      hint: `Ask whoever runs the proxy to allow ${target}, or let this host go direct with NO_PROXY if it can. Nothing was sent.`,
    });
  }
  return new MailsendError("connection_failed", `${named(proxy)} could not connect to ${target} (HTTP ${status})`, {
    status,
    hint: `The proxy answered, the service behind it did not: check the base URL, or try again later. Nothing was sent.`,
  });
}

/**
 * A failure on the way to the proxy (not yet to the service): undefined when
 * the error is not one of those, so the caller classifies it as the service's.
 */
export function proxyFailure(e: unknown, proxy: ProxySetting, target: string): MailsendError | undefined {
  if (e instanceof MailsendError) return e;
  const message = (e as Error)?.message ?? String(e);
  // The socks package reports a refused connection to the proxy in its message only.
  const code = (e as { code?: unknown })?.code ?? /^connect (E[A-Z]+) /.exec(message)?.[1];
  const tunnel = /Proxy response \((\d{3})\) !== 200/.exec(message);
  if (tunnel) return proxyStatusError(Number(tunnel[1]), proxy, target);
  if (typeof code === "string" && UNREACHABLE.has(code)) {
    const why =
      code === "ECONNREFUSED"
        ? "connection refused"
        : code === "ENOTFOUND" || code === "EAI_AGAIN"
          ? "host not found"
          : "host unreachable";
    return new MailsendError("connection_failed", `cannot reach ${named(proxy)}: ${why}`, {
      cause: e,
      hint: (s) =>
        `Check ${setting(proxy)}, and that the proxy runs; NO_PROXY (or ${s.value("proxy", "none")}) sends a host direct. Nothing was sent.`,
    });
  }
  if (proxy.protocol === "https:" && typeof code === "string" && UNTRUSTED.has(code)) {
    return new MailsendError("tls_untrusted", `the TLS certificate of ${named(proxy)} is not trusted`, {
      cause: e,
      hint: (s) =>
        `Pass its CA with ${s.pick({ cli: "--ca-file or NODE_EXTRA_CA_CERTS", api: "caFile", sendmail: "MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS" })}, or name the proxy with http://. Nothing was sent.`,
    });
  }
  return undefined;
}

function timedOut(proxy: ProxySetting, timeoutMs: number): MailsendError {
  return new MailsendError("timeout", `${named(proxy)} did not answer within ${timeoutMs / 1000} s`, {
    hint: (s) => `Check ${setting(proxy)} and the network, or raise ${s.flag("timeout")}. Nothing was sent.`,
  });
}

function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

export interface TunnelOptions {
  timeoutMs: number;
  /** --ca-file, for a proxy named with https://. */
  caFile?: string;
  signal?: AbortSignal;
}

/** A plain TCP stream to host:port through the proxy's CONNECT (TLS, if any, is the caller's). */
export function openTunnel(proxy: ProxySetting, host: string, port: number, opts: TunnelOptions): Promise<net.Socket> {
  const target = hostPort(host, port);
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (e: MailsendError | undefined, socket?: net.Socket) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      if (e) {
        req.destroy();
        reject(e);
      } else resolve(socket!);
    };
    const headers: Record<string, string> = {
      Host: target,
      ...(proxy.authorization ? { "Proxy-Authorization": proxy.authorization } : {}),
    };
    const options: https.RequestOptions = {
      host: proxy.host,
      port: proxy.port,
      method: "CONNECT",
      path: target,
      headers,
      agent: false,
    };
    if (proxy.protocol === "https:" && opts.caFile) options.ca = trustedCas(opts.caFile);
    const req = (
      proxy.protocol === "https:" ? process.getBuiltinModule("node:https") : process.getBuiltinModule("node:http")
    ).request(options);
    const timer = setTimeout(() => finish(timedOut(proxy, opts.timeoutMs)), opts.timeoutMs);
    const onAbort = () =>
      finish(
        new MailsendError("temporary_failure", `interrupted while ${named(proxy)} was connecting to ${target}`, {
          hint: "Nothing was sent; it is safe to try again.",
        }),
      );
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("connect", (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        return finish(proxyStatusError(res.statusCode ?? 0, proxy, target));
      }
      if (head.length) socket.unshift(head);
      finish(undefined, socket);
    });
    req.on("error", (e) =>
      finish(
        proxyFailure(e, proxy, target) ??
          new MailsendError("connection_failed", `${named(proxy)} failed: ${e.message}`, {
            cause: e,
            hint: "Nothing was sent.",
          }),
      ),
    );
    req.end();
  });
}

/** A stream to the proxy itself, for requests in the absolute form (an http:// service). */
export function openToProxy(proxy: ProxySetting, opts: TunnelOptions): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const secure = proxy.protocol === "https:";
    const socket: net.Socket = secure
      ? process.getBuiltinModule("node:tls").connect({
          host: proxy.host,
          port: proxy.port,
          ...(isIP(proxy.host) ? {} : { servername: proxy.host }),
          ...(opts.caFile ? { ca: trustedCas(opts.caFile) } : {}),
        })
      : netConnect({ host: proxy.host, port: proxy.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(timedOut(proxy, opts.timeoutMs));
    }, opts.timeoutMs);
    socket.once(secure ? "secureConnect" : "connect", () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      socket.destroy();
      reject(
        proxyFailure(e, proxy, "the service") ??
          new MailsendError("connection_failed", `${named(proxy)} failed: ${e.message}`, {
            cause: e,
            hint: "Nothing was sent.",
          }),
      );
    });
  });
}

type Oncreate = (err: Error | null, socket?: net.Socket) => void;

/**
 * A keep-alive agent whose connections go through the proxy: for https://,
 * the CONNECT tunnel and then TLS to the service with the options Node
 * computed for a direct connection (servername, ca, rejectUnauthorized); for
 * http://, a connection to the proxy (see absoluteForm for the request).
 */
export function proxyAgent(
  proxy: ProxySetting,
  url: URL,
  agentOptions: https.AgentOptions,
  opts: TunnelOptions,
): http.Agent {
  if (url.protocol === "https:") {
    const agent = new (process.getBuiltinModule("node:https").Agent)(agentOptions);
    agent.createConnection = ((options: tls.ConnectionOptions & { signal?: AbortSignal }, oncreate: Oncreate) => {
      const host = (options.host ?? url.hostname).replace(/^\[|\]$/g, "");
      openTunnel(proxy, host, Number(options.port ?? 443), {
        ...opts,
        ...(options.signal ? { signal: options.signal } : {}),
      }).then(
        (raw) => {
          const secure = process.getBuiltinModule("node:tls").connect({ ...options, socket: raw });
          const failed = (e: Error) => {
            secure.destroy();
            oncreate(e);
          };
          secure.once("error", failed);
          secure.once("secureConnect", () => {
            secure.off("error", failed);
            oncreate(null, secure);
          });
        },
        (e: Error) => oncreate(e),
      );
      return undefined;
    }) as unknown as typeof agent.createConnection;
    return agent;
  }
  const agent = new (process.getBuiltinModule("node:http").Agent)(agentOptions);
  agent.createConnection = ((_options: unknown, oncreate: Oncreate) => {
    openToProxy(proxy, opts).then(
      (s) => oncreate(null, s),
      (e: Error) => oncreate(e),
    );
    return undefined;
  }) as unknown as typeof agent.createConnection;
  return agent;
}

/** What an http:// request through a proxy adds: the whole URL as the path, and the credentials. */
export function absoluteForm(proxy: ProxySetting, url: URL): { path: string; headers: Record<string, string> } {
  return { path: url.href, headers: proxy.authorization ? { "Proxy-Authorization": proxy.authorization } : {} };
}

/**
 * An answer to an http:// request that came from the proxy rather than the
 * service: 407 always (no service asks for proxy credentials), 401 when the
 * proxy was given credentials, and 403 or 502-504, when the body is not the
 * service's JSON.
 */
export function proxyAnswerError(
  status: number,
  body: string,
  proxy: ProxySetting,
  url: URL,
): MailsendError | undefined {
  if (status === 407) return proxyStatusError(status, proxy, url.host);
  // The service's 401 is JSON; a page in its place, with credentials given to the proxy, is the proxy refusing them.
  if (status === 401 && proxy.authorization && !/^\s*\{/.test(body)) return proxyStatusError(status, proxy, url.host);
  if ((status === 403 || (status >= 502 && status <= 504)) && !/^\s*\{/.test(body))
    return proxyStatusError(status, proxy, url.host);
  return undefined;
}

/**
 * The SMTP connection through --smtp-proxy: a CONNECT tunnel for an http(s)://
 * proxy, SOCKS for socks4/4a/5/5h:// (the `socks` package, loaded only then).
 * TLS, implicit or by STARTTLS, is nodemailer's inside it, as on a direct connection.
 */
export async function smtpSocket(
  proxy: ProxySetting,
  host: string,
  port: number,
  timeoutMs: number,
): Promise<net.Socket> {
  if (proxy.protocol === "http:" || proxy.protocol === "https:") return openTunnel(proxy, host, port, { timeoutMs });
  const target = hostPort(host, port);
  const { SocksClient } = await import("socks");
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: {
        host: proxy.host,
        port: proxy.port,
        type: proxy.protocol.startsWith("socks4") ? 4 : 5,
        ...(proxy.user ? { userId: proxy.user } : {}),
        ...(proxy.password ? { password: proxy.password } : {}),
      },
      destination: { host, port },
      command: "connect",
      timeout: timeoutMs,
    });
    return socket;
  } catch (e) {
    const byProxy = proxyFailure(e, proxy, target);
    if (byProxy) throw byProxy;
    const message = (e as Error)?.message ?? String(e);
    if (/authentication|auth.*fail|username|password/i.test(message)) {
      throw new MailsendError(
        "auth_failed",
        `${named(proxy)} refused ${proxy.user ? "its user and password" : "to serve without a user and password"} (${message})`,
        {
          cause: e,
          local: true,
          hint: `Check the proxy's credentials in ${proxy.source === "--smtp-proxy" ? "MAILSEND_SMTP_PROXY" : proxy.source}, as the user:password@ before the proxy's host in that URL (%-encode special characters). Nothing was sent.`,
        },
      );
    }
    if (/NotAllowed|not allowed/i.test(message)) {
      throw new MailsendError("auth_failed", `${named(proxy)} does not allow connections to ${target} (${message})`, {
        cause: e,
        local: true,
        hint: "Nothing was sent.",
      });
    }
    if (/timed out|timeout/i.test(message)) throw timedOut(proxy, timeoutMs);
    throw new MailsendError("connection_failed", `${named(proxy)} could not connect to ${target} (${message})`, {
      cause: e,
      hint: (s) =>
        `The proxy answered, the SMTP server behind it did not: check ${s.pair("smtpHost", "smtpPort", false, "/")}, or try again later. Nothing was sent.`,
    });
  }
}
