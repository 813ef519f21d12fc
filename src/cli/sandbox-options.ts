/**
 * The options of `mailsend sandbox`, in one table (flags, parsing, help,
 * README). Ports default to fixed numbers so that the export lines stay
 * valid across restarts; 0 asks for any free port.
 */
import { InvalidArgumentError, Option, type Command } from "commander";
import { wholeNumber as int } from "./flags.js";

export interface SandboxOptionSpec {
  flags: string;
  description: string;
  env?: string;
  parse?: "int" | "share" | "status";
  choices?: readonly string[];
  /** For tests; not in --help. */
  hidden?: boolean;
}

export const SANDBOX_OPTIONS: readonly SandboxOptionSpec[] = [
  {
    flags: "--dir <path>",
    description: "data dir: keys, messages, TLS (default $XDG_DATA_HOME/mailsend/sandbox)",
    env: "MAILSEND_SANDBOX_DIR",
  },
  { flags: "--host <address>", description: "address to listen on (default 127.0.0.1)" },
  { flags: "--http-port <port>", description: "REST + web inbox port, 0 = any free (default 8025)", parse: "int" },
  {
    flags: "--smtp-port <port>",
    description: "SMTP port with STARTTLS required, the 587 role (default 2587)",
    parse: "int",
  },
  {
    flags: "--smtps-port <port>",
    description: "SMTP port with implicit TLS, the 465 role (default 2465)",
    parse: "int",
  },
  {
    flags: "--rate-limit <n>",
    description: "requests per rolling minute per key, REST and SMTP together (default 60)",
    parse: "int",
  },
  { flags: "--max-size <bytes>", description: "largest REST body / SMTP message (default 10485760)", parse: "int" },
  { flags: "--smtp-user <name>", description: "the SMTP username (default mailsend)" },
  { flags: "--fail-rate <share>", description: "answer this share (0..1) of requests with an error", parse: "share" },
  {
    flags: "--fail-status <status>",
    description: "HTTP status of an injected REST failure (default 500)",
    parse: "status",
  },
  { flags: "--fail-smtp-code <code>", description: "SMTP code of an injected failure (default 451)", parse: "status" },
  { flags: "--latency <ms>", description: "add this delay before every answer to /send and DATA", parse: "int" },
  { flags: "--drop-rate <share>", description: "cut the connection of this share (0..1) of requests", parse: "share" },
  {
    flags: "--drop-when <when>",
    description: "cut before the message is stored, or after (outcome unknown) (default before)",
    choices: ["before", "after"],
  },
  { flags: "--json", description: "print one JSON line when ready (for scripts), nothing else" },
  {
    flags: "--rate-window-ms <ms>",
    description: "length of the rate-limit window (tests)",
    parse: "int",
    hidden: true,
  },
  {
    flags: "--writer-threads <n>",
    description: "threads that build and write message files (benchmarks)",
    parse: "int",
    hidden: true,
  },
];

function share(value: string): number {
  const n = Number(value);
  if (!/^\d*\.?\d+$/.test(value) || !(n >= 0 && n <= 1))
    throw new InvalidArgumentError("expected a number from 0 to 1, e.g. 0.2");
  return n;
}

function status(value: string): number {
  const n = int(value);
  if (n < 400 || n > 599) throw new InvalidArgumentError("expected a code from 400 to 599");
  return n;
}

export function addSandboxOptions(cmd: Command, specs: readonly SandboxOptionSpec[]): Command {
  for (const spec of specs) {
    const opt = new Option(spec.flags, spec.env ? `${spec.description} [env ${spec.env}]` : spec.description);
    if (spec.choices) opt.choices(spec.choices);
    if (spec.parse === "int") opt.argParser(int);
    if (spec.parse === "share") opt.argParser(share);
    if (spec.parse === "status") opt.argParser(status);
    if (spec.hidden) opt.hideHelp();
    cmd.addOption(opt);
  }
  return cmd;
}

export const DIR_OPTION = SANDBOX_OPTIONS[0]!;
export const JSON_OPTION: SandboxOptionSpec = { flags: "--json", description: "print JSON" };
