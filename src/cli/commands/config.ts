/**
 * `mailsend config list|get|set|unset|path`: read and edit the config file.
 * There is never a key to show: a profile only says where the key is.
 */
import { Option, type Command } from "commander";
import { MailsendError } from "../../core/errors.js";
import {
  checkConfigData,
  configSource,
  isSettingName,
  looksLikeKeyField,
  parseSettingValue,
  readConfig,
  readConfigFile,
  selectProfile,
  SETTING_NAMES,
  writeConfigFile,
  type ConfigFile,
  type ConfigSource,
  type ProfileSettings,
} from "../../settings/profile.js";
import { SYSTEM_CONFIG_PATH } from "../../settings/system-config.js";
import { shownPath } from "../../core/read.js";
import type { CliIO } from "../io.js";
import { reportError } from "../report.js";
import { looksLikeKey, shownWord } from "../../core/redact.js";
import type { CommandContext } from "../command.js";
import { examples } from "../help-examples.js";

export interface ConfigFlags {
  profile?: string;
  json?: boolean;
}

/** Exit status of `config get` for a key that is not set (as `git config --get`). */
const NOT_SET = 1;

/** A word as an error may repeat it: not at all when it looks like a key (typed where a name goes). */
const named = (word: string): string => shownWord(word, JSON.stringify);

function checkKeyName(key: string): void {
  if (key === "profile" || isSettingName(key)) return;
  if (looksLikeKey(key)) {
    throw new MailsendError(
      "usage",
      `the setting's name ${named(key)} is not one; the config file never holds an API key`,
      {
        hint: `Settings: ${SETTING_NAMES.join(", ")}. The key's place is named instead: \`mailsend config set api_key_env VARIABLE\` or \`mailsend config set api_key_file ~/.secrets/mailsend\`. Remove the key from your shell history.`,
      },
    );
  }
  if (looksLikeKeyField(key)) {
    throw new MailsendError("usage", `${key}: the config file never holds an API key`, {
      hint: "Name where it is instead: `mailsend config set api_key_env VARIABLE` or `mailsend config set api_key_file ~/.secrets/mailsend`. If you typed a key on this command line, remove it from your shell history.",
    });
  }
  throw new MailsendError("usage", `unknown setting ${JSON.stringify(key)}`, {
    hint: `Settings: ${SETTING_NAMES.join(", ")}; and "profile", the default profile's name.`,
  });
}

/** The profile get/set/unset act on: --profile, MAILSEND_PROFILE, the file's default, else "default". */
function targetName(cfg: ConfigFile, flags: ConfigFlags, env: CliIO["env"]): { name: string; explicit: boolean } {
  const asked = flags.profile ?? (env.MAILSEND_PROFILE || undefined);
  if (asked !== undefined) return { name: asked, explicit: true };
  return { name: cfg.defaultProfile ?? "default", explicit: false };
}

function show(v: string | number): string {
  return String(v);
}

async function guarded(io: CliIO, flags: ConfigFlags, body: () => number | Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (e) {
    return reportError(e, io, { json: flags.json ?? false });
  }
}

/** How to change the system's file: as root, naming it (config set writes this user's own file). */
const systemEdit = (path: string) => `root changes it with MAILSEND_CONFIG=${path} mailsend config set ...`;

/** Says on stderr that the file read is the system's, and where this user's own would be. */
function noteSystem(io: CliIO, source: ConfigSource): void {
  if (!source.system) return;
  io.stderr.write(
    `mailsend config: ${shownPath(source.path)} is the system's config file, read because this user has none of its own (${shownPath(source.userPath)}, where config set writes; the two are never merged)\n`,
  );
}

/** The file in use on stdout (for `$EDITOR "$(mailsend config path)"`); a note on stderr when it is the system's. */
export function runConfigPath(_flags: ConfigFlags, io: CliIO, systemPath = SYSTEM_CONFIG_PATH): Promise<number> {
  return guarded(io, {}, () => {
    const source = configSource(io.env, systemPath);
    io.stdout.write(`${source.path}\n`);
    noteSystem(io, source);
    return 0;
  });
}

