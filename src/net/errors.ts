// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { connect: netConnect, isIP } = process.getBuiltinModule("node:net");
import { MailsendError, said, type Text } from "../core/errors.js";

export const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
]);

export const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
]);

function errCode(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown };
  return typeof err?.code === "string" ? err.code : "";
}

/** "wrong version number" and friends: TLS spoken to a plain-text port. */
export function looksLikeTlsToPlaintext(e: unknown): boolean {
  const text = `${errCode(e)} ${(e as Error)?.message ?? ""}`;
  return /wrong version number|WRONG_VERSION_NUMBER|packet length too long|unknown protocol|http request/i.test(text);
}

export interface Endpoint {
  /** What to call it in messages: "https://api.example.com" or "smtp.example.com:587". */
  label: string;
  /** How the user sets it: the flag and env var (as words, for each front end). */
  setting: Text;
  /** What to say when TLS meets a plain-text port (or the reverse). */
  tlsHint: Text;
}

/**
 * Classify a socket-level failure that happened before the request was
 * handed over. Returns undefined when the error is not one of these.
 */
export function connectError(e: unknown, ep: Endpoint, trustHint: Text): MailsendError | undefined {
  const code = errCode(e);
  const msg = (e as Error)?.message ?? String(e);
  if (UNREACHABLE.has(code)) {
    const what =
      code === "ECONNREFUSED"
        ? "connection refused"
        : code === "ENOTFOUND" || code === "EAI_AGAIN"
          ? "host not found"
          : "host unreachable";
    return new MailsendError("connection_failed", `cannot reach ${ep.label}: ${what}`, {
      cause: e,
      hint: (s) =>
        `Check ${said(ep.setting, s.front)}, and that the service (or \`mailsend sandbox\`) is running. Nothing was sent.`,
    });
  }
  if (UNTRUSTED.has(code)) {
    return new MailsendError("tls_untrusted", `the TLS certificate of ${ep.label} is not trusted (${code})`, {
      cause: e,
      hint: untrustedHint(e, trustHint, ep.setting),
    });
  }
  if (looksLikeTlsToPlaintext(e)) {
    return new MailsendError(
      "tls_mismatch",
      `${ep.label} did not answer with TLS: the port and the TLS mode do not match`,
      {
        cause: e,
        hint: (s) => `${said(ep.tlsHint, s.front)} Nothing was sent.`,
      },
    );
  }
  if (/ssl|tls|handshake|certificate/i.test(`${code} ${msg}`)) {
    return new MailsendError("tls_mismatch", `TLS handshake with ${ep.label} failed: ${msg}`, {
      cause: e,
      hint: (s) => `${said(ep.tlsHint, s.front)} Nothing was sent.`,
    });
  }
  return undefined;
}

export function isReset(e: unknown): boolean {
  const code = errCode(e);
  return code === "ECONNRESET" || code === "EPIPE" || /socket hang up|closed/i.test((e as Error)?.message ?? "");
}

/**
 * What to do about a certificate that is not trusted. Most often a private CA
 * to name (`caHint`); but a certificate for other host names, or an expired
 * one, is not fixed by trusting a CA, and saying so spares the search.
 */
export function untrustedHint(e: unknown, caHint: Text, hostSetting: Text): Text {
  const code = errCode(e);
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    const cert = (e as { cert?: { subjectaltname?: string; subject?: { CN?: string } } })?.cert;
    const names = cert?.subjectaltname ?? (cert?.subject?.CN ? `CN=${cert.subject.CN}` : undefined);
    const host = (e as { host?: unknown })?.host;
    const named = typeof host === "string" && host ? host : undefined;
    // A managed service's certificate names its host name: an address copied from a console does not match it.
    const byAddress = named && isIP(named.replace(/^\[|\]$/g, "")) ? ", not its IP address" : "";
    return (s) =>
      `The certificate is for ${names ?? "other host names"}, not for ${named ?? "the host connected to"}: use a name it lists in ${said(hostSetting, s.front)}${byAddress}.`;
  }
  if (code === "CERT_HAS_EXPIRED") return "The server's certificate has expired: tell whoever runs the server.";
  return caHint;
}

export const TRUST_HINT: Text = (s) =>
  `If the server uses a private CA (the sandbox does), ${s.pick({
    cli: "pass --ca-file <pem> or set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS. --insecure skips the check (not for production).",
    api: "set caFile to its CA certificate (a PEM file). insecure skips the check (not for production).",
    sendmail: "set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file.",
  })}`;

/**
 * Whether host:port completes a TLS handshake (any certificate): tells a
 * TLS-from-the-first-byte port from a plain one when a client set for the
 * other mode hears nothing.
 */
export function speaksTls(host: string, port: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  return probe(
    timeoutMs,
    signal,
    (bare, answer) => {
      // node:tls only here, when a failure is being explained: a send that succeeds never loads it.
      const socket = process
        .getBuiltinModule("node:tls")
        .connect({ host: bare, port, rejectUnauthorized: false, ...(isIP(bare) ? {} : { servername: bare }) });
      socket.once("secureConnect", () => answer(true));
      return socket;
    },
    host,
  );
}

/** Whether host:port answers a plain HTTP request with an HTTP status line: an HTTP port where SMTP was expected. */
export function speaksHttp(host: string, port: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  return probe(
    timeoutMs,
    signal,
    (bare, answer) => {
      const socket = netConnect({ host: bare, port });
      let got = Buffer.alloc(0);
      socket.once("connect", () => socket.write(`HEAD / HTTP/1.0\r\nHost: ${bare}\r\n\r\n`));
      socket.on("data", (d: Buffer) => {
        got = Buffer.concat([got, d]);
        if (got.length >= 5) answer(got.subarray(0, 5).toString("latin1") === "HTTP/");
      });
      return socket;
    },
    host,
  );
}

/**
 * One yes/no question asked of a port on a connection of its own: `open`
 * connects and calls `answer` when it knows. No answer within timeoutMs, an
 * error, the peer closing, or the signal all mean no; the socket is always
 * destroyed and the promise settles once.
 */
export function probe(
  timeoutMs: number,
  signal: AbortSignal | undefined,
  open: (bareHost: string, answer: (yes: boolean) => void) => NodeJS.EventEmitter & { destroy(): void },
  host: string,
): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    let done = false;
    const finish = (yes: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", cancel);
      socket.destroy();
      resolve(yes);
    };
    const cancel = () => finish(false);
    signal?.addEventListener("abort", cancel, { once: true });
    const timer = setTimeout(cancel, timeoutMs);
    const socket = open(host.replace(/^\[|\]$/g, ""), finish);
    socket.once("end", cancel);
    socket.once("error", cancel);
  });
}
