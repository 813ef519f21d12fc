/**
 * V8's code cache for mailsend's own CommonJS files (dist/cli, dist/chunks), kept in the user's
 * cache directory. bin/mailsend.js turns it on before anything of dist/cli/main.js loads.
 *
 * Node 20 has no compile cache at all, and Node 22.1+'s (module.enableCompileCache) stores what V8
 * compiled before the file ran: the top level only, as V8 compiles a function when it is first
 * called. So mailsend compiles its files itself (vm.Script, as Node does with a wrapper) and, as
 * the process exits, stores V8's cache of each file as it is then: every function the run called
 * is in it, and the next run deserializes them instead of parsing and compiling them again.
 *
 * One cache per file, command (`send`, `batch`, `sendmail`, ...) and Node version: the same chunk
 * holds code of several commands, and a cache written by `mailsend sandbox` would hold none of a
 * send's functions; a machine that runs mailsend under two Nodes (CI's matrix, nvm) keeps both.
 * A cache is written only when there was none or V8 refused it (another Node, other flags), so a
 * run that finds its cache writes nothing; and only by a run that exits 0 (a dry run of send has
 * its own), since what a run compiled is what the next runs get. It is used only for the file it was made from: the
 * header holds Node's version, the build's id (a hash of every file of the CLI, made by the build:
 * npm gives every installed file the same mtime, and an upgrade's main.js can have the same size),
 * the file's path, size, mtime and inode; V8 checks its own version and flags. A write goes to a temporary file renamed into place, so a reader never sees
 * half of one; a directory that cannot be made or written (or a full disk) only means no cache.
 * It holds compiled code of mailsend's files only, never a key, an address or a message. Caches not
 * written for 30 days are removed when a run writes one, so upgrades do not pile them up.
 * NODE_DISABLE_COMPILE_CACHE=1 turns it off, as it does Node's own.
 */