export function runConfigList(flags: ConfigFlags, io: CliIO, systemPath = SYSTEM_CONFIG_PATH): Promise<number> {
  return guarded(io, flags, () => {
    const cfg = readConfig(io.env, systemPath);
    // Only an explicit --profile narrows the list; MAILSEND_PROFILE picks the profile a send uses.
    const one = flags.profile !== undefined ? selectProfile(cfg, flags.profile, {}) : undefined;
    if (flags.json) {
      const profiles = one ? { [one.name]: one.settings } : cfg.profiles;
      io.stdout.write(
        `${JSON.stringify({ path: cfg.path, exists: cfg.exists, system: cfg.system ?? false, profile: cfg.defaultProfile ?? null, profiles })}\n`,
      );
      return 0;
    }
    if (!cfg.exists) {
      io.stderr.write(
        `mailsend config: no config file at ${shownPath(cfg.path)} (create one with mailsend config set <key> <value>)\n`,
      );
      return 0;
    }
    if (cfg.system) noteSystem(io, configSource(io.env, systemPath));
    const lines: string[] = [];
    const entries = (s: ProfileSettings) =>
      Object.entries(s).filter(([, v]) => v !== undefined) as Array<[string, string | number]>;
    if (one) {
      for (const [k, v] of entries(one.settings)) lines.push(`${k}=${show(v)}`);
    } else {
      if (cfg.defaultProfile) lines.push(`profile=${cfg.defaultProfile}`);
      for (const [name, settings] of Object.entries(cfg.profiles)) {
        const list = entries(settings);
        if (list.length === 0) lines.push(`${name}.`);
        for (const [k, v] of list) lines.push(`${name}.${k}=${show(v)}`);
      }
    }
    if (lines.length) io.stdout.write(`${lines.join("\n")}\n`);
    return 0;
  });
}

export function runConfigGet(
  key: string,
  flags: ConfigFlags,
  io: CliIO,
  systemPath = SYSTEM_CONFIG_PATH,
): Promise<number> {
  return guarded(io, flags, () => {
    checkKeyName(key);
    const cfg = readConfig(io.env, systemPath);
    let value: string | number | undefined;
    let where: string;
    if (key === "profile") {
      value = cfg.defaultProfile;
      where = shownPath(cfg.path);
    } else {
      const target = targetName(cfg, flags, io.env);
      // An unknown profile asked for by name is an error (it lists those there are).
      if (target.explicit) selectProfile(cfg, flags.profile, io.env);
      value = Object.hasOwn(cfg.profiles, target.name)
        ? cfg.profiles[target.name]![key as keyof ProfileSettings]
        : undefined;
      where = `profile "${target.name}"`;
    }
    if (value === undefined) {
      if (flags.json) io.stdout.write(`${JSON.stringify({ key, value: null })}\n`);
      else io.stderr.write(`mailsend config: ${key} is not set in ${where}\n`);
      return NOT_SET;
    }
    io.stdout.write(flags.json ? `${JSON.stringify({ key, value })}\n` : `${show(value)}\n`);
    return 0;
  });
}

/**
 * Change the document, check the result as a whole, write it atomically. Always this user's own
 * file (or MAILSEND_CONFIG's), never the system's: that one changes only when root names it.
 */
function edit(io: CliIO, systemPath: string, change: (data: Record<string, unknown>, cfg: ConfigFile) => void): void {
  const source = configSource(io.env, systemPath);
  const path = source.userPath;
  const cfg = readConfigFile(path);
  const data = structuredClone(cfg.data);
  change(data, cfg);
  try {
    checkConfigData(path, { value: data, keyPosition: () => undefined });
  } catch (e) {
    const err = e as MailsendError;
    throw new MailsendError("usage", err.message, err.hint ? { hint: err.hint } : {});
  }
  try {
    writeConfigFile(path, data);
  } catch (e) {
    throw new MailsendError(
      "config_invalid",
      `cannot write the config file ${shownPath(path)} (${(e as NodeJS.ErrnoException).code ?? String(e)})`,
      { cause: e },
    );
  }
  if (source.system) {
    io.stderr.write(
      `mailsend config: wrote ${shownPath(path)}, this user's own config file: the system's ${shownPath(source.path)} is no longer read for this user (the two are never merged); ${systemEdit(source.path)}\n`,
    );
  }
}

