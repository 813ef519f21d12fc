/**
 * The single executable's first script (scripts/sea.mjs builds it). mailsend's code is inside the
 * executable as separate scripts: the CLI, and one for each large package that only some commands
 * use (the sandbox's, Redis's, SMTP's, ...). Each is compiled with a V8 code cache made when the
 * executable was built, by running a command or two, so a command neither reads nor compiles the
 * packages it does not use, and compiles little of what it does. Only documented APIs are used
 * (node:sea's assets, vm.Script's cachedData); Node's module loader is neither used nor changed:
 * each script is a function called with the built-in-only require the executable's main script has.
 */
import { getAsset, getRawAsset } from "node:sea";
import { debuglog } from "node:util";
import { Script } from "node:vm";

/** Which package script holds each module the CLI imports from a package (set by the build). */
declare const __SEA_PACKAGES__: Record<string, string>;
/** True in the build's own executable, which writes the code caches instead of reading them. */
declare const __SEA_TRAINING__: boolean;

type Wrapper = (
  require: NodeJS.Require,
  module: { exports: unknown },
  exports: unknown,
  filename: string,
  dirname: string,
  seaImport: (specifier: string) => unknown,
) => void;

/** The scripts run so far, whose code caches the build's executable writes. */
const scripts = new Map<string, Script>();
/** NODE_DEBUG=mailsend-sea says whether each script's code cache was used (the build checks it). */
const debug = debuglog("mailsend-sea");
const packages = new Map<string, Record<string, unknown>>();

/** Runs one script of the executable (a function of require, module, exports, ...) and returns its exports. */
function run(name: string): unknown {
  const cachedData = __SEA_TRAINING__ ? undefined : codeCache(name);
  const script = new Script(getAsset(`${name}.js`, "utf8"), { filename: `mailsend:${name}.js`, cachedData });
  if (!__SEA_TRAINING__)
    debug("%s.js: code cache %s", name, cachedData ? (script.cachedDataRejected ? "rejected" : "used") : "absent");
  if (__SEA_TRAINING__) scripts.set(name, script);
  const module = { exports: {} as unknown };
  (script.runInThisContext() as Wrapper)(require, module, module.exports, __filename, __dirname, seaImport);
  return module.exports;
}

/** The script's code cache; a cache V8 refuses (another V8's flags) only makes the start slower. */
function codeCache(name: string): Uint8Array | undefined {
  try {
    return new Uint8Array(getRawAsset(`${name}.cache`) as ArrayBuffer);
  } catch {
    return undefined;
  }
}

/** A module the CLI imports from a package: its namespace, from the package's script. */
function seaImport(specifier: string): unknown {
  const name = __SEA_PACKAGES__[specifier];
  if (name === undefined) throw new Error(`mailsend: ${specifier} is not in this executable`);
  let modules = packages.get(name);
  if (!modules) {
    modules = (run(name) as { default: Record<string, unknown> }).default;
    packages.set(name, modules);
  }
  return modules[specifier];
}

/**
 * The build's executable writes the code cache of each script the command ran when it ends, with
 * every function the command compiled, unless an earlier command wrote one; with `all`, the top
 * level alone of each script no command ran.
 */
function writeCodeCaches(dir: string, all: boolean): void {
  const { existsSync, writeFileSync } = process.getBuiltinModule("node:fs");
  for (const name of ["cli", ...new Set(Object.values(__SEA_PACKAGES__))]) {
    const file = `${dir}/${name}.cache`;
    if (existsSync(file) || !(scripts.has(name) || all)) continue;
    const script = scripts.get(name) ?? new Script(getAsset(`${name}.js`, "utf8"), { filename: `mailsend:${name}.js` });
    writeFileSync(file, script.createCachedData());
  }
}

if (__SEA_TRAINING__) {
  const dir = process.env.MAILSEND_SEA_CACHE_DIR;
  const all = process.env.MAILSEND_SEA_CACHE_ALL === "1";
  if (dir) process.on("exit", () => writeCodeCaches(dir, all));
}
run("cli");