import Module from "node:module";
import { mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { writeFileAtomic } from "../core/atomic.js";
import { dirname, join, sep } from "node:path";
import vm from "node:vm";

/** The commands with a cache of their own; any other first argument shares "other". */
export const CACHE_COMMANDS: readonly string[] = ["send", "batch", "sandbox", "config", "inbox", "sendmail", "queue", "doctor", "relay", "completion", "mailq"];

const MAGIC = "MSC1";

declare const __MAILSEND_BUILD_ID__: string | undefined;
/** The build's hash of the CLI's files (scripts/build.mjs); "dev" outside a build. */
export const BUILD_ID: string = typeof __MAILSEND_BUILD_ID__ === "string" ? __MAILSEND_BUILD_ID__ : "dev";

export interface CodeCacheStats {
  /** Files compiled from their cache. */
  used: number;
  /** Files whose cache V8 refused. */
  refused: number;
  /** Files with no cache yet, or only one made from another file, build or Node. */
  missing: number;
  /** Caches written as the process exited. */
  written: number;
}

/**
 * The cache directory for mailsend's compiled code, by the platform's convention; undefined when
 * there is no home, or it does not exist (nobody's /nonexistent): a home is never made for a cache.
 */
export function cacheDir(env: NodeJS.ProcessEnv, platform: NodeJS.Platform, homeExists: (dir: string) => boolean = isDir): string | undefined {
  const s = platform === "win32" ? "\\" : "/";
  const home = env.HOME || env.USERPROFILE;
  if (platform === "win32") return env.LOCALAPPDATA ? [env.LOCALAPPDATA, "mailsend", "compile-cache"].join(s) : undefined;
  if (!home && !env.XDG_CACHE_HOME) return undefined;
  if ((platform === "darwin" || !env.XDG_CACHE_HOME) && !(home && homeExists(home))) return undefined;
  if (platform === "darwin") return [home, "Library", "Caches", "mailsend", "compile-cache"].join(s);
  return [env.XDG_CACHE_HOME || [home, ".cache"].join(s), "mailsend", "compile-cache"].join(s);
}

/**
 * Makes `dir` and its missing parents, one level at a time (Node's recursive mkdir never returns
 * where a parent exists but refuses children with ENOENT, under /proc say). True when it exists.
 */
export function makeDir(dir: string, mode = 0o700, depth = 0): boolean {
  try {
    mkdirSync(dir, { mode });
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return isDir(dir);
    if (code !== "ENOENT" || depth > 16) return false;
  }
  const parent = dir.replace(/[\\/][^\\/]*$/, "");
  if (parent === "" || parent === dir || !makeDir(parent, mode, depth + 1)) return false;
  try {
    mkdirSync(dir, { mode });
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EEXIST" && isDir(dir);
  }
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The cache's share of the command line: a known command, the sendmail/mailq role, or "other".
 * `send --dry-run` has its own ("send-dry"): it runs none of the delivery, so a cache written by a
 * dry run (a user's first try, often) would leave every real send compiling that code again.
 */
export function cacheCommand(argv: readonly string[], role: string | undefined): string {
  if (role) return role;
  const first = argv[0];
  if (first === "send") {
    const end = argv.indexOf("--");
    if ((end < 0 ? argv : argv.slice(0, end)).some((a) => a === "-n" || a === "--dry-run")) return "send-dry";
  }
  return first !== undefined && CACHE_COMMANDS.includes(first) ? first : "other";
}

/** Two 32-bit FNV-1a hashes of the path (different offsets): a file name, not a secret. */
function pathKey(path: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193);
  }
  return (a >>> 0).toString(36) + (b >>> 0).toString(36);
}

interface Compiled {
  script: vm.Script;
  file: string;
  stamp: string;
}

type CompileFn = (this: Module, content: string, filename: string) => unknown;

/**
 * Compiles every CommonJS file under `root` (a directory; files elsewhere are left to Node) with
 * V8's cache from `dir`, and stores the caches that were missing or refused as the process exits
 * (a batch that delayOptimisation changed: at EARLY_MS, if it is still running then).
 * Returns the running counts, or undefined when this Node cannot do it (then nothing changes).
 */
export function installCodeCache(root: string, dir: string, command: string, build: string = BUILD_ID, node: string = process.version): CodeCacheStats | undefined {
  const proto = Module.prototype as unknown as { _compile?: CompileFn };
  const original = proto._compile;
  if (typeof original !== "function" || typeof Module.wrap !== "function") return undefined;
  const stats: CodeCacheStats = { used: 0, refused: 0, missing: 0, written: 0 };
  const prefix = root.endsWith(sep) ? root : root + sep;
  const toWrite: Compiled[] = [];

  proto._compile = function (this: Module, content: string, filename: string): unknown {
    if (!filename.startsWith(prefix) || !filename.endsWith(".js")) return original.call(this, content, filename);
    let stamp: string;
    try {
      const st = statSync(filename);
      stamp = `${node} ${process.arch} ${build} ${command} ${filename} ${st.size} ${st.mtimeMs} ${st.ino}`;
    } catch {
      return original.call(this, content, filename);
    }
    const file = join(dir, `${pathKey(`${node} ${command} ${filename}`)}.bin`);
    const cachedData = readCache(file, stamp);
    // No import() in these files (scripts/bundle-cjs.mjs sends a package's through a file Node compiles).
    const script = new vm.Script(Module.wrap(content), { filename, cachedData });
    if (cachedData === undefined) stats.missing++;
    else if (script.cachedDataRejected === true) stats.refused++;
    else stats.used++;
    if (cachedData === undefined || script.cachedDataRejected === true) toWrite.push({ script, file, stamp });
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...a: unknown[]) => unknown;
    const require = Module.createRequire(filename);
    return wrapper.call(this.exports, this.exports, require, this, filename, dirname(filename));
  };

  writePending = () => {
    if (toWrite.length === 0 || flagsChanged || !makeDir(dir)) return;
    const written = stats.written;
    for (const c of toWrite.splice(0)) if (writeCache(c)) stats.written++;
    if (stats.written > written) prune(dir, Date.now());
  };
  // Only a run that succeeded: one that stopped early (a usage or configuration error, a user's
  // first try often) ran little of its command, and its cache would be used, not rewritten, after.
  process.once("exit", (code) => {
    if (code === 0) writePending?.();
  });
  return stats;
}

/** V8 11's interrupt budget (Node 20): the bytecode a function runs before V8 weighs optimising it. */
export const V8_11_INTERRUPT_BUDGET = 67_584;
/** How long a batch starts with V8 optimising later (delayOptimisation). */
export const EARLY_MS = 2_000;

/**
 * Node's modules every REST batch loads. Node compiles its own modules from code built into it
 * only while V8's flags are those it was built with: loaded after delayOptimisation changes them,
 * each is compiled again (~15 ms of a batch's start-up). So they are loaded first.
 */
export const BATCH_BUILTINS: readonly string[] = ["node:fs/promises", "node:os", "node:crypto", "node:net", "node:http"];

/** Set once V8's flags changed during the run: the caches V8 would make now are for the new flags. */
let flagsChanged = false;
/** Writes the caches still to write (installCodeCache's), before V8's flags change or as the process exits. */
let writePending: (() => void) | undefined;

/** V8 12 and 13's defaults (Node 22 to 24): the calls of a function before Maglev, and TurboFan, optimise it. */
export const V8_12_MAGLEV_CALLS = 400;
export const V8_12_TURBOFAN_CALLS = 3_000;

/** The V8 flags a batch starts with, and those it gets back at EARLY_MS. */
export interface OptimisationDelay {
  early: string[];
  later: string[];
}

/**
 * What delayOptimisation sets for this command on this V8, if anything: only `batch`, only on a
 * V8 whose flags were measured, and not when node's command line already sets one of them.
 */
