/**
 * One table of options drives the commander flags, the parsed option types
 * and the README's option list (scripts/gen-docs.mjs), so they cannot drift.
 */
import { SYSTEM_CONFIG_PATH } from "../settings/system-config.js";

export interface OptionSpec {
  /** commander flag syntax, e.g. "--to <address>". */
  flags: string;
  /** The whole meaning, as the manual page and the reference give it. */
  description: string;
  /** A shorter form for --help, where the description runs long; --help then leaves the variable to the manual. */
  brief?: string;
  /** The environment variable that supplies the same setting. */
  env?: string;
  /** May be given several times; values are collected in order. */
  repeatable?: boolean;
  /** Parse as a whole number. */
  int?: boolean;
  choices?: readonly string[];
  group: keyof typeof GROUP_HEADING;
}

/** The heading each group of options has in --help and in the manual pages. */
export const GROUP_HEADING = {
  Message: "Message",
  Recipients: "Recipients",
  Body: "Body and attachments",
  Connection: "Transport and connection",
  Limits: "Budget and retries",
  Batch: "Batch",
  Relay: "Relay",
  Run: "When to mail",
  Output: "Output",
} as const;

export const SEND_OPTIONS: readonly OptionSpec[] = [
  {
    group: "Message",
    flags: "-f, --from <address>",
    description: 'sender, "Name <addr>" or addr',
    env: "MAILSEND_FROM",
  },
  { group: "Message", flags: "-s, --subject <text>", description: "subject line" },
  {
    group: "Message",
    flags: "--name <text>",
    description: "sender display name (overrides the one in --from)",
    brief: "sender display name (beats --from's)",
  },
  { group: "Message", flags: "--reply-to <address>", description: "reply-to address" },
  { group: "Message", flags: "-H, --header <'Name: value'>", description: "custom header", repeatable: true },
  {
    group: "Message",
    flags: "--idempotency-key <key>",
    description: "stable key for this message (default: random per run)",
    brief: "stable key (default: random per run)",
  },
  {
    group: "Recipients",
    flags: "-t, --to <addresses>",
    description: "recipient(s), comma-separated and/or repeated",
    repeatable: true,
    brief: "recipient(s), comma-separated or repeated",
  },
  { group: "Recipients", flags: "--cc <addresses>", description: "carbon copy (SMTP only)", repeatable: true },
  { group: "Recipients", flags: "--bcc <addresses>", description: "blind carbon copy (SMTP only)", repeatable: true },
  { group: "Body", flags: "--html <html>", description: "HTML body" },
  { group: "Body", flags: "--html-file <path|->", description: "HTML body from a file or stdin" },
  { group: "Body", flags: "--text <text>", description: "plain-text body" },
  { group: "Body", flags: "--text-file <path|->", description: "plain-text body from a file or stdin" },
  {
    group: "Body",
    flags: "--json-file <path|->",
    description: "a whole send request (API JSON); flags override its fields",
    brief: "a whole API request; flags override it",
  },
  { group: "Body", flags: "--eml <path|->", description: "an RFC 5322 message (.eml) to send" },
  {
    group: "Body",
    flags: "--markdown-file <path|->",
    description: "Markdown body: rendered to the HTML body; the source is the text part (SMTP)",
    brief: "Markdown body, rendered to HTML",
  },
  {
    group: "Body",
    flags: "--allow-html",
    description: "keep raw HTML in the Markdown (default: escaped, shown as text)",
    brief: "keep raw HTML in the Markdown",
  },
  {
    group: "Body",
    flags: "--base-dir <dir>",
    description:
      "the directory local images may come from; others are refused (default: the HTML file's directory; for HTML from stdin or --html, the current one, and references resolve against it)",
    brief: "where local images may come from",
  },
  {
    group: "Body",
    flags: "--no-embed",
    description: "leave local image references as written (default: embedded as inline parts, SMTP)",
    brief: "do not embed local images",
  },
  {
    group: "Body",
    flags: "--inline <path[#cid]>",
    description: "add an inline image for HTML that refers to cid:NAME (#NAME; default: the file name)",
    repeatable: true,
    brief: "an inline image for cid:NAME",
  },
  {
    group: "Body",
    flags: "--inline-css",
    description:
      "copy the rules of style blocks onto the elements, for clients that drop them (always on for --markdown-file)",
    brief: "copy style rules onto the elements",
  },
  {
    group: "Body",
    flags: "--stdin-type <type>",
    description:
      "a body piped without a body flag is HTML or text (default: HTML when it starts as HTML, <!DOCTYPE html> or an element such as <p> with its end tag later; else text)",
    choices: ["html", "text"],
    brief: "piped body is html or text (default: guessed)",
  },
  {
    group: "Body",
    flags: "-a, --attach <path[#name]>",
    description: "attach a file; #name renames it",
    repeatable: true,
  },
  {
    group: "Connection",
    flags: "--profile <name>",
    description: "use this profile of the config file (see mailsend config)",
    env: "MAILSEND_PROFILE",
    brief: "a profile of the config file",
  },
  {
    group: "Connection",
    flags: "--transport <name>",
    description:
      "rest, smtp, or auto (the default when an SMTP host is configured, else rest): REST when it carries the message losslessly, else SMTP (cc/bcc, inline images, a text part); -v and --json say why",
    env: "MAILSEND_TRANSPORT",
    choices: ["rest", "smtp", "auto"],
    brief: "rest, smtp, or auto (REST when lossless)",
  },
  {
    group: "Connection",
    flags: "--base-url <url>",
    description: "REST base address (POST <url>/send)",
    env: "MAILSEND_BASE_URL",
    brief: "REST base address",
  },
  {
    group: "Connection",
    flags: "--smtp-host <host>",
    description: "SMTP server host",
    env: "MAILSEND_SMTP_HOST",
    brief: "SMTP server",
  },
  {
    group: "Connection",
    flags: "--smtp-port <port>",
    description: "587 (STARTTLS) or 465 (implicit TLS)",
    env: "MAILSEND_SMTP_PORT",
    int: true,
    brief: "587 (STARTTLS) or 465 (TLS)",
  },
  {
    group: "Connection",
    flags: "--smtp-tls <mode>",
    description: "starttls or implicit (default: implicit on 465, else starttls)",
    env: "MAILSEND_SMTP_TLS",
    choices: ["starttls", "implicit"],
    brief: "starttls or implicit (default: by port)",
  },
  {
    group: "Connection",
    flags: "--smtp-user <name>",
    description: "SMTP username (default mailsend)",
    env: "MAILSEND_SMTP_USER",
    brief: "SMTP username (default mailsend)",
  },
  {
    group: "Connection",
    flags: "--api-key-stdin",
    description: "read the API key from stdin (else MAILSEND_API_KEY or MAILSEND_API_KEY_FILE)",
    brief: "read the API key from stdin",
  },
  {
    group: "Connection",
    flags: "--ca-file <pem>",
    description: "trust this CA certificate too (or NODE_EXTRA_CA_CERTS)",
    env: "MAILSEND_CA_FILE",
    brief: "trust this CA certificate too",
  },
  { group: "Connection", flags: "--insecure", description: "do not verify TLS certificates (testing only)" },
  {
    group: "Connection",
    flags: "--timeout <seconds>",
    description: "give up after this long without progress (default 30)",
    env: "MAILSEND_TIMEOUT",
    int: true,
    brief: "an attempt without progress (default 30)",
  },
  {
    group: "Connection",
    flags: "--proxy <url>",
    description:
      "HTTP proxy for REST, or none (default: HTTPS_PROXY / HTTP_PROXY and NO_PROXY, as curl reads them); credentials only in the variable",
    env: "MAILSEND_PROXY",
    brief: "HTTP proxy for REST, or none",
  },
  {
    group: "Connection",
    flags: "--smtp-proxy <url>",
    description: "SOCKS (socks5://) or HTTP proxy for SMTP (default: none; HTTPS_PROXY is not used for SMTP)",
    env: "MAILSEND_SMTP_PROXY",
    brief: "SOCKS or HTTP proxy for SMTP",
  },
  {
    group: "Limits",
    flags: "--rate-limit <n>",
    description: "requests per minute for this key, shared by every mailsend on this machine (0 = off)",
    env: "MAILSEND_RATE_LIMIT",
    int: true,
    brief: "requests per minute for this key (0 = off)",
  },
  {
    group: "Limits",
    flags: "--max-wait <seconds>",
    description: "longest wait for a free slot or a retry (default 300)",
    env: "MAILSEND_MAX_WAIT",
    int: true,
    brief: "longest wait for a slot (default 300)",
  },
  {
    group: "Limits",
    flags: "--no-wait",
    description: "fail at once (exit 75) when the rate limit is used up",
    brief: "fail (exit 75) when the limit is used up",
  },
  {
    group: "Limits",
    flags: "--queue <mode>",
    description:
      "never (default): send now or fail; auto: send now, else keep it in the outbox and deliver it later (exit 0, 'queued <id>'); always: only put it in the outbox (mailsend queue --help)",
    env: "MAILSEND_QUEUE",
    choices: ["auto", "always", "never"],
    brief: "never, auto or always: use the outbox",
  },
  {
    group: "Limits",
    flags: "--retries <n>",
    description:
      "retries (default 3) of: a failed connection, a timeout, HTTP 408, 429 and every 5xx (500 too), SMTP 4xx, a lost answer (the idempotency key makes that safe); never other HTTP 4xx (400, 401, 403, 404, 413, 422) or SMTP 5xx",
    env: "MAILSEND_RETRIES",
    int: true,
    brief: "retries (default 3) of a lost connection, HTTP 408, 429 and every 5xx (500 too), SMTP 4xx",
  },
  {
    group: "Limits",
    flags: "--deadline <seconds>",
    description:
      "longest time for all the attempts and the waits between them (default 60; 0 = none); the rate-limit wait is bounded by --max-wait alone",
    env: "MAILSEND_DEADLINE",
    int: true,
    brief: "all attempts and retries (default 60)",
  },
  {
    group: "Output",
    flags: "-n, --dry-run",
    description: "print what would be sent (key redacted) and send nothing",
    brief: "print what would be sent; send nothing",
  },
  { group: "Output", flags: "--json", description: "print one JSON result object on stdout" },
  {
    group: "Output",
    flags: "-v, --verbose",
    description: "show the protocol exchange on stderr (key redacted)",
    brief: "the protocol exchange on stderr",
  },
  {
    group: "Output",
    flags: "-q, --quiet",
    description: "print nothing on success (a queued message included)",
    brief: "print nothing on success",
  },
  {
    group: "Output",
    flags: "--github-output",
    description: "in GitHub Actions: append message_id=<id> to $GITHUB_OUTPUT",
    brief: "message_id=<id> to $GITHUB_OUTPUT",
  },
];

