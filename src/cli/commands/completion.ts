import type { Command } from "commander";
import { completionScript, type Shell } from "../completion.js";
import type { CliIO } from "../io.js";

/** `mailsend completion <shell>`: the script on stdout, for the shell to source. */
export async function runCompletion(shell: Shell, program: Command, io: CliIO): Promise<number> {
  io.stdout.write(completionScript(shell, program));
  return 0;
}
