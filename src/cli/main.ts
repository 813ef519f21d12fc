import type { CliIO } from "./io.js";

/**
 * Entry of the built binary: the only place that sets the process's exit code.
 * `mailsend --version` is answered by bin/mailsend.js before this is even loaded.
 */
export async function main(argv = process.argv.slice(2), invokedAs = process.argv[1]): Promise<void> {
  // Started as `sendmail` or `mailq` (a symlink to mailsend), or as `mailsend sendmail`: its
  // own getopt-style options, so commander is not loaded at all (programs call it often).
  const role = roleOf(invokedAs);
  if (role || argv[0] === "sendmail") {
    const { runSendmail } = await import("./commands/sendmail.js");
    process.exitCode = await runSendmail(role ? argv : argv.slice(1), processIO(), role ?? "sendmail");
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

/** The role of the name the program was started under (basename, before any symlink is resolved), as msmtp and Postfix do. */
function roleOf(path: string | undefined): "sendmail" | "mailq" | undefined {
  const base = path?.split(/[\\/]/).pop()?.replace(/\.(js|mjs|cjs|exe|cmd)$/i, "");
  return base === "sendmail" || base === "mailq" ? base : undefined;
}

/** The process's own streams, made here: --version loads nothing else. */
function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
}
