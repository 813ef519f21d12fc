/**
 * The closing "Examples:" of a command's --help. Every command's help ends with examples
 * (test/e2e/help-examples.test.ts checks each one).
 */

export function examples(lines: string[]): string {
  return `\nExamples:\n${lines.map((l) => (l ? `  ${l}` : "")).join("\n")}\n`;
}

export const DOCTOR_HELP = `
Checks, one line each: the profile, the API key (shown only as its length and a
sha256 fingerprint), the transport, the REST and SMTP settings (port/TLS pairing),
the local rate-limit budget (and Redis, with MAILSEND_RATE_LIMIT_URL), then the
network: the REST endpoint (TLS certificate and expiry) and whether it accepts the
key, and the SMTP server (STARTTLS or implicit TLS, certificate, AUTH).
No mail is sent. The REST key check is a POST /send with an empty request, which
the service refuses as invalid: it may count as one request against the service's
limit, so it takes one slot of the local budget. The SMTP check stops after AUTH.
Both transports are checked when both are configured; the other is skipped if not.
Exit code: 0 when every check passes, else the exit code of the first failure.
${examples([
  "mailsend doctor                                   # the settings from the environment",
  "mailsend doctor --transport smtp --smtp-host smtp.example.com --smtp-port 465",
  "mailsend doctor --json | jq '.checks[] | select(.ok == false)'",
  "mailsend doctor --profile work                    # check a profile before a CI run",
])}`;
