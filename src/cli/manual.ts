/**
 * What the manual pages say beyond --help (scripts/gen-man.mjs renders them from the program, the
 * option tables and this file): --help stays about a screen, the page has the whole. Only the
 * generator imports this file, so none of it ships in the CLI's code.
 */
import { SYSTEM_CONFIG_PATH } from "../settings/system-config.js";

/** A command's extra text: paragraphs for DESCRIPTION and lines for EXAMPLES, keyed by its path. */
export interface ManualExtra {
  notes?: string;
  examples?: string;
}

export const MANUAL: Readonly<Record<string, ManualExtra>> = {
  run: {
    notes: `
A run fails when the job exits non-zero, is killed by a signal, or is stopped by
--timeout. With --on change, a job whose state is not known (its first run) is
"unknown": a failure mails, a success does not mail "recovered". A job's state
is its last outcome, when its failures began and its last failure mail; the
mail after a quiet spell says how many failures it stands for.

The mail carries Auto-Submitted: auto-generated and X-Mailsend-Job: <id>. The
API key in the environment is replaced by [redacted] in the output it carries.
`,
    examples: `
  # A systemd unit's failure (contrib/systemd/mailsend-onfailure@.service)
  [Unit]
  OnFailure=mailsend-onfailure@%n.service

  # In CI: the alert out before the machine goes
  mailsend run --id deploy --to dev@example.com -- ./deploy.sh; status=$?
  mailsend queue run; exit $status
`,
  },
  send: {
    notes: `
A body piped on stdin without a body flag is HTML when it starts as HTML
(<!DOCTYPE html>, or an HTML element such as <p> or <table> with an end tag
later), else plain text (over REST escaped inside <pre>, over SMTP text/plain);
--stdin-type html|text decides instead, and -v and --json say which was chosen.

An attempt that stops (an answer lost after the request went out) is retried
with the same idempotency key, so the service sends the message once.
`,
    examples: `
  # A Markdown body (raw HTML in it escaped); in GitHub Actions, the id as a step output
  mailsend send -f ci@example.com -t dev@example.com -s "Build #42" \\
    --markdown-file summary.md --github-output

  # Another program's output as the body
  ./make-report.sh | mailsend send -f reports@example.com -t team@example.com -s "Nightly report"
`,
  },
};

/** The files mailsend reads and writes, for FILES. */
export const FILES: ReadonlyArray<{ path: string; description: string }> = [
  {
    path: "$XDG_CONFIG_HOME/mailsend/config.json",
    description:
      "The config file and its profiles (~/.config/mailsend/config.json; MAILSEND_CONFIG names another). It says where the key is, never the key.",
  },
  {
    path: SYSTEM_CONFIG_PATH,
    description:
      "The system's config file, read whole by a user who has none of their own (cron's jobs of root, daemons calling sendmail); never merged with one. Read only when it and its directory are root's and writable by no one else; config set never writes it.",
  },
  {
    path: "$XDG_STATE_HOME/mailsend/",
    description:
      "The state directory (~/.local/state/mailsend; MAILSEND_STATE_DIR names another): the shared rate-limit budget and the journals of batch runs.",
  },
  {
    path: "$MAILSEND_STATE_DIR/outbox/",
    description:
      "The outbox: mail from sendmail, the relay and send --queue until it is delivered; failed/ holds what will not be tried again (MAILSEND_OUTBOX_DIR names another).",
  },
  {
    path: "$MAILSEND_STATE_DIR/run/",
    description:
      "The state of each job mailsend run watches (its last outcome and failure mail), named by a hash of its id; in Redis instead when MAILSEND_RATE_LIMIT_URL is set.",
  },
  {
    path: "$MAILSEND_STATE_DIR/relay-tls/ca.pem",
    description: "The CA of the certificate the relay makes for --tls-self-signed.",
  },
  {
    path: "$XDG_DATA_HOME/mailsend/sandbox/",
    description:
      "The sandbox's keys, stored messages and TLS files (~/.local/share/mailsend/sandbox; --dir or MAILSEND_SANDBOX_DIR names another).",
  },
];

/** One option of the sendmail personality, as its page lists it. */
export interface SendmailOption {
  flags: string;
  description: string;
}

