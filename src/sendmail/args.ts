/**
 * The command line of `sendmail`, as the programs that call it write it.
 *
 * Sendmail's options are getopt-shaped, not commander-shaped: single-letter
 * flags cluster (`-ti`), an option's value may be attached or the next word
 * (`-fcron@x`, `-f cron@x`, `-FCronDaemon`), `-o` and `-b` take a letter
 * glued on (`-oi`, `-oem`, `-bm`, `-bp`), and options and recipients may mix
 * (GNU getopt permutes; `--` ends the options, as s-nail writes). So this is a
 * small parser of its own, and every word it does not know is a usage error
 * naming it: silently taking `-x` as a recipient would mail the wrong place.
 */
import { MailsendError } from "../core/errors.js";
import type { QueueMode } from "../core/envelope.js";

export type SendmailMode = "deliver" | "list" | "flush" | "help" | "version" | "smtp" | "aliases";

export interface SendmailArgs {
  mode: SendmailMode;
  /** -t: recipients from the To, Cc and Bcc headers, plus the arguments. */
  readRecipients: boolean;
  /** -i / -oi: a line with a lone "." does not end the message. */
  ignoreDots: boolean;
  /** -f / -r: the envelope sender. */
  from?: string;
  /** -F: the sender's full name, for a From header the message lacks. */
  fullName?: string;
  verbose: boolean;
  /** --queue always|auto|never (else MAILSEND_QUEUE). */
  queue?: QueueMode;
  profile?: string;
  /** Recipient arguments as given (each may hold a comma-separated list). */
  recipients: string[];
  /** Options accepted for compatibility that change nothing, for -v. */
  ignored: string[];
}

const USAGE_HINT = "mailsend sendmail --help lists the options it takes (those of sendmail that mail programs pass).";

function usage(message: string, hint = USAGE_HINT): MailsendError {
  return new MailsendError("usage", message, { hint });
}

/** Flags without a value; they may be clustered (-ti, -it, -tiv). */
const FLAGS = new Set(["t", "i", "v", "m", "n", "U", "c", "G"]);
/** Options that take a value, attached or as the next word. */
const WITH_VALUE = new Set(["f", "r", "F", "A", "B", "N", "R", "V", "X", "L", "h", "o", "b", "O", "e", "p", "C", "d"]);
const QUEUE_MODES: readonly QueueMode[] = ["always", "auto", "never"];

/** One command line being read: where in it, and what it has said so far. */
class ArgsReader {
  /** The word being read. */
  k = 0;
  /** The option that chose the mode, for a conflict's message. */
  modeFrom: string | undefined;
  readonly setMode = (mode: SendmailMode, flag: string): void => {
    if (this.modeFrom !== undefined && this.out.mode !== mode)
      throw usage(`${this.modeFrom} and ${flag} cannot be used together`);
    this.out.mode = mode;
    this.modeFrom = flag;
  };

  constructor(
    readonly argv: readonly string[],
    readonly out: SendmailArgs,
  ) {}

  /** The next word, as the value of `option`: a usage error when there is none. */
  takeNext(option: string): string {
    const next = this.argv[this.k + 1];
    if (next === undefined) throw usage(`option ${option} needs a value`);
    this.k++;
    return next;
  }

  /** A `--name[=value]` option; true when it ends the reading (--help, --version). */
  longOption(word: string): boolean {
    const { out } = this;
    const eq = word.indexOf("=");
    const name = eq >= 0 ? word.slice(2, eq) : word.slice(2);
    const inline = eq >= 0 ? word.slice(eq + 1) : undefined;
    const value = (): string => inline ?? this.takeNext(`--${name}`);
    switch (name) {
      case "queue": {
        const v = value();
        if (!(QUEUE_MODES as readonly string[]).includes(v))
          throw usage(`--queue must be always, auto or never (got ${JSON.stringify(v)})`);
        out.queue = v as QueueMode;
        return false;
      }
      case "profile":
        out.profile = value();
        if (out.profile === "") throw usage("--profile needs a profile's name");
        return false;
      case "verbose":
        if (inline !== undefined) throw usage("--verbose takes no value");
        out.verbose = true;
        return false;
      case "help":
        out.mode = "help";
        return true;
      case "version":
        out.mode = "version";
        return true;
      default:
        throw usage(`unknown option --${name}`);
    }
  }

