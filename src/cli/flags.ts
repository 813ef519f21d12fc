/** Turning option tables into commander options, and the value parsers they share. */
import { Help, InvalidArgumentError, Option, type Command } from "commander";
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";
import { GROUP_HEADING, type OptionSpec } from "./options.js";

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError("expected a whole number");
  return Number(value);
}

/** The table row each option came from: the manual pages (scripts/gen-man.mjs) give its whole description. */
export const OPTION_SPEC: WeakMap<Option, OptionSpec> = new WeakMap();

export function addOptions(cmd: Command, specs: readonly OptionSpec[]): Command {
  for (const spec of specs) {
    const desc = spec.brief ?? (spec.env ? `${spec.description} [env ${spec.env}]` : spec.description);
    const opt = new Option(spec.flags, desc).helpGroup(`${GROUP_HEADING[spec.group]}:`);
    OPTION_SPEC.set(opt, spec);
    if (spec.choices) opt.choices(spec.choices);
    if (spec.repeatable) opt.argParser(collect);
    else if (spec.int) opt.argParser(wholeNumber);
    cmd.addOption(opt);
  }
  return cmd;
}

/** An option's text in --help: its brief alone when the table gives one (the manual page has the rest), else commander's. */
export function optionHelp(option: Option): string {
  return OPTION_SPEC.get(option)?.brief ?? Help.prototype.optionDescription.call(new Help(), option);
}

/** 5d, 12h, 30m, 90s, or seconds. */
export function parseDuration(v: string, what: string): number {
  const ms = durationMs(v);
  if (ms === undefined)
    throw new MailsendError("usage", `${what} must be a duration such as 90s, 30m, 12h, 5d, got ${JSON.stringify(v)}`);
  return ms;
}

/** "26214400", "25M", "25MB", "512k", "1G" (binary units, as mail servers mean them). */
export function parseSize(v: string, flag = "--max-size", min = 1024): number {
  const m = /^(\d+)\s*([kmg]?)(i?b)?$/i.exec(v.trim());
  const n = m ? Number(m[1]) * 1024 ** ["", "k", "m", "g"].indexOf(m[2]!.toLowerCase()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw new MailsendError(
      "usage",
      `${flag} ${JSON.stringify(v)}: expected a size of at least ${min} bytes, e.g. 26214400, 25M or 512k`,
    );
  }
  return n;
}