function profileObject(data: Record<string, unknown>, name: string): Record<string, unknown> {
  const profiles = (data.profiles ??= {}) as Record<string, Record<string, unknown>>;
  if (!Object.hasOwn(profiles, name))
    Object.defineProperty(profiles, name, { value: {}, enumerable: true, writable: true, configurable: true });
  return profiles[name]!;
}

export function runConfigSet(
  key: string,
  raw: string,
  flags: ConfigFlags,
  io: CliIO,
  systemPath = SYSTEM_CONFIG_PATH,
): Promise<number> {
  return guarded(io, flags, () => {
    checkKeyName(key);
    edit(io, systemPath, (data, cfg) => {
      if (key === "profile") {
        if (!Object.hasOwn(cfg.profiles, raw)) {
          const names = Object.keys(cfg.profiles);
          throw new MailsendError("usage", `no profile "${raw}" to make the default`, {
            hint: `${names.length ? `Profiles: ${names.join(", ")}. ` : ""}Create it first: mailsend config set --profile ${raw} <key> <value>`,
          });
        }
        data.profile = raw;
        return;
      }
      // A username is never the key (over SMTP the key is the password): not written where it would be kept.
      if (key === "smtp_user" && looksLikeKey(raw)) {
        throw new MailsendError(
          "usage",
          `smtp_user: the value ${named(raw)} looks like an API key: the config file never holds an API key`,
          {
            hint: "Over SMTP the key is the password and the username is the service's fixed name (the default, mailsend). Name where the key is with api_key_env or api_key_file, and remove the key from your shell history.",
          },
        );
      }
      const value = parseSettingValue(key as keyof ProfileSettings, raw);
      const target = targetName(cfg, flags, io.env);
      const profile = profileObject(data, target.name);
      profile[key] = value;
      // One place for the key: naming a variable replaces a file, and the other way round.
      const other = key === "api_key_env" ? "api_key_file" : key === "api_key_file" ? "api_key_env" : undefined;
      if (other && other in profile) {
        delete profile[other];
        io.stderr.write(
          `mailsend config: removed ${other} from profile "${target.name}" (a profile names one place for the key)\n`,
        );
      }
    });
    return 0;
  });
}

export function runConfigUnset(
  key: string,
  flags: ConfigFlags,
  io: CliIO,
  systemPath = SYSTEM_CONFIG_PATH,
): Promise<number> {
  return guarded(io, flags, () => {
    checkKeyName(key);
    const source = configSource(io.env, systemPath);
    if (!readConfigFile(source.userPath).exists) {
      if (source.system) {
        io.stderr.write(
          `mailsend config: this user has no config file of its own (${shownPath(source.userPath)}): nothing to unset there; the system's ${shownPath(source.path)} is read instead, and ${systemEdit(source.path)}\n`,
        );
      }
      return 0;
    }
    edit(io, systemPath, (data, cfg) => {
      if (key === "profile") {
        delete data.profile;
        return;
      }
      const target = targetName(cfg, flags, io.env);
      if (target.explicit) selectProfile(cfg, flags.profile, io.env);
      const profiles = data.profiles as Record<string, Record<string, unknown>> | undefined;
      if (profiles && Object.hasOwn(profiles, target.name)) delete profiles[target.name]![key];
    });
    return 0;
  });
}

const CONFIG_HELP = `
The config file (mailsend config path) holds named profiles: defaults for the
connection, the sender and the rate limit, and WHERE the key is (api_key_env or
api_key_file), never the key. Flags beat the environment, which beats the profile.
The profile used: --profile, else MAILSEND_PROFILE, else the file's "profile",
else one named "default".

A user with no config file of their own reads the system's, ${SYSTEM_CONFIG_PATH},
whole (never merged with one). set and unset write the user's own file (or
MAILSEND_CONFIG's), never the system's: root changes it by naming it in MAILSEND_CONFIG.

Examples:
  mailsend config set --profile work base_url https://api.example.com
  mailsend config set --profile work api_key_env WORK_MAILSEND_KEY
  mailsend config set --profile work from 'CI <ci@example.com>'
  mailsend config set profile work           # the default profile
  mailsend config list
  mailsend send --profile work -t dev@example.com -s Hi --text ok
`;

