/**
 * Shell completion scripts, generated from the commander program itself:
 * every command, subcommand and option that --help shows is completed, and a
 * new one is picked up without touching this file.
 *
 * What follows an option is read from the option: its choices, else its
 * value's name in the flag syntax (<path|->, <file>, <pem> are files, --dir
 * a directory), else nothing to offer.
 */
import type { Argument, Command, Option } from "commander";
import { VERSION } from "../core/version.js";
import { SETTING_NAMES } from "../settings/profile.js";

export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** What a value is: nothing to offer, a file, a directory, or one of some words. */
type ValueKind = { kind: "any" | "file" | "dir" } | { kind: "choice"; choices: readonly string[] };

interface OptionModel {
  short?: string;
  long?: string;
  description: string;
  /** Undefined for a flag that takes no value. */
  value?: ValueKind;
}

export interface CommandModel {
  /** Names from the root: [] for mailsend itself, ["sandbox", "keys"] for `mailsend sandbox keys`. */
  path: string[];
  description: string;
  options: OptionModel[];
  subcommands: CommandModel[];
  /** The positional arguments, in order (what a word that is not a subcommand or an option value is). */
  positionals: ValueKind[];
}

const FILE_VALUE = /path|file|pem/i;

function valueKindOf(o: Option): ValueKind | undefined {
  if (!o.required && !o.optional) return undefined;
  if (o.argChoices?.length) return { kind: "choice", choices: o.argChoices };
  const placeholder = /[<[]([^>\]]*)[>\]]/.exec(o.flags)?.[1] ?? "";
  if (o.long === "--dir" || /\bdir\b/i.test(placeholder)) return { kind: "dir" };
  if (FILE_VALUE.test(placeholder)) return { kind: "file" };
  return { kind: "any" };
}

function positionalOf(a: Argument): ValueKind {
  if (a.argChoices?.length) return { kind: "choice", choices: a.argChoices };
  return FILE_VALUE.test(a.name()) ? { kind: "file" } : { kind: "any" };
}

/**
 * Arguments whose words commander does not list (a choice there would make
 * commander refuse other words with its own message, before the command's).
 */
const SETTING_KEY: ValueKind = { kind: "choice", choices: ["profile", ...SETTING_NAMES] };
const POSITIONAL_WORDS: Record<string, ValueKind[]> = {
  "config get": [SETTING_KEY],
  "config set": [SETTING_KEY],
  "config unset": [SETTING_KEY],
};

/** One line of help text: completion menus have no room for more. */
function short(text: string): string {
  return text
    .replace(/\s*\[env [A-Z0-9_]+\]$/, "")
    .replace(/\s+/g, " ")
    .trim();
}

export function commandModel(cmd: Command, path: string[] = []): CommandModel {
  const help = cmd.createHelp();
  const options = help.visibleOptions(cmd).map((o) => {
    const value = valueKindOf(o);
    return {
      ...(o.short ? { short: o.short } : {}),
      ...(o.long ? { long: o.long } : {}),
      description: short(o.description),
      ...(value ? { value } : {}),
    };
  });
  const subcommands = help
    .visibleCommands(cmd)
    .map((sub) =>
      sub.commands.length === 0 && sub.options.length === 0 && sub.name() === "help"
        ? helpModel(sub, path)
        : commandModel(sub, [...path, sub.name()]),
    );
  const positionals = cmd.registeredArguments.map((a, i) => POSITIONAL_WORDS[path.join(" ")]?.[i] ?? positionalOf(a));
  return { path, description: short(cmd.description()), options, subcommands, positionals };
}

/** commander's implicit `help [command]`: completes the command names. */
function helpModel(sub: Command, path: string[]): CommandModel {
  return {
    path: [...path, "help"],
    description: short(sub.description()),
    options: [],
    subcommands: [],
    positionals: [],
  };
}

function walk(m: CommandModel): CommandModel[] {
  return [m, ...m.subcommands.flatMap(walk)];
}

const key = (m: CommandModel) => m.path.join(" ");
const flagsOf = (o: OptionModel) => [o.short, o.long].filter((f): f is string => f !== undefined);

function kindWord(v: ValueKind | undefined): string {
  if (!v) return "none";
  return v.kind === "choice" ? `choice ${v.choices.join(" ")}` : v.kind;
}