export function optimisationDelay(command: string, v8Version: string, given: string): OptimisationDelay | undefined {
  if (command !== "batch") return undefined;
  const major = Number(v8Version.split(".")[0]);
  if (major === 11) {
    if (/--interrupt[-_]budget\b/.test(given)) return undefined;
    return { early: [`--interrupt-budget=${4 * V8_11_INTERRUPT_BUDGET}`], later: [`--interrupt-budget=${V8_11_INTERRUPT_BUDGET}`] };
  }
  if (major === 12 || major === 13) {
    if (/--(?:no[-_])?(?:maglev|turbofan)\b|--invocation[-_]count[-_]for[-_](?:maglev|turbofan)\b/.test(given)) return undefined;
    return {
      early: [`--invocation-count-for-maglev=${15 * V8_12_MAGLEV_CALLS}`, `--invocation-count-for-turbofan=${33 * V8_12_TURBOFAN_CALLS}`],
      later: [`--invocation-count-for-maglev=${V8_12_MAGLEV_CALLS}`, `--invocation-count-for-turbofan=${V8_12_TURBOFAN_CALLS}`],
    };
  }
  return undefined;
}

/**
 * A batch of a few thousand messages ends within a second or two, and there V8's optimising
 * compiles, on its background threads, cost more than they save (issue 16):
 * - Node 20's V8 (11.x, no Maglev) hands a function to TurboFan after little use: a 1,500-message
 *   batch spent about a third of its CPU on it. A batch starts with four times V8's budget.
 * - Node 22 and 24 (V8 12 and 13) compile with Maglev after 400 calls and TurboFan after 3,000:
 *   the same batch spent ~13% of its CPU on them (Node 24, one core: 0.54 s against 0.65 s
 *   with its whole start-up). A batch starts with Maglev after 6,000 calls, TurboFan after 99,000.
 * A batch still running after EARLY_MS gets V8's defaults back: a long one is then optimised as
 * any program is. Only `batch`: changing V8's flags also makes Node refuse its own built-in
 * modules' compiled code, which costs a one-message run (send, sendmail) more than it saves. A
 * later V8 is left as it is (its flags have not been measured), and so is one whose flags node's
 * command line sets (NODE_OPTIONS may not carry them). Called before any code cache is read: V8
 * checks a cache against its flags, so every batch reads its caches under the same ones: a run
 * still going at EARLY_MS writes its caches then, before the flags change. Never stops a run: a
 * flag V8 refuses leaves it as it was. True when it applied.
 */
export function delayOptimisation(command: string, v8Version: string = process.versions.v8, given: string = process.execArgv.join(" ")): boolean {
  const plan = optimisationDelay(command, v8Version, given);
  if (!plan) return false;
  const v8 = process.getBuiltinModule?.("node:v8") as typeof import("node:v8") | undefined;
  try {
    for (const m of BATCH_BUILTINS) process.getBuiltinModule(m);
    for (const flag of plan.early) v8!.setFlagsFromString(flag);
  } catch {
    return false;
  }
  setTimeout(() => {
    // A long batch's caches are written now, under the flags the next batch starts with.
    writePending?.();
    flagsChanged = true;
    try {
      for (const flag of plan.later) v8!.setFlagsFromString(flag);
    } catch {}
  }, EARLY_MS).unref();
  return true;
}

/** A cache file not written for this long is removed (then made again by the next run that uses it). */
export const CACHE_MAX_AGE_MS = 30 * 24 * 3600_000;

/**
 * Removes the caches of files no run has written for 30 days (other versions' chunks, installs
 * that are gone) and temporary files a killed writer left, so the directory does not grow with
 * every upgrade. Only after a write, so a run that finds its caches never lists the directory.
 */
export function prune(dir: string, now: number): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.endsWith(".bin") && !name.endsWith(".tmp")) continue;
    const path = join(dir, name);
    try {
      const age = now - statSync(path).mtimeMs;
      if (age > (name.endsWith(".tmp") ? 3600_000 : CACHE_MAX_AGE_MS)) unlinkSync(path);
    } catch {}
  }
}

/** The V8 data of a cache file whose header matches `stamp`, else undefined. */
function readCache(file: string, stamp: string): Buffer | undefined {
  let b: Buffer;
  try {
    b = readFileSync(file);
  } catch {
    return undefined;
  }
  if (b.length < 6 || b.toString("latin1", 0, 4) !== MAGIC) return undefined;
  const n = b.readUInt16LE(4);
  if (b.length <= 6 + n || b.toString("utf8", 6, 6 + n) !== stamp) return undefined;
  return b.subarray(6 + n);
}

function writeCache(c: Compiled): boolean {
  try {
    // A cache is made again when lost: not worth an fsync.
    writeFileAtomic(c.file, [header(c.stamp), c.script.createCachedData()], { mode: 0o600, durable: false });
    return true;
  } catch {
    return false;
  }
}

function header(stamp: string): Buffer {
  const s = Buffer.from(stamp, "utf8");
  const head = Buffer.alloc(6);
  head.write(MAGIC, 0, "latin1");
  head.writeUInt16LE(Math.min(s.length, 0xffff), 4);
  return Buffer.concat([head, s.subarray(0, 0xffff)]);
}
