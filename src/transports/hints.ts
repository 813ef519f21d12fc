/**
 * Hints that REST and SMTP give for the same situation, so that a refusal
 * reads the same whichever way the message went (a 413 and a 552 are the
 * same advice).
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { isIP } = process.getBuiltinModule("node:net");
import { MailsendError, type Text } from "../core/errors.js";

/** The message is over the service's size limit (REST 413, SMTP 552). */
export const TOO_LARGE_HINT = "Send smaller or fewer attachments, or a link to the file.";

/** Whether a host is this machine, where a mailsend sandbox is what usually answers. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  return h === "::1" || h === "0:0:0:0:0:0:0:1";
}

/** A revoked or expired key (REST 403, SMTP 535 saying so). */
export function revokedKeyHint(host: string): Text {
  return isLoopback(host)
    ? (s) =>
        `The key is revoked or expired. On a mailsend sandbox (the endpoint is on this machine), \`mailsend sandbox keys add --save\` makes a new key and writes it to the sandbox's own key file (\`api-key\` in its data dir, where its export lines point ${s.env("apiKeyFile")}); if ${s.env("apiKeyFile")} names another file, put the new key there (\`mailsend sandbox keys add\` prints it once). \`mailsend sandbox keys list\` shows the keys.`
    : "The key is revoked or expired: create a new one in the service's dashboard.";
}

/**
 * The server did not take STARTTLS: it did not offer it, or refused the
 * command. Nothing was sent (not even the key): a configuration problem,
 * the same for `send` and `doctor`.
 */
export function noStartTlsError(
  label: string,
  reply: string,
  status: number | undefined,
  cause: unknown,
): MailsendError {
  return new MailsendError(
    "tls_mismatch",
    `${label} does not offer STARTTLS${reply ? ` (it answered: ${reply})` : ""}, and mailsend will not send the key in clear text`,
    {
      cause,
      ...(status !== undefined ? { status } : {}),
      hint: (s) =>
        `Nothing was sent. Use the service's submission port (587 with STARTTLS, or 465 with ${s.value("smtpTls", "implicit")}); this server may not be the service's submission server.`,
    },
  );
}