/** doctor takes rest or smtp: it checks one channel, and auto chooses per message. */
const restOrSmtp = (o: OptionSpec): OptionSpec => {
  if (!o.flags.startsWith("--transport ")) return o;
  const { brief: _brief, ...rest } = o;
  return { ...rest, description: "rest or smtp", choices: ["rest", "smtp"] };
};

/** batch's auto chooses as send's does, for each row's message. */
const perRow = (o: OptionSpec): OptionSpec =>
  o.flags.startsWith("--transport ")
    ? {
        ...o,
        description:
          "rest, smtp, or auto (the default when an SMTP host is configured, else rest): for each row, REST when it carries the message losslessly, else SMTP (cc/bcc, inline images, a text part)",
        brief: "rest, smtp, or auto: for each row's message",
      }
    : o;

const SHARED = SEND_OPTIONS.filter((o) => o.group === "Connection" || o.group === "Limits").map(perRow);

/** `mailsend batch`: per-row defaults and templates, then everything send has for the connection. */
export const BATCH_OPTIONS: readonly OptionSpec[] = [
  {
    group: "Message",
    flags: "-f, --from <address>",
    description: "sender for rows without a from",
    env: "MAILSEND_FROM",
  },
  { group: "Message", flags: "--name <text>", description: "sender display name for rows without a name" },
  { group: "Message", flags: "--reply-to <address>", description: "reply-to for rows without one" },
  {
    group: "Message",
    flags: "-s, --subject <template>",
    description: "subject for rows without one; {{column}} is filled per row",
  },
  {
    group: "Message",
    flags: "-H, --header <'Name: value'>",
    description: "custom header on every message",
    repeatable: true,
  },
  {
    group: "Message",
    flags: "-a, --attach <path[#name]>",
    description: "attach to every message (read once)",
    repeatable: true,
  },
  {
    group: "Body",
    flags: "--html-file <path>",
    description: "HTML template for rows without html; {{column}} filled and HTML-escaped",
  },
  {
    group: "Body",
    flags: "--text-file <path>",
    description: "text template for rows without text; {{column}} filled as is",
  },
  {
    group: "Body",
    flags: "--markdown-file <path>",
    description: "Markdown template: the HTML (values HTML-escaped) and the text (values as is) of rows without them",
  },
  { group: "Body", flags: "--allow-html", description: "keep raw HTML in the Markdown template (default: escaped)" },
  {
    group: "Body",
    flags: "--base-dir <dir>",
    description: "the directory local images may come from (default: the template's directory, else the current one)",
  },
  {
    group: "Body",
    flags: "--no-embed",
    description: "leave local image references as written (default: inline parts, read once for all rows; SMTP)",
  },
  {
    group: "Body",
    flags: "--inline-css",
    description: "copy the rules of style blocks onto the elements (always on for --markdown-file)",
  },
  {
    group: "Batch",
    flags: "--format <format>",
    description: "input format (default: from the file name, else from the content)",
    choices: ["jsonl", "json", "csv"],
  },
  {
    group: "Batch",
    flags: "--encoding <name>",
    description:
      "the input's character encoding when it is not UTF-8, e.g. windows-1252 (Excel's plain \"CSV\") (default: UTF-8, or UTF-16 by its byte order mark)",
  },
  { group: "Batch", flags: "-c, --concurrency <n>", description: "messages in flight at once (default 4)", int: true },
  { group: "Batch", flags: "--check", description: "validate every row and send nothing" },
  { group: "Batch", flags: "--fail-fast", description: "send nothing if a row is bad; stop at the first failed send" },
  { group: "Batch", flags: "--results <file>", description: "write one JSON line per item to this file" },
  {
    group: "Batch",
    flags: "--journal <file>",
    description:
      "the crash journal (default: in the state dir, named after the input; --results does not move it); a new one while another journal of the input records sends is refused (--fresh to send again)",
  },
  {
    group: "Batch",
    flags: "--resume",
    description: "continue the journal of an interrupted run (re-running the same command does too)",
  },
  { group: "Batch", flags: "--fresh", description: "start over, ignoring an earlier run's journal" },
  ...SHARED,
  { group: "Output", flags: "--json", description: "one JSON line per item on stdout, a JSON summary on stderr" },
  { group: "Output", flags: "-q, --quiet", description: "no progress and no summary" },
  {
    group: "Output",
    flags: "--github-output",
    description: "in GitHub Actions: append the counts (sent=, failed=, ...) to $GITHUB_OUTPUT",
  },
];

