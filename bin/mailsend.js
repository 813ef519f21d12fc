#!/usr/bin/env node
// Node 22.1+ can keep the code it compiled from mailsend's files in a cache, so a run after the
// first does not compile them again. It lives in the user's cache directory; a directory that
// cannot be made or written only means no cache, as does NODE_DISABLE_COMPILE_CACHE=1.
// A NODE_COMPILE_CACHE set by the user has already been applied by Node and is left as it is.
import module from "node:module";

// `mailsend --version` alone is answered here, from the package's own package.json (the build puts
// the same version into dist/): scripts ask it often, and it needs none of mailsend's code. Not
// when started as sendmail or mailq (a symlink), which answer it their own way.
const args = process.argv.slice(2);
// The same test as roleOf in src/cli/main.ts.
const base = process.argv[1]?.split(/[\\/]/).pop()?.replace(/\.(js|mjs|cjs|exe|cmd)$/i, "");
const role = base === "sendmail" || base === "mailq";
if (!role && args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${module.createRequire(import.meta.url)("../package.json").version}\n`);
} else {
  await start();
}

async function start() {
  if (typeof module.enableCompileCache === "function" && !process.env.NODE_COMPILE_CACHE && !process.env.NODE_DISABLE_COMPILE_CACHE) {
    try {
      const dir = compileCacheDir(process.env, process.platform);
      if (dir && makeDir(module.createRequire(import.meta.url)("node:fs"), dir, 0)) module.enableCompileCache(dir);
    } catch {}
  }
  const { main } = await import("../dist/cli/main.js");
  await main();
}

function compileCacheDir(env, platform) {
  const sep = platform === "win32" ? "\\" : "/";
  const home = env.HOME || env.USERPROFILE;
  if (platform === "win32") return env.LOCALAPPDATA ? [env.LOCALAPPDATA, "mailsend", "compile-cache"].join(sep) : undefined;
  if (!home && !env.XDG_CACHE_HOME) return undefined;
  if (platform === "darwin") return [home, "Library", "Caches", "mailsend", "compile-cache"].join(sep);
  return [env.XDG_CACHE_HOME || [home, ".cache"].join(sep), "mailsend", "compile-cache"].join(sep);
}

// One level at a time: Node's own recursive mkdir (which enableCompileCache uses) never returns
// where a parent exists but refuses children with ENOENT (under /proc, say).
function makeDir(fs, dir, depth) {
  const made = () => {
    try {
      fs.mkdirSync(dir);
      return true;
    } catch (e) {
      return e.code === "EEXIST" && fs.statSync(dir).isDirectory();
    }
  };
  try {
    fs.mkdirSync(dir);
    return true;
  } catch (e) {
    if (e.code === "EEXIST") return fs.statSync(dir).isDirectory();
    if (e.code !== "ENOENT" || depth > 16) return false;
  }
  const parent = dir.replace(/[\\/][^\\/]*$/, "");
  return parent !== "" && parent !== dir && makeDir(fs, parent, depth + 1) && made();
}
