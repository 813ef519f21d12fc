import { readFileSync } from "node:fs";
import { MailsendError } from "../core/errors.js";

/**
 * The CAs to trust with --ca-file (MAILSEND_CA_FILE): Node's own roots plus the file's, since a
 * `ca` option replaces the defaults instead of adding to them.
 */
export function trustedCas(caFile: string): string[] {
  try {
    // node:tls when needed, not at load: on Node 24 it costs ~40 ms that an http:// send never uses.
    return [...process.getBuiltinModule("node:tls").rootCertificates, readFileSync(caFile, "utf8")];
  } catch (e) {
    throw new MailsendError("config_invalid", `the CA file ${caFile} (--ca-file, MAILSEND_CA_FILE or a profile's ca_file) cannot be read (${(e as NodeJS.ErrnoException).code ?? e})`);
  }
}
