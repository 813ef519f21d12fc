import { readFileSync } from "node:fs";
import { MailsendError } from "../core/errors.js";

/**
 * The CAs to trust with --ca-file (MAILSEND_CA_FILE): Node's own roots, NODE_EXTRA_CA_CERTS's and
 * the file's, since a `ca` option replaces the defaults instead of adding to them (and Node's
 * rootCertificates leaves NODE_EXTRA_CA_CERTS out): a CA file for one server (a profile's, for the
 * budget's Redis) must not take away the CAs the environment trusts for another.
 */
export function trustedCas(caFile: string): string[] {
  let extra: string[] = [];
  const extraFile = process.env.NODE_EXTRA_CA_CERTS;
  if (extraFile) {
    try {
      extra = [readFileSync(extraFile, "utf8")];
    } catch {
      // Node itself warned at start that it could not read it.
    }
  }
  try {
    // node:tls when needed, not at load: an http:// send never needs it.
    return [...process.getBuiltinModule("node:tls").rootCertificates, ...extra, readFileSync(caFile, "utf8")];
  } catch (e) {
    throw new MailsendError("config_invalid", `the CA file ${caFile} (--ca-file, MAILSEND_CA_FILE or a profile's ca_file) cannot be read (${(e as NodeJS.ErrnoException).code ?? e})`);
  }
}
