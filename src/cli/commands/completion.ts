import { Argument, type Command } from "commander";
import type { CommandContext } from "../command.js";
import { completionScript, type Shell } from "../completion.js";
import { examples } from "../help-examples.js";
import type { CliIO } from "../io.js";

/** `mailsend completion <shell>`: the script on stdout, for the shell to source. */
export async function runCompletion(shell: Shell, program: Command, io: CliIO): Promise<number> {
  io.stdout.write(completionScript(shell, program));
  return 0;
}

const COMPLETION_HELP = `
Prints a completion script for commands, subcommands, options, their choices and
file arguments, generated from this version's commands.
${examples([
  "mailsend completion bash > ~/.local/share/bash-completion/completions/mailsend",
  "source <(mailsend completion bash)               # in ~/.bashrc",
  'mailsend completion zsh > "${fpath[1]}/_mailsend"',
  "mailsend completion fish > ~/.config/fish/completions/mailsend.fish",
])}`;

/** `mailsend completion <shell>`, generated from the program it is registered on (every command defined). */
export function register(program: Command, { io, setExit }: CommandContext): void {
  program
    .command("completion")
    .description("print a shell completion script for bash, zsh or fish")
    .addArgument(new Argument("<shell>", "bash, zsh or fish").choices(["bash", "zsh", "fish"]))
    .addHelpText("after", COMPLETION_HELP)
    .action(async (shell: Shell) => setExit(await runCompletion(shell, program, io)));
}
