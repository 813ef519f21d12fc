import type { CliIO } from "./io.js";

/** What a command's registration needs from the program that hosts it. */
export interface CommandContext {
  io: CliIO;
  setExit: (code: number) => void;
  json: boolean;
  argv: readonly string[];
}