/** A word in single quotes for sh, bash and zsh. */
function sq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** A word in single quotes for fish (backslash escapes ' and \). */
function fq(s: string): string {
  return `'${s.replace(/[\\']/g, (c) => `\\${c}`)}'`;
}

/** `case` arms shared by the bash and zsh scripts: what follows each option of each command. */
function optargArms(all: CommandModel[], indent: string): string[] {
  const arms: string[] = [];
  for (const m of all) {
    const byKind = new Map<string, string[]>();
    for (const o of m.options) {
      if (!o.value) continue;
      const word = kindWord(o.value);
      byKind.set(word, [...(byKind.get(word) ?? []), ...flagsOf(o).map((f) => sq(`${key(m)}|${f}`))]);
    }
    for (const [word, labels] of byKind) arms.push(`${indent}${labels.join("|")}) REPLY=${sq(word)} ;;`);
  }
  return arms;
}

/** `case "$cmdpath|$n"` arms: what the n-th (0-based) positional word of each command is. */
function positionalArms(all: CommandModel[], indent: string): string[] {
  return all.flatMap((m) =>
    m.positionals.map((p, i) => `${indent}${sq(`${key(m)}|${i}`)}) REPLY=${sq(kindWord(p))} ;;`),
  );
}

function header(shell: Shell, install: string[]): string {
  return [
    `# ${shell} completion for mailsend ${VERSION}, generated by \`mailsend completion ${shell}\`.`,
    ...install.map((l) => `#   ${l}`),
    "",
  ].join("\n");
}

/** The bash functions that answer from the command tree: subcommands, options, option values, positionals. */
function bashTables(all: CommandModel[]): string {
  const withSubs = all.filter((m) => m.subcommands.length);
  return `# The subcommands of a command path ("" is mailsend itself).
_mailsend_commands() {
  case "$1" in
${withSubs.map((m) => `    ${sq(key(m))}) REPLY=${sq(m.subcommands.map((s) => s.path.at(-1)).join(" "))} ;;`).join("\n")}
    *) REPLY='' ;;
  esac
}

_mailsend_options() {
  case "$1" in
${all.map((m) => `    ${sq(key(m))}) REPLY=${sq(m.options.flatMap(flagsOf).join(" "))} ;;`).join("\n")}
    *) REPLY='' ;;
  esac
}

# What follows an option: none, any, file, dir, or "choice <words>".
_mailsend_optarg() {
  case "$1|$2" in
${optargArms(all, "    ").join("\n")}
    *) REPLY=none ;;
  esac
}

# What a command's n-th positional argument is (0-based): none once they are all given.
_mailsend_positional() {
  case "$1|$2" in
${positionalArms(all, "    ").join("\n")}
    *) REPLY=none ;;
  esac
}

`;
}

/** The completion function itself: the same for every command tree, it asks the tables. */
const BASH_COMPLETE = `_mailsend_values() {
  local line
  case "$1" in
    file|dir)
      compopt -o filenames 2>/dev/null
      while IFS= read -r line; do COMPREPLY+=("$line"); done < <(compgen "$([[ $1 == dir ]] && echo -d || echo -f)" -- "$2")
      ;;
    choice\\ *)
      while IFS= read -r line; do COMPREPLY+=("$line"); done < <(compgen -W "\${1#choice }" -- "$2")
      ;;
  esac
}

_mailsend() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" cmdpath="" i w opt="" subs npos=0
  local REPLY
  COMPREPLY=()
  (( COMP_CWORD > 0 )) && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  # Which command is being typed: words that name a subcommand, skipping options and their values.
  for (( i = 1; i < COMP_CWORD; i++ )); do
    w="\${COMP_WORDS[i]}"
    case "$w" in
      --*=*|=) ;;
      -*)
        _mailsend_optarg "$cmdpath" "$w"
        if [[ $REPLY != none ]]; then
          # "--opt value", or "--opt=value", which bash splits at the "="
          if [[ \${COMP_WORDS[i+1]} == "=" ]]; then (( i += 2 )); else (( i += 1 )); fi
        fi
        ;;
      *)
        _mailsend_commands "$cmdpath"
        if [[ " $REPLY " == *" $w "* ]]; then cmdpath="\${cmdpath:+$cmdpath }$w"; npos=0; else (( npos++ )); fi
        ;;
    esac
  done
  # The value of an option?
  if [[ $cur == --*=* ]]; then
    # One word when "=" is not in COMP_WORDBREAKS: complete the value, keep the "--opt=".
    _mailsend_optarg "$cmdpath" "\${cur%%=*}"
    if [[ $REPLY != none ]]; then
      _mailsend_values "$REPLY" "\${cur#*=}"
      COMPREPLY=("\${COMPREPLY[@]/#/\${cur%%=*}=}")
    fi
    return 0
  fi
  if [[ $cur == "=" ]]; then opt="$prev"; cur=""
  elif [[ $prev == "=" ]] && (( COMP_CWORD >= 2 )); then opt="\${COMP_WORDS[COMP_CWORD-2]}"
  elif [[ $prev == -* ]]; then opt="$prev"
  fi
  if [[ -n $opt ]]; then
    _mailsend_optarg "$cmdpath" "$opt"
    if [[ $REPLY != none ]]; then
      _mailsend_values "$REPLY" "$cur"
      return 0
    fi
  fi
  if [[ $cur == -* ]]; then
    _mailsend_options "$cmdpath"
    _mailsend_values "choice $REPLY" "$cur"
    return 0
  fi
  _mailsend_commands "$cmdpath"
  subs="$REPLY"
  (( npos )) && subs=""
  [[ -n $subs ]] && _mailsend_values "choice $subs" "$cur"
  _mailsend_positional "$cmdpath" "$npos"
  if [[ $REPLY != none ]]; then
    _mailsend_values "$REPLY" "$cur"
  elif [[ -z $subs ]]; then
    _mailsend_options "$cmdpath"
    _mailsend_values "choice $REPLY" "$cur"
  fi
  return 0
}

complete -F _mailsend mailsend
`;

