import { Chalk, type ChalkInstance } from "chalk";

/** The terminal streams and environment a command sees; tests pass their own. */
export interface CliIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: Record<string, string | undefined>;
}

export function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
}

/** Colour only on a terminal, never with NO_COLOR (https://no-color.org) or TERM=dumb. */
export function colorsFor(stream: CliIO["stderr"], env: CliIO["env"]): ChalkInstance {
  const on = stream.isTTY === true && env.NO_COLOR === undefined && env.TERM !== "dumb";
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0" && env.NO_COLOR === undefined;
  return new Chalk({ level: on || forced ? 1 : 0 });
}
