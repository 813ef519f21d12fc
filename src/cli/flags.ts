/** Turning option tables into commander options (the value parsers that need no commander: values.ts). */
import { Help, InvalidArgumentError, Option, type Command } from "commander";
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