/** `mailsend doctor`: send's connection settings, its budget, and --json. */
export const DOCTOR_OPTIONS: readonly OptionSpec[] = [
  ...SEND_OPTIONS.filter((o) => o.group === "Connection").map(restOrSmtp),
  ...SEND_OPTIONS.filter((o) => o.flags.startsWith("--rate-limit ")),
  { group: "Output", flags: "--json", description: 'print {"ok":bool,"checks":[...]} on stdout' },
];

/** `mailsend relay`: the local SMTP relay in front of the outbox. */
export const RELAY_OPTIONS: readonly OptionSpec[] = [
  {
    group: "Relay",
    flags: "--listen <host:port>",
    description:
      "where to listen (default 127.0.0.1:2525; [::1]:2525 for IPv6); any non-loopback address needs --auth-file and TLS",
  },
  {
    group: "Relay",
    flags: "--auth-file <path>",
    description:
      "require SMTP AUTH (PLAIN, LOGIN) by the users of this file: user:scrypt$... lines made by `mailsend relay hash-password`",
  },
  {
    group: "Relay",
    flags: "--tls-cert <pem>",
    description: "offer STARTTLS with this certificate (chain) file; with --tls-key",
  },
  { group: "Relay", flags: "--tls-key <pem>", description: "the private key of --tls-cert" },
  {
    group: "Relay",
    flags: "--tls-self-signed",
    description: "offer STARTTLS with a certificate made on first start (its CA in <state dir>/relay-tls/ca.pem)",
  },
  {
    group: "Relay",
    flags: "--max-size <bytes>",
    description:
      "largest message, advertised as SIZE; larger ones get 552 (default 10M less 4k for the headers delivery adds; suffixes k, M, G)",
  },
  {
    group: "Relay",
    flags: "--max-clients <n>",
    description: "concurrent connections; one more is answered 421 (default 50)",
    int: true,
  },
  {
    group: "Relay",
    flags: "--no-deliver",
    description: "only queue; leave delivery to `mailsend queue run` (a timer or a service)",
  },
  { group: "Relay", flags: "--concurrency <n>", description: "deliveries in flight at once (default 4)", int: true },
  {
    group: "Connection",
    flags: "--profile <name>",
    description: "deliver with this profile of the config file (recorded with each message)",
    env: "MAILSEND_PROFILE",
  },
  {
    group: "Connection",
    flags: "--transport <name>",
    description: "rest, smtp, or auto (REST when it carries the message losslessly, else SMTP)",
    env: "MAILSEND_TRANSPORT",
    choices: ["rest", "smtp", "auto"],
  },
  {
    group: "Output",
    flags: "--json",
    description: "print a JSON ready line (with the port) on stdout, then one JSON line per event",
  },
  {
    group: "Output",
    flags: "-v, --verbose",
    description: "log each message taken (id, from, recipients, size) and each delivery",
  },
];

