/**
 * The REST endpoint, as doctor looks at it: can it be reached (and is its
 * certificate good), and does it accept the key. The key check sends a send
 * request the service must refuse as invalid, so no mail can go out.
 */
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import type { RestConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import { connectError, isReset, speaksTls, TRUST_HINT, type Endpoint } from "../net/errors.js";
import { absoluteForm, openToProxy, openTunnel, proxyAgent } from "../transports/proxy.js";
import { urlToHttpOptions } from "node:url";
import { describeCertificate, tlsClientOptions, type CertificateInfo } from "./tls-info.js";

export function sendUrlOf(baseUrl: string): URL {
  const url = new URL(baseUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/send`;
  return url;
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

function portOf(url: URL): number {
  return Number(url.port || (url.protocol === "https:" ? 443 : 80));
}

function endpoint(url: URL): Endpoint {
  return {
    label: url.origin,
    setting: "--base-url / MAILSEND_BASE_URL",
    tlsHint: "Check the scheme of --base-url / MAILSEND_BASE_URL: https:// for a TLS port, http:// for a plain one.",
  };
}

function classify(e: unknown, url: URL): MailsendError {
  if (e instanceof MailsendError) return e;
  if (/^HPE_/.test(String((e as NodeJS.ErrnoException).code ?? ""))) {
    return new MailsendError("config_invalid", `${url.origin} did not answer in HTTP (${(e as Error).message})`, {
      cause: e,
      hint: "Check the host and port of --base-url / MAILSEND_BASE_URL: this looks like another service (an SMTP port?).",
    });
  }
  return (
    connectError(e, endpoint(url), TRUST_HINT) ??
    new MailsendError("connection_failed", `cannot reach ${url.origin}: ${(e as Error).message}`, {
      cause: e,
      hint: "Check --base-url / MAILSEND_BASE_URL and the network.",
    })
  );
}

export interface Reach {
  ms: number;
  address?: string;
  certificate?: CertificateInfo;
}

/**
 * Through a proxy: for https://, the CONNECT tunnel and the TLS handshake
 * inside it (the certificate described as on a direct connection); for
 * http://, only the proxy can be reached before a request (the key check
 * makes one).
 */
async function reachThroughProxy(config: RestConfig, url: URL, timeoutMs: number): Promise<Reach> {
  const proxy = config.proxy!;
  const started = Date.now();
  const host = hostOf(url);
  const tunnelOpts = { timeoutMs, ...(config.caFile ? { caFile: config.caFile } : {}) };
  if (url.protocol !== "https:") {
    (await openToProxy(proxy, tunnelOpts)).destroy();
    return { ms: Date.now() - started };
  }
  const raw = await openTunnel(proxy, host, portOf(url), tunnelOpts);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ socket: raw, ...tlsClientOptions(host, config) });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new MailsendError(
          "timeout",
          `${url.origin} did not finish the TLS handshake through the proxy within ${timeoutMs / 1000} s`,
          { hint: "Check the network, or raise --timeout." },
        ),
      );
    }, timeoutMs);
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      const certificate = describeCertificate(socket);
      socket.destroy();
      resolve({ ms: Date.now() - started, ...(certificate ? { certificate } : {}) });
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      socket.destroy();
      reject(classify(e, url));
    });
  });
}

/**
 * A TCP connection, and for https:// a TLS handshake, to the endpoint's host
 * and port. The certificate is described, not judged: see trustFailure.
 */
export function reachRest(config: RestConfig, timeoutMs: number): Promise<Reach> {
  const url = sendUrlOf(config.baseUrl);
  if (config.proxy) return reachThroughProxy(config, url, timeoutMs);
  const host = hostOf(url);
  const port = portOf(url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const secure = url.protocol === "https:";
    const socket: net.Socket = secure
      ? tls.connect({ host, port, ...tlsClientOptions(host, config) })
      : net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new MailsendError("timeout", `${url.origin} did not accept a connection within ${timeoutMs / 1000} s`, {
          hint: "Check the network, or raise --timeout.",
        }),
      );
    }, timeoutMs);
    socket.once(secure ? "secureConnect" : "connect", () => {
      clearTimeout(timer);
      const certificate = secure ? describeCertificate(socket as tls.TLSSocket) : undefined;
      const address = socket.remoteAddress;
      socket.destroy();
      resolve({ ms: Date.now() - started, ...(address ? { address } : {}), ...(certificate ? { certificate } : {}) });
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      socket.destroy();
      reject(classify(e, url));
    });
  });
}

export interface KeyAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** The options of the probe's request: its own connection (TLS as a send's), through the proxy when there is one. */
function probeOptions(
  config: RestConfig,
  url: URL,
  headers: Record<string, string>,
  timeoutMs: number,
): https.RequestOptions {
  const secure = url.protocol === "https:";
  const options: https.RequestOptions = {
    method: "POST",
    headers,
    agent: false,
    ...(secure ? tlsClientOptions(hostOf(url), config) : {}),
  };
  if (secure) options.rejectUnauthorized = !config.insecure;
  if (config.proxy) {
    const agentOptions: https.AgentOptions = {
      keepAlive: false,
      ...(secure ? { ...tlsClientOptions(hostOf(url), config), rejectUnauthorized: !config.insecure } : {}),
    };
    options.agent = proxyAgent(config.proxy, url, agentOptions, {
      timeoutMs,
      ...(config.caFile ? { caFile: config.caFile } : {}),
    });
    if (!secure) {
      const form = absoluteForm(config.proxy, url);
      options.path = form.path;
      options.headers = { ...headers, ...form.headers };
    }
  }
  return options;
}

/** A plain-text request dropped without a byte of answer: a TLS port does that, so the port is asked. */
async function droppedWithoutAnswer(e: Error, url: URL, timeoutMs: number): Promise<MailsendError> {
  const yes = await speaksTls(hostOf(url), portOf(url), Math.min(timeoutMs, 3000));
  return yes
    ? new MailsendError("tls_mismatch", `${url.origin} speaks TLS, but --base-url says http://`, {
        cause: e,
        hint: "Use https:// in --base-url / MAILSEND_BASE_URL.",
      })
    : new MailsendError("connection_failed", `${url.origin} closed the connection without an answer`, {
        cause: e,
        hint: "Check that --base-url / MAILSEND_BASE_URL is the service's address and port.",
      });
}

