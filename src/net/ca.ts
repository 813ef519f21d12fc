// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { readFileSync } = process.getBuiltinModule("node:fs");
import { MailsendError } from "../core/errors.js";

/**
 * The CAs to trust with --ca-file (MAILSEND_CA_FILE): Node's own roots, NODE_EXTRA_CA_CERTS's and
 * the file's, since a `ca` option replaces the defaults instead of adding to them (and Node's
 * rootCertificates leaves NODE_EXTRA_CA_CERTS out): a CA file for one server (a profile's, for the
 * budget's Redis) must not take away the CAs the environment trusts for another.
 */
export function trustedCas(caFile: string): string[] {
  let file: string;
  try {
    file = readFileSync(caFile, "utf8");
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? e;
    throw new MailsendError(
      "config_invalid",
      (s) =>
        `the CA file ${caFile} (${s.pick({ cli: `${s.flag("caFile")}, ${s.env("caFile")} or a profile's ca_file`, api: s.flag("caFile"), sendmail: `${s.env("caFile")} or a profile's ca_file` })}) cannot be read (${why})`,
      { setting: "caFile" },
    );
  }
  return [...defaultCas(), file];
}

/**
 * What Node trusts without a `ca` option. Node 22.15+ says so itself (getCACertificates: its roots,
 * the system's store where Node uses it, as the single executable does, and NODE_EXTRA_CA_CERTS);
 * an older Node, its roots and NODE_EXTRA_CA_CERTS's file.
 */
function defaultCas(): string[] {
  // node:tls when needed, not at load: an http:// send never needs it.
  const tls = process.getBuiltinModule("node:tls") as typeof import("node:tls") & {
    getCACertificates?: (type: "default") => string[];
  };
  if (tls.getCACertificates) return tls.getCACertificates("default");
  const extraFile = process.env.NODE_EXTRA_CA_CERTS;
  let extra: string[] = [];
  if (extraFile) {
    try {
      extra = [readFileSync(extraFile, "utf8")];
    } catch {
      // Node itself warned at start that it could not read it.
    }
  }
  return [...tls.rootCertificates, ...extra];
}