/** Environment variables read without a matching flag. */
export const EXTRA_ENV: ReadonlyArray<{ name: string; description: string }> = [
  { name: "MAILSEND_API_KEY", description: "the API key" },
  { name: "MAILSEND_API_KEY_FILE", description: "path of a file holding the API key" },
  { name: "NODE_EXTRA_CA_CERTS", description: "extra CA certificates to trust (Node.js)" },
  {
    name: "MAILSEND_STATE_DIR",
    description:
      "where the shared rate-limit state and the outbox live (default $XDG_STATE_HOME/mailsend, ~/.local/state/mailsend)",
  },
  { name: "MAILSEND_OUTBOX_DIR", description: "the outbox's directory (default $MAILSEND_STATE_DIR/outbox)" },
  {
    name: "MAILSEND_QUEUE_AUTORUN",
    description:
      "0: a queued message does not start a background runner (where the relay or a `queue run --watch` service runs the queue)",
  },
  {
    name: "MAILSEND_QUEUE_MAX_AGE",
    description: "how long the outbox retries a message before it moves to failed/ (default 5d)",
  },
  {
    name: "MAILSEND_QUEUE_WARN_AFTER",
    description: 'a message still queued this long gets one "still trying" notice to its sender (default 4h; 0: none)',
  },
  {
    name: "MAILSEND_NOTICES",
    description:
      "on (default): a message the outbox gives up brings its sender one notice; postmaster: to MAILSEND_POSTMASTER instead; off: none",
  },
  { name: "MAILSEND_POSTMASTER", description: "who also gets the outbox's notices (profile key postmaster)" },
  {
    name: "MAILSEND_ALIASES",
    description:
      "sendmail: an aliases file in the /etc/aliases format for local names such as root (profile key aliases)",
  },
  {
    name: "MAILSEND_MAX_SIZE",
    description:
      "sendmail and send --queue: the largest message they take, counted with CRLF line ends (default 10M less 4k)",
  },
  {
    name: "MAILSEND_RATE_LIMIT_URL",
    description:
      "share the rate-limit budget across machines through Redis or Valkey: redis://[user:password@]host[:port][/db], rediss:// (TLS), redis-sentinel://host1:26379,host2:26379/mymaster[/db]",
  },
  {
    name: "MAILSEND_RATE_LIMIT_PASSWORD_FILE",
    description: "path of a file holding the Redis password (instead of putting it in the URL)",
  },
  {
    name: "MAILSEND_RATE_LIMIT_SENTINEL_PASSWORD_FILE",
    description: "path of a file holding the password of the Redis sentinels, when they require one",
  },
  {
    name: "HTTPS_PROXY",
    description:
      "proxy for REST to an https:// service (also https_proxy; HTTP_PROXY/http_proxy for http://, ALL_PROXY as a fallback)",
  },
  {
    name: "NO_PROXY",
    description: "hosts that go direct: example.com, .internal, 10.0.0.0/8, *, with :port optional (also no_proxy)",
  },
  {
    name: "MAILSEND_RATE_WINDOW",
    description: "the limit's window in seconds (default 60, the service's); change only to match a sandbox",
  },
  {
    name: "MAILSEND_RATE_RESERVE",
    description:
      "slots of each window kept for urgent mail (send, run's alerts, notices, a queued message's first try), which bulk (batch rows, queued retries) leaves free: a number or a share like 10% (default 10%, at least 1; 0: none)",
  },
  {
    name: "MAILSEND_CONFIG",
    description: `path of the config file, the only one read then and the one config set writes (default $XDG_CONFIG_HOME/mailsend/config.json or ~/.config/mailsend/config.json; when this user has none, ${SYSTEM_CONFIG_PATH} is read)`,
  },
  {
    name: "GITHUB_ACTIONS",
    description: "true (set by GitHub Actions): errors are also printed as ::error annotations",
  },
  { name: "GITHUB_OUTPUT", description: "the file --github-output appends to (set by GitHub Actions)" },
  { name: "NO_COLOR", description: "disable colours" },
];

