import { fstatSync, statSync } from "node:fs";
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
  const { run } = await import("./program.js");
  process.exitCode = await run(argv, lazyProcessIO());
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

/**
 * The process's streams for the commands, each made when first used: making one costs a one-shot
 * send milliseconds (the first about 6 ms, stdin on /dev/null about 3 ms more), and `send -q`
 * that succeeds writes nothing and reads nothing. stdinIsNull answers one question about stdin
 * without making it (see InputStreams in src/input/read.ts).
 */
function lazyProcessIO(): CliIO & { stdinIsNull: () => boolean } {
  let hooked = false;
  return {
    get stdout() {
      const stdout = process.stdout;
      if (!hooked) {
        hooked = true;
        // `mailsend ... | head` closes the pipe early; that is not an error. (Set before anything
        // is written: everything a command writes goes through this getter.)
        stdout.on("error", (e: NodeJS.ErrnoException) => {
          if (e.code === "EPIPE") process.exit(process.exitCode ?? 0);
          throw e;
        });
      }
      return stdout;
    },
    get stderr() {
      return process.stderr;
    },
    get stdin() {
      return process.stdin;
    },
    env: process.env,
    stdinIsNull: () => isDevNull(0),
  };
}

/** Whether the descriptor is /dev/null (the same character device), from two stat calls. */
function isDevNull(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isCharacterDevice() && st.rdev === statSync("/dev/null").rdev;
  } catch {
    return false;
  }
}
