/**
 * What doctor shows about a server's certificate, and how it judges one.
 *
 * The probes connect with rejectUnauthorized: false and judge the result
 * themselves (socket.authorized covers the chain and the host name), so that
 * an untrusted certificate can still be described. Nothing secret is sent on
 * a connection that failed this judgement.
 */
import { isIP } from "node:net";
import type { ConnectionOptions, PeerCertificate, TLSSocket } from "node:tls";
import { MailsendError } from "../core/errors.js";
import { trustedCas } from "../net/ca.js";
import { TRUST_HINT } from "../net/errors.js";

export interface CertificateInfo {
  subject: string;
  issuer: string;
  /** subjectAltName as Node reports it, e.g. "DNS:localhost, IP Address:127.0.0.1". */
  altNames?: string;
  validFrom: string;
  /** ISO 8601. */
  validTo: string;
  daysLeft: number;
  /** TLSv1.3 and the like. */
  protocol?: string;
  /** Chain and host name verified. */
  trusted: boolean;
  /** Why not, when not (Node's code, e.g. DEPTH_ZERO_SELF_SIGNED_CERT). */
  trustError?: string;
}

export interface TlsSettings {
  caFile?: string;
  insecure: boolean;
}

/** "CN=localhost, O=Example" from Node's subject object. */
function distinguishedName(dn: PeerCertificate["subject"] | undefined): string {
  if (!dn) return "(none)";
  const parts = Object.entries(dn).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("+") : v}`);
  return parts.length ? parts.join(", ") : "(empty)";
}

function iso(date: string): string {
  const t = Date.parse(date);
  return Number.isNaN(t) ? date : new Date(t).toISOString();
}

export function describeCertificate(socket: TLSSocket, now = Date.now()): CertificateInfo | undefined {
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const validTo = Date.parse(cert.valid_to);
  const authError = socket.authorizationError as unknown;
  return {
    subject: distinguishedName(cert.subject),
    issuer: distinguishedName(cert.issuer),
    ...(cert.subjectaltname ? { altNames: cert.subjectaltname } : {}),
    validFrom: iso(cert.valid_from),
    validTo: iso(cert.valid_to),
    daysLeft: Number.isNaN(validTo) ? 0 : Math.floor((validTo - now) / 86_400_000),
    ...(socket.getProtocol() ? { protocol: socket.getProtocol()! } : {}),
    trusted: socket.authorized,
    ...(socket.authorized
      ? {}
      : {
          trustError:
            authError instanceof Error
              ? ((authError as NodeJS.ErrnoException).code ?? authError.message)
              : String(authError ?? "unknown"),
        }),
  };
}

/** One line: subject, issuer, expiry. */
export function certificateSummary(c: CertificateInfo): string {
  const when = c.validTo.slice(0, 10);
  const left = c.daysLeft < 0 ? `expired ${-c.daysLeft} days ago` : `in ${c.daysLeft} days`;
  return `certificate ${c.subject} (issuer ${c.issuer}), expires ${when} (${left})`;
}

/** The options of a TLS client that verifies nothing itself (see above). */
export function tlsClientOptions(host: string, settings: TlsSettings): ConnectionOptions {
  return {
    rejectUnauthorized: false,
    // SNI with an IP address is invalid (and makes Node print DEP0123).
    ...(isIP(host) ? {} : { servername: host }),
    ...(settings.caFile ? { ca: trustedCas(settings.caFile) } : {}),
  };
}

/** Undefined when the certificate may be used (trusted, or --insecure); else the error to report. */
export function trustFailure(
  c: CertificateInfo | undefined,
  label: string,
  settings: TlsSettings,
): MailsendError | undefined {
  if (settings.insecure) return undefined;
  if (!c) return new MailsendError("tls_untrusted", `${label} presented no certificate`, { hint: TRUST_HINT });
  if (c.trusted) return undefined;
  return new MailsendError(
    "tls_untrusted",
    `the TLS certificate of ${label} is not trusted (${c.trustError}): ${c.subject}, issued by ${c.issuer}`,
    {
      hint:
        c.trustError === "ERR_TLS_CERT_ALTNAME_INVALID"
          ? `The certificate is for ${c.altNames ?? c.subject}, not for this host name: check the host you configured.`
          : c.trustError === "CERT_HAS_EXPIRED"
            ? "The server's certificate has expired: tell the service's operators."
            : TRUST_HINT,
    },
  );
}