/** mailsend-sendmail(8): synopsis by mode, then the options by purpose. */
export const SENDMAIL_PAGE: {
  modes: ReadonlyArray<{ mode: string; synopsis: readonly string[] }>;
  description: string;
  options: ReadonlyArray<{ purpose: string; options: readonly SendmailOption[] }>;
  exit: string;
  examples: string;
} = {
  modes: [
    {
      mode: "Sending (the default)",
      synopsis: [
        "sendmail [option...] [--] recipient...",
        "sendmail [option...] -t [recipient...]",
        "mailsend sendmail [option...] [recipient...]",
      ],
    },
    { mode: "Listing the outbox", synopsis: ["mailq", "sendmail -bp"] },
    { mode: "Delivering what is queued", synopsis: ["sendmail -q"] },
    { mode: "An SMTP session on stdin and stdout", synopsis: ["sendmail -bs"] },
    { mode: "Checking the aliases file", synopsis: ["newaliases", "sendmail -bi"] },
  ],
  description: `
Started under the name sendmail (a symbolic link to mailsend), mailq or
newaliases, or as mailsend sendmail, mailsend behaves as the sendmail program
that cron, mail and s-nail, git send-email, PHP's mail() and most daemons hand
their mail to.

It reads one message (header lines, a blank line, the body) from stdin and sends
it through the service. When the rate limit lets it go within a few seconds it
is delivered at once and nothing is printed; else it is kept in the outbox,
one line on stderr says so, the command exits 0 and a runner started in the
background delivers it (mailsend-queue(1)).

The message gets a Date, a Message-ID and a From (from -f and -F, else
MAILSEND_FROM or the profile's from) when it has none; Bcc, and a saved
message's Return-Path and Content-Length, are removed from what is sent.
Local names (root, a user name) are mapped through the aliases file that
MAILSEND_ALIASES or the profile's "aliases" names, in the /etc/aliases format.

The settings (the key, the SMTP host, the REST address, the sender) come from
the environment or a profile of the config file, as for mailsend send. Programs
run by cron or PHP do not see a login shell's variables: put the settings in the
default profile of the config file of the user they run as.
`,
  options: [
    {
      purpose: "Recipients and sender",
      options: [
        {
          flags: "-t",
          description: "Take the recipients from the To, Cc and Bcc headers, as well as from the arguments.",
        },
        {
          flags: "-f <address>, -r <address>",
          description:
            "The envelope sender, and the From header when the message has none. An empty sender or <> (a bounce's) is ignored: the default sender is used.",
        },
        { flags: "-F <name>", description: "The sender's full name, for a From header the message lacks." },
      ],
    },
    {
      purpose: "Reading the message",
      options: [
        { flags: "-i, -oi", description: 'A line with a lone "." does not end the message; stdin\'s end does.' },
      ],
    },
    {
      purpose: "Choosing the mode",
      options: [
        { flags: "-bm", description: "Deliver the message read on stdin (the default)." },
        {
          flags: "-bs",
          description:
            "One SMTP session on stdin and stdout, as Symfony Mailer and Laravel use: each message is answered 250 once it is sent or in the outbox. No AUTH and no TLS: the caller is a local program.",
        },
        { flags: "-bp", description: "List the outbox, as mailq does (the same list as mailsend queue)." },
        {
          flags: "-bi",
          description:
            "Check the aliases file, as newaliases does: there is no database to rebuild, the file is read as it is at each use.",
        },
        {
          flags: "-q",
          description:
            "Deliver what is queued now, deferred mail too, as Postfix's sendmail -q does (mailsend queue run keeps each message's retry time).",
        },
      ],
    },
    {
      purpose: "Delivery and settings",
      options: [
        {
          flags: "--queue always|auto|never",
          description:
            "auto (the default): deliver at once, else keep it in the outbox; always: only queue it; never: deliver now or fail, as mailsend send does. Environment: MAILSEND_QUEUE.",
        },
        {
          flags: "--profile <name>",
          description:
            "The profile of the config file to use (else MAILSEND_PROFILE, the file's default, or the one named default).",
        },
      ],
    },
    {
      purpose: "Output and information",
      options: [
        {
          flags: "-v",
          description:
            "Say what was done: the headers added, the transport, where the message went, and the options ignored.",
        },
        { flags: "--help", description: "Print the options and exit." },
        { flags: "--version", description: "Print the version and exit." },
      ],
    },
    {
      purpose: "Accepted and ignored",
      options: [
        {
          flags: "-B <type>, -o<x>, -Am, -Ac, -N <dsn>, -R <ret>, -V <envid>, -L <tag>, -h <n>, -m, -n, -U, -c, -G",
          description:
            "Options of sendmail that tune its own delivery (-oem, -odi, -odb and the like), accepted so that callers work, and ignored; -v names each one.",
        },
      ],
    },
  ],
  exit: "64 also when there are no recipients; 65 also for a message larger than MAILSEND_MAX_SIZE (default 10M less 4k); 66 for empty input; 75 when the outbox cannot be written.",
  examples: `
  # Be the machine's sendmail (and mailq)
  sudo ln -s "$(command -v mailsend)" /usr/local/sbin/sendmail
  sudo ln -s "$(command -v mailsend)" /usr/local/sbin/mailq

  # A message from a script
  printf 'Subject: disk\\n\\n%s\\n' "$(df -h)" | sendmail -i ops@example.com

  # The recipients from the message's headers
  sendmail -t -i < message.eml
  mailsend sendmail -t -i < message.eml   # the same without the link

  # What waits in the outbox, and delivering it now
  mailq
  sendmail -q
`,
};
