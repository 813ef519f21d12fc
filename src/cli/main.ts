import { VERSION } from "../core/version.js";
import { processIO } from "./io.js";

/**
 * Entry of the built binary: the only place that sets the process's exit code.
 * `--version` is answered before commander and the rest are even loaded.
 */
export async function main(argv = process.argv.slice(2)): Promise<void> {
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  // `mailsend ... | head` closes the pipe early; that is not an error.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw e;
  });
  const { run } = await import("./program.js");
  process.exitCode = await run(argv, processIO());
}
