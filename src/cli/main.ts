import { VERSION } from "../core/version.js";
import type { CliIO } from "./io.js";

// By getBuiltinModule, not an ES import: Node makes an ES module of node:fs by reading each of its
// exports, which loads fs/promises and the streams behind it, for --version and every command.
const { fstatSync, statSync, writeSync } = process.getBuiltinModule("node:fs");

/**
 * Entry of the built binary: the only place that sets the process's exit code.
 * `mailsend --version` alone is answered here, before the program is loaded: scripts ask it often,
 * and it needs none of mailsend's code. Not as sendmail or mailq, which answer it their own way.
 */
export async function main(argv = process.argv.slice(2), invokedAs = process.argv[1]): Promise<void> {
  // Started as `sendmail` or `mailq` (a symlink to mailsend), or as `mailsend sendmail`: its
  // own getopt-style options, so commander is not loaded at all (programs call it often).
  const role = roleOf(invokedAs);
  if (!role && argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
    lazyProcessIO().stdout.write(`${VERSION}\n`);
    return;
  }
  sending = isSending(role, argv);
  if (role || argv[0] === "sendmail") {
    const { runSendmail } = await import("./commands/sendmail.js");
    process.exitCode = await runSendmail(role ? argv : argv.slice(1), processIO(), role ?? "sendmail");
    return;
  }
  const { run } = await import("./program.js");
  process.exitCode = await run(argv, lazyProcessIO());
}

/** The role of the name the program was started under (basename, before any symlink is resolved), as msmtp and Postfix do. */
function roleOf(path: string | undefined): "sendmail" | "mailq" | "newaliases" | undefined {
  const base = path
    ?.split(/[\\/]/)
    .pop()
    ?.replace(/\.(js|mjs|cjs|exe|cmd)$/i, "");
  return base === "sendmail" || base === "mailq" || base === "newaliases" ? base : undefined;
}

/**
 * The commands whose work must not stop when their output cannot be written: those that send mail
 * (or take it in to send), and the sandbox, a server others depend on.
 */
const SENDING = new Set(["send", "batch", "run", "sendmail", "relay", "sandbox"]);
let sending = false;

/**
 * Whether this command line does such work. Only help in its own place (`mailsend send --help`)
 * and the show-only modes (--dry-run, batch --check, relay hash-password, sendmail -bp) are not:
 * an option's value that reads "-h" (a subject, sendmail's -h hop count) must never stop a send.
 */
function isSending(role: string | undefined, argv: readonly string[]): boolean {
  if (role === "mailq" || role === "newaliases") return false;
  if (role === "sendmail" || argv[0] === "sendmail") {
    const args = role ? argv : argv.slice(1);
    return !args.includes("-bp") && !args.includes("--help") && !args.includes("-bi");
  }
  const [command, first] = argv;
  if (first === "--help" || first === "-h") return false;
  // queue run and its background runner (--drain), queue retry: they deliver; ls, rm and purge only show or delete.
  if (command === "queue") return first === "run" || first === "retry" || argv.includes("--drain");
  if (command === "send" && (argv.includes("--dry-run") || argv.includes("-n"))) return false;
  if (command === "batch" && argv.includes("--check")) return false;
  if (command === "relay" && first === "hash-password") return false;
  return SENDING.has(command ?? "");
}

/**
 * Output that cannot be written: its reader went away (EPIPE: `mailsend ... | head` closed the
 * pipe), or the file it goes to cannot take it (`>> log` on a full disk: ENOSPC, EDQUOT, EFBIG,
 * EIO). A command that sends goes on without its output and exits as its work went: a closed pipe
 * or a full log must not stop a send half way, nor turn a message the service took into a failure
 * a script would send again. A command that only shows things ends there: with the exit code it
 * had for a reader that went away (as `git log | head`), with 74 (a local I/O error) for the rest.
 * True when the caller is to drop what it writes and go on.
 */
function outputFailed(code: string | undefined): boolean {
  if (sending) return true;
  process.exit(code === "EPIPE" || code === "ERR_STREAM_DESTROYED" ? (process.exitCode ?? 0) : 74);
}

/** Write errors that say the output is gone or full, not that mailsend did something wrong. */
const OUTPUT_FAILURES = new Set(["EPIPE", "ERR_STREAM_DESTROYED", "ENOSPC", "EDQUOT", "EFBIG", "EIO", "ECONNRESET"]);

