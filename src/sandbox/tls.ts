/**
 * A private CA and a server certificate for localhost, made on first start
 * and kept in the data dir, so clients verify TLS for real (with the CA in
 * NODE_EXTRA_CA_CERTS or --ca-file) instead of switching verification off.
 */
import { webcrypto, X509Certificate as NodeX509 } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";

export interface TlsMaterial {
  caPath: string;
  certPath: string;
  keyPath: string;
  ca: string;
  cert: string;
  key: string;
}

type KeyPair = Parameters<typeof import("@peculiar/x509").X509CertificateGenerator.createSelfSigned>[0]["keys"];

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY = 86_400_000;

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64.trimEnd()}\n-----END ${label}-----\n`;
}

function stillValid(certPem: string, hosts: readonly string[]): boolean {
  try {
    const cert = new NodeX509(certPem);
    const ok = Date.parse(cert.validTo) - Date.now() > 7 * DAY;
    // Node's own matching: its subjectAltName text writes ::1 as 0:0:0:0:0:0:0:1 (a text search
    // would never find it, and make a new CA on every start), and 127.0.0.1 is not 127.0.0.10.
    return ok && hosts.every((h) => (isIP(h) ? cert.checkIP(h) : cert.checkHost(h)) !== undefined);
  } catch {
    return false;
  }
}

export async function generateTls(hosts: readonly string[] = ["localhost", "127.0.0.1", "::1"]) {
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  const now = new Date(Date.now() - DAY);
  const caKeys = (await webcrypto.subtle.generateKey(ALG, true, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair as unknown as KeyPair;
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=mailsend sandbox CA",
    keys: caKeys,
    notBefore: now,
    notAfter: new Date(now.getTime() + 3650 * DAY),
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const leafKeys = (await webcrypto.subtle.generateKey(ALG, true, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair as unknown as KeyPair;
  const names = hosts.map((h) =>
    /^[\d.]+$|:/.test(h) ? { type: "ip" as const, value: h } : { type: "dns" as const, value: h },
  );
  const leaf = await x509.X509CertificateGenerator.create({
    subject: "CN=localhost",
    issuer: caCert.subject,
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    notBefore: now,
    notAfter: new Date(now.getTime() + 825 * DAY),
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
      await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const keyDer = await webcrypto.subtle.exportKey("pkcs8", leafKeys.privateKey as unknown as webcrypto.CryptoKey);
  return { ca: `${caCert.toString("pem")}\n`, cert: `${leaf.toString("pem")}\n`, key: pem("PRIVATE KEY", keyDer) };
}

/** Load the CA and certificate from `dir`, making them when missing or near expiry. */
export async function ensureTls(
  dir: string,
  hosts: readonly string[] = ["localhost", "127.0.0.1", "::1"],
): Promise<TlsMaterial> {
  const caPath = join(dir, "ca.pem");
  const certPath = join(dir, "cert.pem");
  const keyPath = join(dir, "key.pem");
  if (existsSync(caPath) && existsSync(certPath) && existsSync(keyPath)) {
    const m = {
      caPath,
      certPath,
      keyPath,
      ca: readFileSync(caPath, "utf8"),
      cert: readFileSync(certPath, "utf8"),
      key: readFileSync(keyPath, "utf8"),
    };
    if (stillValid(m.cert, hosts)) return m;
  }
  mkdirSync(dir, { recursive: true });
  const made = await generateTls(hosts);
  writeFileSync(keyPath, made.key, { mode: 0o600 });
  writeFileSync(certPath, made.cert);
  writeFileSync(caPath, made.ca);
  return { caPath, certPath, keyPath, ...made };
}