function bash(root: CommandModel): string {
  return `${header("bash", [
    "Install (with the bash-completion package): mkdir -p ~/.local/share/bash-completion/completions && mailsend completion bash > ~/.local/share/bash-completion/completions/mailsend",
    "or add to ~/.bashrc: source <(mailsend completion bash)",
  ])}
${bashTables(walk(root))}${BASH_COMPLETE}`;
}

function zshEntries(entries: Array<[string, string]>): string {
  return entries.map(([name, desc]) => sq(`${name.replace(/:/g, "\\:")}:${desc}`)).join(" ");
}

/** The zsh functions that answer from the command tree: subcommands and options with their descriptions, option values, positionals. */
function zshTables(all: CommandModel[]): string {
  const withSubs = all.filter((m) => m.subcommands.length);
  return `_mailsend_commands() {
  case "$1" in
${withSubs.map((m) => `    ${sq(key(m))}) reply=(${zshEntries(m.subcommands.map((s) => [s.path.at(-1)!, s.description]))}) ;;`).join("\n")}
    *) reply=() ;;
  esac
}

_mailsend_options() {
  case "$1" in
${all.map((m) => `    ${sq(key(m))}) reply=(${zshEntries(m.options.flatMap((o) => flagsOf(o).map((f): [string, string] => [f, o.description])))}) ;;`).join("\n")}
    *) reply=() ;;
  esac
}

# What follows an option: none, any, file, dir, or "choice <words>".
_mailsend_optarg() {
  case "$1|$2" in
${optargArms(all, "    ").join("\n")}
    *) REPLY=none ;;
  esac
}

_mailsend_positional() {
  case "$1|$2" in
${positionalArms(all, "    ").join("\n")}
    *) REPLY=none ;;
  esac
}

`;
}

/** The completion function itself: the same for every command tree, it asks the tables. */
const ZSH_COMPLETE = `_mailsend_values() {
  case "$1" in
    file) _files ;;
    dir) _files -/ ;;
    choice\\ *) local words_=\${1#choice }; local -a vals; vals=(\${=words_}); compadd -a vals ;;
    *) _message 'value' ;;
  esac
}

_mailsend() {
  local cmdpath="" w kind cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}" REPLY
  local -a reply names cmds
  local i npos=0
  for (( i = 2; i < CURRENT; i++ )); do
    w="\${words[i]}"
    case "$w" in
      --*=*) ;;
      -*) _mailsend_optarg "$cmdpath" "$w"; [[ $REPLY != none ]] && (( i++ )) ;;
      *)
        _mailsend_commands "$cmdpath"
        names=("\${reply[@]%%:*}")
        if (( \${names[(Ie)$w]} )); then cmdpath="\${cmdpath:+$cmdpath }$w"; npos=0; else (( npos++ )); fi
        ;;
    esac
  done
  if [[ $cur == --*=* ]]; then
    _mailsend_optarg "$cmdpath" "\${cur%%=*}"
    if [[ $REPLY != none ]]; then compset -P '*='; _mailsend_values "$REPLY"; return; fi
  fi
  if [[ $prev == -* ]]; then
    _mailsend_optarg "$cmdpath" "$prev"
    if [[ $REPLY != none ]]; then _mailsend_values "$REPLY"; return; fi
  fi
  if [[ $cur == -* ]]; then
    _mailsend_options "$cmdpath"
    _describe -t options 'option' reply
    return
  fi
  _mailsend_commands "$cmdpath"
  cmds=("\${reply[@]}")
  (( npos )) && cmds=()
  (( \${#cmds} )) && _describe -t commands 'command' cmds
  _mailsend_positional "$cmdpath" "$npos"
  kind="$REPLY"
  if [[ $kind != none ]]; then
    _mailsend_values "$kind"
  elif (( ! \${#cmds} )); then
    _mailsend_options "$cmdpath"
    _describe -t options 'option' reply
  fi
}

if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then
  _mailsend "$@"
else
  compdef _mailsend mailsend
fi
`;

