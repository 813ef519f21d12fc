/**
 * `mailsend inbox show <id> --link | --extract | --text | --html`: the one thing a test takes out
 * of a message, alone on stdout for a shell to capture. Finding nothing exits 1 (as grep does),
 * with a line on stderr that says what was looked for.
 */
import { MailsendError } from "../../core/errors.js";
import type { MessageParts } from "../../sandbox/content.js";
import type { StoredMessage } from "../../sandbox/types.js";
import type { CliIO } from "../io.js";

export interface PartFlags {
  link?: boolean;
  match?: string;
  extract?: string;
  text?: boolean;
  html?: boolean;
}

function regex(flag: string, source: string): RegExp {
  try {
    return new RegExp(source);
  } catch (e) {
    throw new MailsendError(
      "usage",
      `${flag} ${JSON.stringify(source)} is not a regular expression: ${(e as Error).message}`,
    );
  }
}

function nothing(io: CliIO, what: string): number {
  io.stderr.write(`${what}\n`);
  return 1;
}

/** The exit code when one of the part flags was given (after printing it), else undefined. */
export function showPart(m: StoredMessage, p: MessageParts, flags: PartFlags, io: CliIO): number | undefined {
  const chosen = (["link", "extract", "text", "html"] as const).filter(
    (k) => flags[k] !== undefined && flags[k] !== false,
  );
  if (chosen.length === 0) {
    if (flags.match !== undefined)
      throw new MailsendError("usage", "--match goes with --link (the links that match it)");
    return undefined;
  }
  if (chosen.length > 1)
    throw new MailsendError("usage", `--${chosen[0]} and --${chosen[1]} each print one thing: give one of them`);
  if (flags.match !== undefined && !flags.link)
    throw new MailsendError("usage", "--match goes with --link (the links that match it)");
  if (flags.text || flags.html) {
    const part = flags.text ? p.text : p.html;
    if (part === null || part === "") return nothing(io, `message ${m.id} has no ${flags.text ? "text" : "HTML"} part`);
    io.stdout.write(part.endsWith("\n") ? part : `${part}\n`);
    return 0;
  }
  if (flags.link) {
    const re = flags.match !== undefined ? regex("--match", flags.match) : undefined;
    const links = re ? p.links.filter((l) => re.test(l)) : p.links;
    if (links.length === 0) return nothing(io, `message ${m.id} has no links${re ? ` matching ${re}` : ""}`);
    io.stdout.write(`${links.join("\n")}\n`);
    return 0;
  }
  const re = regex("--extract", flags.extract!);
  // The text part first (a code is written there as it is shown), then the HTML part's text, then the subject.
  for (const body of [p.text ?? "", p.htmlText, m.subject]) {
    const found = re.exec(body);
    if (found) {
      io.stdout.write(`${found[1] ?? found[0]}\n`);
      return 0;
    }
  }
  return nothing(io, `nothing in message ${m.id} matches ${re}`);
}