/** "--reply-to <address>" -> "replyTo", as commander names it. */
export function attributeName(flags: string): string {
  const long = flags.split(/[ ,]+/).find((f) => f.startsWith("--"))!;
  return long.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** mailsend run: the mail's addressing, when it is sent, and how much of the job's output it carries. */
export const RUN_OPTIONS: readonly OptionSpec[] = [
  { group: "Recipients", flags: "-t, --to <address>", description: "who gets the job's mail", repeatable: true },
  {
    group: "Message",
    flags: "-f, --from <address>",
    description: 'sender, "Name <addr>" or addr',
    env: "MAILSEND_FROM",
  },
  {
    group: "Message",
    flags: "-s, --subject <text>",
    description: 'the subject instead of "[host] <command> failed (exit 3)"',
  },
  {
    group: "Message",
    flags: "--template <file>",
    description: "the body (text) from this file, its {{placeholders}} filled from the run (see docs/run.md)",
  },
  {
    group: "Message",
    flags: "--profile <name>",
    description: "the config file's profile to use",
    env: "MAILSEND_PROFILE",
  },
  {
    group: "Run",
    flags: "--on <when>",
    description: "mail on a failure (default), on a change (a failure, then one mail when it recovers), or always",
    choices: ["failure", "change", "always"],
  },
  {
    group: "Run",
    flags: "--id <name>",
    description: "the job's name, whose state decides what is mailed (default: the command line)",
  },
  {
    group: "Run",
    flags: "--quiet-for <duration>",
    description: "after a failure mail, more failures of the job within this long mail nothing (default 1h)",
  },
  {
    group: "Run",
    flags: "--timeout <duration>",
    description: "stop the job after this long: SIGTERM to its process group, then SIGKILL (default: none)",
  },
  {
    group: "Run",
    flags: "--kill-after <duration>",
    description: "how long a job stopped by --timeout has before SIGKILL (default 10s)",
  },
  {
    group: "Output",
    flags: "--tail <lines>",
    description: "lines of the output's end in the mail's body (default 50)",
    int: true,
  },
  {
    group: "Output",
    flags: "--attach-limit <size>",
    description: "the whole output attached up to this size, else its end (default 1M; 0: no attachment)",
  },
  { group: "Output", flags: "-v, --verbose", description: "say on stderr what was mailed" },
];