function zsh(root: CommandModel): string {
  return `#compdef mailsend
${header("zsh", [
  'Install: mailsend completion zsh > "${fpath[1]}/_mailsend"  (then restart zsh)',
  "or add to ~/.zshrc, after compinit: source <(mailsend completion zsh)",
])}
${zshTables(walk(root))}${ZSH_COMPLETE}`;
}

/** The fish functions that answer from the command tree: subcommands, and what follows each option. */
function fishTables(all: CommandModel[]): string {
  const withSubs = all.filter((m) => m.subcommands.length);
  const optargCases = all.flatMap((m) =>
    m.options
      .filter((o) => o.value)
      .map(
        (o) =>
          `        case ${flagsOf(o)
            .map((f) => fq(`${key(m)}|${f}`))
            .join(" ")}\n            echo ${fq(kindWord(o.value))}`,
      ),
  );
  return `function __mailsend_commands --argument-names cmdpath
    switch "$cmdpath"
${withSubs.map((m) => `        case ${fq(key(m))}\n            printf '%s\\n' ${m.subcommands.map((s) => fq(s.path.at(-1)!)).join(" ")}`).join("\n")}
    end
end

# What follows an option: none, any, file, dir, or "choice <words>".
function __mailsend_optarg --argument-names cmdpath opt
    switch "$cmdpath|$opt"
${optargCases.join("\n")}
        case '*'
            echo none
    end
end

`;
}

/** The functions that find where on the command line the cursor is, asking the tables; the same for every command tree. */
const FISH_WHERE = `# The command being typed and how many of its positional words are given ("<path>|<n>"):
# the words that name a subcommand, skipping options and their values.
function __mailsend_where
    set -l cmdpath ''
    set -l npos 0
    set -l skip 0
    set -l tokens (commandline -opc)
    set -e tokens[1]
    for w in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        # string match, not switch: a case pattern starting with "-" reads like an option.
        if string match -q -- '--*=*' $w
            continue
        else if string match -q -- '-*' $w
            if test (__mailsend_optarg "$cmdpath" $w) != none
                set skip 1
            end
        else if contains -- $w (__mailsend_commands "$cmdpath")
            set cmdpath (string trim -- "$cmdpath $w")
            set npos 0
        else
            set npos (math $npos + 1)
        end
    end
    echo "$cmdpath|$npos"
end

# At this command; given n, also at its n-th positional word (0: none given yet).
function __mailsend_at --argument-names want n
    set -l here (string split -m1 '|' -- (__mailsend_where))
    test "$here[1]" = "$want"; or return 1
    test -z "$n"; or test "$here[2]" = "$n"
end

complete -c mailsend -f
`;

/** fish's `complete` lines: each command's subcommands, options (with what their values are) and positionals. */
function fishCompletions(all: CommandModel[]): string[] {
  const lines: string[] = [];
  const at = (m: CommandModel) => `-n ${fq(`__mailsend_at ${sq(key(m))}`)}`;
  for (const m of all) {
    // Subcommands only where one can stand: before any positional word.
    const first = `-n ${fq(`__mailsend_at ${sq(key(m))} 0`)}`;
    for (const s of m.subcommands)
      lines.push(`complete -c mailsend ${first} -a ${fq(s.path.at(-1)!)} -d ${fq(s.description)}`);
    for (const o of m.options) {
      const parts = [`complete -c mailsend ${at(m)}`];
      if (o.short) parts.push(`-s ${o.short.slice(1)}`);
      if (o.long) parts.push(`-l ${o.long.slice(2)}`);
      const v = o.value;
      if (v?.kind === "file") parts.push("-r -F");
      else if (v?.kind === "dir") parts.push(`-x -a ${fq("(__fish_complete_directories)")}`);
      else if (v?.kind === "choice") parts.push(`-x -a ${fq(v.choices.join(" "))}`);
      else if (v) parts.push("-x");
      parts.push(`-d ${fq(o.description)}`);
      lines.push(parts.join(" "));
    }
    m.positionals.forEach((p, i) => {
      const here = `-n ${fq(`__mailsend_at ${sq(key(m))} ${i}`)}`;
      if (p.kind === "file") lines.push(`complete -c mailsend ${here} -F`);
      else if (p.kind === "choice") lines.push(`complete -c mailsend ${here} -a ${fq(p.choices.join(" "))}`);
    });
  }
  return lines;
}

function fish(root: CommandModel): string {
  const all = walk(root);
  return `${header("fish", ["Install: mkdir -p ~/.config/fish/completions && mailsend completion fish > ~/.config/fish/completions/mailsend.fish"])}
${fishTables(all)}${FISH_WHERE}${fishCompletions(all).join("\n")}
`;
}

export function completionScript(shell: Shell, program: Command): string {
  const root = commandModel(program);
  if (shell === "bash") return bash(root);
  if (shell === "zsh") return zsh(root);
  return fish(root);
}