  /** A cluster of single letters: -ti, -FCronDaemon, -oem, -f addr. */
  letters(word: string): void {
    const { out } = this;
    for (let j = 1; j < word.length; j++) {
      const letter = word[j]!;
      if (FLAGS.has(letter)) {
        if (letter === "t") out.readRecipients = true;
        else if (letter === "i") out.ignoreDots = true;
        else if (letter === "v") out.verbose = true;
        else out.ignored.push(`-${letter}`);
        continue;
      }
      if (letter === "q") {
        // -q flushes the outbox; -q<interval> (sendmail's daemon mode) does the same once.
        const rest = word.slice(j + 1);
        if (rest) out.ignored.push(`-q${rest} (the interval: it flushes once)`);
        this.setMode("flush", "-q");
        return;
      }
      if (!WITH_VALUE.has(letter)) {
        const shown = j === 1 ? word : `-${letter} (in ${word})`;
        throw usage(`unknown option ${shown}`);
      }
      const attached = word.slice(j + 1);
      takeValue(out, letter, attached === "" ? this.takeNext(`-${letter}`) : attached, this.setMode);
      return;
    }
  }
}

export function parseSendmailArgs(
  argv: readonly string[],
  invokedAs: "sendmail" | "mailq" | "newaliases" = "sendmail",
): SendmailArgs {
  const out: SendmailArgs = {
    mode: invokedAs === "mailq" ? "list" : invokedAs === "newaliases" ? "aliases" : "deliver",
    readRecipients: false,
    ignoreDots: false,
    verbose: false,
    recipients: [],
    ignored: [],
  };
  const reader = new ArgsReader(argv, out);
  for (; reader.k < argv.length; reader.k++) {
    const word = argv[reader.k]!;
    if (word === "--") {
      out.recipients.push(...argv.slice(reader.k + 1));
      break;
    }
    if (word.startsWith("--")) {
      if (reader.longOption(word)) return out;
    } else if (!word.startsWith("-") || word === "-") out.recipients.push(word);
    else reader.letters(word);
  }
  return out;
}

function takeValue(
  out: SendmailArgs,
  letter: string,
  value: string,
  setMode: (m: SendmailMode, flag: string) => void,
): void {
  switch (letter) {
    case "f":
    case "r":
      // `-f '<>'` (the null sender of bounces) cannot be sent from: the default sender is used.
      if (value === "" || value === "<>")
        out.ignored.push(`-${letter} '${value}' (no sender address: the default sender is used)`);
      else out.from = value;
      return;
    case "F":
      out.fullName = value;
      return;
    case "b":
      if (value === "m") setMode("deliver", "-bm");
      else if (value === "p") setMode("list", "-bp");
      else if (value === "s") setMode("smtp", "-bs");
      // newaliases: there is no database to build, the file is read as it is; checked and said so.
      else if (value === "i") setMode("aliases", "-bi");
      else {
        const what: Record<string, string> = {
          d: "a daemon; use `mailsend relay` or `mailsend queue run --watch`",
          a: "ARPANET mode",
          t: "address test mode",
          v: "verify only",
        };
        throw usage(
          `unknown option -b${value}${what[value] ? ` (${what[value]}: not supported)` : ""}`,
          "mailsend sendmail takes -bm (deliver, the default), -bs (SMTP on stdin and stdout) and -bp (list the outbox).",
        );
      }
      return;
    case "o":
      // -oi is -i; every other -o<x> (-oem, -odi, -odb, -oee, ...) tunes sendmail's own delivery.
      if (value === "i") out.ignoreDots = true;
      else out.ignored.push(`-o${value}`);
      return;
    case "N":
      out.ignored.push(`-N ${value} (delivery status notifications: the service sends none)`);
      return;
    case "B":
      out.ignored.push(`-B ${value} (the body type: the message is sent as it is)`);
      return;
    case "A":
      // sendmail 8.12: which of its configurations to use (-Am the MTA's, -Ac the submission one).
      if (value !== "m" && value !== "c")
        throw usage(
          `unknown option -A${value}`,
          "sendmail's -A takes m or c (its configuration file); mailsend has one, and ignores -Am and -Ac.",
        );
      out.ignored.push(`-A${value} (sendmail's configuration file: mailsend has one)`);
      return;
    default:
      out.ignored.push(`-${letter} ${value}`);
      return;
  }
}
