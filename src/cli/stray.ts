/**
 * Words on the command line that no option or argument takes. The usual
 * cause is an unquoted value with a space (`-s Build failed`) or recipients
 * separated by spaces (`-t a@x b@y`): the message names the word and shows
 * the quoted form, instead of commander's "too many arguments".
 */
import type { Command, Option } from "commander";
import { MailsendError } from "../core/errors.js";
import { shellWord } from "./io.js";
import { KEY_HINT, looksLikeKey } from "./secret-options.js";

const RECIPIENT_OPTIONS = new Set(["to", "cc", "bcc"]);

function optionOf(cmd: Command, token: string): Option | undefined {
  const flag = token.startsWith("--") ? token.split("=")[0]! : token;
  return cmd.options.find((o) => o.long === flag || o.short === flag);
}

/** Edit distance with adjacent transpositions ("sned" is one edit from "send"), for "did you mean". */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest of `names` to `word`, when it is close enough to be a typo. */
export function closest(word: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const n of names) {
    const d = distance(word.toLowerCase(), n.toLowerCase());
    if (d < bestD) [best, bestD] = [n, d];
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(best.length / 3)) ? best : undefined;
}

/**
 * The usage error for the first word `cmd` has no place for. `argv` is the
 * command line as given (after the program name), to see what came before it.
 */
export function strayArgumentError(cmd: Command, argv: readonly string[]): MailsendError | undefined {
  const expected = cmd.registeredArguments.some((a) => a.variadic) ? Infinity : cmd.registeredArguments.length;
  if (cmd.args.length <= expected) return undefined;
  const extras = cmd.args.slice(expected);
  const stray = extras[0]!;
  const path = commandPath(cmd);
  const subcommands = cmd.commands.map((c) => c.name());
  if (subcommands.length > 0 && expected === 0) {
    const guess = closest(stray, subcommands);
    return new MailsendError("usage", `unknown command '${path} ${stray}'`, {
      hint: `${guess ? `Did you mean \`${path} ${guess}\`? ` : ""}The commands of ${path}: ${subcommands.join(", ")}.`,
    });
  }
  // A key pasted onto the command line is not repeated (it would go on into CI logs).
  if (extras.some(looksLikeKey)) {
    return new MailsendError(
      "usage",
      `unexpected argument (${extras.find(looksLikeKey)!.length} characters, not shown: it looks like a key): ${path} takes no key on the command line`,
      { hint: KEY_HINT },
    );
  }
  // Where the word stands: right after an option's value, it is the rest of that value.
  const at = argv.lastIndexOf(stray);
  const found = valueBefore(cmd, argv, at);
  if (found) return restOfValueError(found, stray, restOf(argv, at, extras));
  return new MailsendError(
    "usage",
    `unexpected argument "${stray}": ${path} ${expected === 0 ? "takes no arguments" : `takes ${expected} argument${expected === 1 ? "" : "s"}`}`,
    {
      hint: `Quote a value that contains spaces; see ${path} --help.`,
    },
  );
}

/** An option as it was spelled on the command line, and the value it was given there. */
interface GivenValue {
  option: Option;
  spelled: string;
  value: string;
}

/** The option that takes a value and was given one right before the word at `at` (`--subject=Build` or `-s Build`). */
function valueBefore(cmd: Command, argv: readonly string[], at: number): GivenValue | undefined {
  const prev = at >= 1 ? argv[at - 1]! : undefined;
  const before = at >= 2 ? argv[at - 2]! : undefined;
  let option: Option | undefined;
  let value: string | undefined;
  let spelled: string | undefined;
  if (prev?.startsWith("--") && prev.includes("=")) {
    option = optionOf(cmd, prev);
    spelled = prev.slice(0, prev.indexOf("="));
    value = prev.slice(prev.indexOf("=") + 1);
  } else if (prev !== undefined && !prev.startsWith("-") && before?.startsWith("-")) {
    option = optionOf(cmd, before);
    spelled = before;
    value = prev;
  }
  const takesValue = option !== undefined && (option.required || option.optional);
  if (option && takesValue && value !== undefined && spelled !== undefined) return { option, spelled, value };
  return undefined;
}

/** The run of words from `at` up to the next option: the rest of the value before it. */
function restOf(argv: readonly string[], at: number, extras: readonly string[]): string[] {
  const rest: string[] = [];
  for (let i = at; i < argv.length && !argv[i]!.startsWith("-") && extras.includes(argv[i]!); i++) rest.push(argv[i]!);
  return rest;
}

/** Words that are the rest of an option's value: recipients are separated with commas, other values quoted. */
function restOfValueError({ option, spelled, value }: GivenValue, stray: string, rest: string[]): MailsendError {
  const name = option.attributeName();
  if (RECIPIENT_OPTIONS.has(name) && [value, ...rest].every((w) => w.includes("@"))) {
    return new MailsendError(
      "usage",
      `unexpected argument "${stray}" after ${spelled} ${value}: separate recipients with commas`,
      {
        hint: `${spelled} takes one value: ${spelled} ${shellWord([value, ...rest].join(", "))} (or repeat it: ${[value, ...rest].map((w) => `${spelled} ${shellWord(w)}`).join(" ")}).`,
      },
    );
  }
  return new MailsendError("usage", `unexpected argument "${stray}" after ${spelled} ${value}`, {
    hint: `A value with spaces must be quoted: ${spelled} ${shellWord([value, ...rest].join(" "))}`,
  });
}

function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** `mailsend help <name>` for a name that is no command: the error commander gives `mailsend <name>`, with a suggestion. */
export function unknownHelpTopic(program: Command, topic: string): MailsendError | undefined {
  const names = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
  if (names.includes(topic)) return undefined;
  const guess = closest(topic, names);
  return new MailsendError("usage", `unknown command '${topic}'`, {
    hint: `${guess ? `Did you mean \`mailsend help ${guess}\`? ` : ""}The commands: ${program.commands.map((c) => c.name()).join(", ")}.`,
  });
}