const profileOption = () =>
  new Option(
    "--profile <name>",
    'the profile to act on (default: MAILSEND_PROFILE, the file\'s default, else "default")',
  );
// --profile may come before the sub-command (config's option) or after it.
const configOpts = (cmd: Command) => cmd.optsWithGlobals<ConfigFlags>();

/** `mailsend config` and its sub-commands path, list, get, set and unset. */
export function register(program: Command, ctx: CommandContext): void {
  const { io, setExit } = ctx;
  const config = program
    .command("config")
    .description("show or change the config file's profiles (never a key)")
    .addHelpText("after", CONFIG_HELP);
  config.addOption(profileOption());
  config
    .command("path")
    .description(
      `print the path of the config file in use: $MAILSEND_CONFIG, else the user's own (~/.config/mailsend/config.json), else ${SYSTEM_CONFIG_PATH}`,
    )
    .addHelpText("after", examples(["mailsend config path", '$EDITOR "$(mailsend config path)"']))
    .action(async (_opts: unknown, cmd: Command) => setExit(await runConfigPath(configOpts(cmd), io)));
  config
    .command("list")
    .description("print every profile's settings as profile.key=value (with --profile: that profile's)")
    .addOption(profileOption())
    .option("--json", "print the file's profiles as one JSON object")
    .addHelpText(
      "after",
      examples([
        "mailsend config list                 # profile=work, work.base_url=https://...",
        "mailsend config list --profile work",
        "mailsend config list --json | jq '.profiles | keys'",
      ]),
    )
    .action(async (_opts: unknown, cmd: Command) => setExit(await runConfigList(configOpts(cmd), io)));
  config
    .command("get")
    .description(
      "print one setting of the profile (exit 1 when it is not set); `get profile` prints the default profile",
    )
    .argument("<key>")
    .addOption(profileOption())
    .option("--json", 'print {"key","value"}')
    .addHelpText(
      "after",
      examples([
        "mailsend config get base_url               # of the default profile",
        "mailsend config get --profile work api_key_env",
        "mailsend config get profile                # the default profile's name",
      ]),
    )
    .action(async (key: string, _opts: unknown, cmd: Command) => setExit(await runConfigGet(key, configOpts(cmd), io)));
  registerChanges(config, ctx);
}

/** set and unset: the sub-commands that write the file. */
function registerChanges(config: Command, { io, setExit }: CommandContext): void {
  config
    .command("set")
    .description(
      "set one setting of the profile (creating the file and the profile); `set profile <name>` sets the default",
    )
    .argument("<key>")
    .argument("<value>")
    .addOption(profileOption())
    .addHelpText(
      "after",
      examples([
        "mailsend config set --profile work base_url https://api.example.com",
        "mailsend config set --profile work api_key_env WORK_MAILSEND_KEY   # the variable's NAME",
        "mailsend config set --profile home api_key_file ~/.secrets/mailsend",
        "mailsend config set profile work            # make work the default",
      ]),
    )
    .action(async (key: string, value: string, _opts: unknown, cmd: Command) =>
      setExit(await runConfigSet(key, value, configOpts(cmd), io)),
    );
  config
    .command("unset")
    .description("remove one setting from the profile; `unset profile` removes the default")
    .argument("<key>")
    .addOption(profileOption())
    .addHelpText(
      "after",
      examples([
        "mailsend config unset --profile work rate_limit",
        "mailsend config unset profile               # no default profile",
      ]),
    )
    .action(async (key: string, _opts: unknown, cmd: Command) =>
      setExit(await runConfigUnset(key, configOpts(cmd), io)),
    );
}