/**
 * POST /send with the key and the body `{}`: a service that checks the key
 * first answers 401/403 for a bad one and 400 for a good one, and sends
 * nothing either way.
 */
export function postEmptySend(config: RestConfig, timeoutMs: number): Promise<KeyAnswer> {
  const url = sendUrlOf(config.baseUrl);
  const secure = url.protocol === "https:";
  const body = "{}";
  const headers = {
    Authorization: `Bearer ${config.apiKey}`,
    "Content-Type": "application/json",
    "Content-Length": String(body.length),
    "User-Agent": config.userAgent,
    Accept: "application/json",
  };
  return new Promise((resolve, reject) => {
    let settled = false;
    const done = (f: () => void) => {
      if (settled) return;
      settled = true;
      req.destroy();
      f();
    };
    const options = probeOptions(config, url, headers, timeoutMs);
    const req = (secure ? https : http).request({ ...urlToHttpOptions(url), ...options }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        if (size < 16 * 1024) chunks.push(c);
        size += c.length;
      });
      res.on("end", () =>
        done(() =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }),
        ),
      );
      res.on("error", (e) => done(() => reject(classify(e, url))));
    });
    req.setTimeout(timeoutMs, () =>
      done(() =>
        reject(
          new MailsendError("timeout", `${url.origin} did not answer within ${timeoutMs / 1000} s`, {
            hint: "Check the network, or raise --timeout.",
          }),
        ),
      ),
    );
    req.on("error", (e) => {
      if (settled) return;
      if (isReset(e) && !secure) {
        void droppedWithoutAnswer(e, url, timeoutMs).then((failure) => done(() => reject(failure)));
        return;
      }
      done(() => reject(classify(e, url)));
    });
    req.end(body);
  });
}