/** stdout and stderr: their write errors are outputFailed's (then later writes to the destroyed stream too). */
function hookGone(stream: NodeJS.WriteStream): NodeJS.WriteStream {
  if (hooked.has(stream)) return stream;
  hooked.add(stream);
  stream.on("error", (e: NodeJS.ErrnoException) => {
    if (OUTPUT_FAILURES.has(e.code ?? "") && outputFailed(e.code)) return;
    throw e;
  });
  return stream;
}
const hooked = new WeakSet<NodeJS.WriteStream>();

/** The process's own streams, made here: --version loads nothing else. */
function processIO(): CliIO {
  return { stdout: hookGone(process.stdout), stderr: hookGone(process.stderr), stdin: process.stdin, env: process.env };
}

/**
 * The process's streams for the commands, each made when first used: making one loads modules a
 * one-shot send otherwise does without, and `send -q` that succeeds writes nothing and reads nothing. stdout is written directly while it can be
 * (directStdout). stdinIsNull answers one question about stdin without making it (see
 * InputStreams in src/core/read.ts).
 */
function lazyProcessIO(): CliIO & { stdinIsNull: () => boolean } {
  let stdout: CliIO["stdout"] | undefined;
  return {
    get stdout() {
      stdout ??= directStdout();
      return stdout;
    },
    get stderr() {
      return hookGone(process.stderr);
    },
    get stdin() {
      return process.stdin;
    },
    env: process.env,
    stdinIsNull: () => isDevNull(0),
  };
}

/** process.stdout, with what output that cannot be written means (outputFailed). */
function realStdout(): NodeJS.WriteStream {
  return hookGone(process.stdout);
}

/**
 * stdout for the commands. On a pipe, a file or /dev/null, while nothing but write() has been
 * asked of it, each write goes straight to fd 1 with fs.writeSync (as Node's own stdout writes a
 * file or /dev/null), and process.stdout (a net.Socket on a pipe, which loads the streams and net
 * modules) is never made: a dry run or a --json result is one or two writes. Anything else asked of it (a listener, a
 * property, a terminal, Windows), or a write the descriptor does not take at once (EAGAIN on a
 * non-blocking pipe: the rest of it), and from then on every write goes through process.stdout,
 * so nothing is reordered. Output that cannot be written (EPIPE, ENOSPC) is outputFailed's, as it is there.
 */
function directStdout(): CliIO["stdout"] {
  let direct = process.platform !== "win32" && writableDirectly(1);
  let real: NodeJS.WriteStream | undefined;
  /** Its reader went away while a sending command goes on: what is written is dropped. */
  let gone = false;
  const toReal = () => {
    direct = false;
    real ??= realStdout();
    return real;
  };
  const write = (
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | ((e?: Error | null) => void),
    cb?: (e?: Error | null) => void,
  ): boolean => {
    if (typeof encoding === "function") {
      cb = encoding;
      encoding = undefined;
    }
    if (gone) {
      if (cb) process.nextTick(cb);
      return true;
    }
    if (!direct) return toReal().write(chunk, encoding as BufferEncoding, cb);
    const buf = typeof chunk === "string" ? Buffer.from(chunk, encoding ?? "utf8") : chunk;
    let off = 0;
    try {
      while (off < buf.length) off += writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (OUTPUT_FAILURES.has(code ?? "") && outputFailed(code)) {
        gone = true;
        if (cb) process.nextTick(cb);
        return true;
      }
      return toReal().write(buf.subarray(off), cb);
    }
    if (cb) process.nextTick(cb);
    return true;
  };
  return new Proxy({} as CliIO["stdout"], {
    get(_, prop) {
      if (prop === "write") return write;
      // process.stdout off a terminal has no isTTY (undefined, not false).
      if (prop === "isTTY" && direct) return undefined;
      const value = Reflect.get(toReal(), prop) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(real) : value;
    },
    has(_, prop) {
      return prop === "write" || Reflect.has(toReal(), prop);
    },
    set(_, prop, value) {
      return Reflect.set(toReal(), prop, value);
    },
  });
}

/** A pipe, a socket, a regular file or /dev/null: what fs.writeSync writes as process.stdout would. */
function writableDirectly(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isFIFO() || st.isSocket() || st.isFile() || isDevNull(fd);
  } catch {
    return false;
  }
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
