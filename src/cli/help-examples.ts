/**
 * The closing "Examples:" of the --help of the commands that have no longer
 * text of their own in program.ts. Every command's help ends with examples
 * (test/e2e/help-examples.test.ts checks each one).
 */

function examples(lines: string[]): string {
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

export const COMPLETION_HELP = `
Prints a completion script for commands, subcommands, options, their choices and
file arguments, generated from this version's commands.
${examples([
  "mailsend completion bash > ~/.local/share/bash-completion/completions/mailsend",
  "source <(mailsend completion bash)               # in ~/.bashrc",
  'mailsend completion zsh > "${fpath[1]}/_mailsend"',
  "mailsend completion fish > ~/.config/fish/completions/mailsend.fish",
])}`;

export const KEYS_HELP = examples([
  "mailsend sandbox keys add --label ci --expires 30d",
  "mailsend sandbox keys list",
  "mailsend sandbox keys revoke key_3f9a2c1d",
]);

export const KEYS_ADD_HELP = examples([
  "mailsend sandbox keys add                               # prints the new key once",
  "mailsend sandbox keys add --label ci --expires 30d --json",
  "mailsend sandbox keys add --save   # also to <dir>/api-key, for MAILSEND_API_KEY_FILE",
]);

export const KEYS_LIST_HELP = examples([
  "mailsend sandbox keys list",
  "mailsend sandbox keys list --json | jq -r '.[] | select(.state == \"active\") | .id'",
]);

export const KEYS_REVOKE_HELP = examples([
  "mailsend sandbox keys revoke key_3f9a2c1d      # the id from `mailsend sandbox keys list`",
  "mailsend sandbox keys revoke key_3f9a2c1d --dir ./sandbox-data --json",
]);

export const INBOX_HELP = examples([
  "mailsend inbox                        # id, received, from, to, size, subject",
  "mailsend inbox --limit 5 --json",
  "mailsend inbox show <id>              # headers, text and attachments of one message",
]);

export const INBOX_SHOW_HELP = examples([
  "mailsend inbox show <id>",
  "mailsend inbox show <id> --raw > message.eml     # the stored .eml, byte for byte",
  "mailsend inbox show <id> --json | jq .subject",
  "mailsend inbox show '<6d48a104-...@example.com>'  # by the Message-ID an SMTP send printed",
]);

export const QUEUE_HELP = `
Mail handed to mailsend by sendmail, the relay or send --queue waits here
($MAILSEND_STATE_DIR/outbox) until it is delivered, exactly once, within the
key's budget. A background runner starts by itself when mail is queued
(MAILSEND_QUEUE_AUTORUN=0 turns that off where a service runs the queue).
Temporary failures (and a key the service refuses: fix it, the backlog goes)
are retried with backoff for up to 5 days (--max-age), then moved to failed/
with the reason; a message the service refuses goes there at once.

${examples([
  "mailsend queue                          # what is waiting, and why",
  "mailsend queue --failed --json",
  "mailsend queue run                      # deliver what is due now, then exit (cron, a timer)",
  "mailsend queue run --watch              # keep delivering (a systemd service)",
  "mailsend queue retry --all              # everything due now, failed/ included",
  "mailsend queue rm <id>",
  "mailsend queue purge --failed",
]).trimStart()}`;

export const QUEUE_LS_HELP = examples([
  "mailsend queue ls",
  "mailsend queue ls --failed --json | jq -r '.[] | .id + \" \" + .last_error.message'",
]);

export const QUEUE_RUN_HELP = examples([
  "mailsend queue run                 # what is due now, then exit (cron: */5 * * * *)",
  "mailsend queue run --watch         # as a service: MAILSEND_QUEUE_AUTORUN=0 for the callers",
  "mailsend queue run --json | jq -c 'select(.event == \"failed\")'",
]);

export const QUEUE_RETRY_HELP = examples(["mailsend queue retry 0mwv1vzcp0gbbf144ad", "mailsend queue retry --all && mailsend queue run"]);

export const QUEUE_RM_HELP = examples(["mailsend queue rm 0mwv1vzcp0gbbf144ad", "mailsend queue rm $(mailsend queue ls --json | jq -r '.[].id')   # empty it"]);

export const QUEUE_PURGE_HELP = examples(["mailsend queue purge --failed", "mailsend queue ls --failed && mailsend queue purge --failed"]);
