/** Turning option tables into commander options, and the value parsers they share. */
import { InvalidArgumentError, Option, type Command } from "commander";
import type { OptionSpec } from "./options.js";

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError("expected a whole number");
  return Number(value);
}

export function addOptions(cmd: Command, specs: readonly OptionSpec[]): Command {
  for (const spec of specs) {
    const desc = spec.env ? `${spec.description} [env ${spec.env}]` : spec.description;
    const opt = new Option(spec.flags, desc);
    if (spec.choices) opt.choices(spec.choices);
    if (spec.repeatable) opt.argParser(collect);
    else if (spec.int) opt.argParser(wholeNumber);
    cmd.addOption(opt);
  }
  return cmd;
}
