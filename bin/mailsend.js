#!/usr/bin/env node
// CommonJS (bin/package.json says so), as are the CLI's files under dist/cli and dist/chunks: Node
// then never starts its ES module loader for a command (see scripts/bundle-cjs.mjs).
"use strict";

// `mailsend --version` alone is answered here, from the package's own package.json (the build puts
// the same version into dist/): scripts ask it often, and it needs none of mailsend's code. Not
// when started as sendmail or mailq (a symlink), which answer it their own way.
const args = process.argv.slice(2);
// The same test as roleOf in src/cli/main.ts.
const base = process.argv[1]?.split(/[\\/]/).pop()?.replace(/\.(js|mjs|cjs|exe|cmd)$/i, "");
const role = base === "sendmail" || base === "mailq" || base === "newaliases" ? base : undefined;
if (!role && args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${require("../package.json").version}\n`);
} else {
  let cache;
  try {
    cache = require("../dist/cli/code-cache.js");
    // V8 optimises later in a batch's first seconds (src/cli/code-cache.ts says why). First,
    // so that V8 reads every code cache under the flags it was written with.
    cache.delayOptimisation(cache.cacheCommand(args, role));
  } catch {}
  if (cache && !process.env.NODE_DISABLE_COMPILE_CACHE) {
    // Compiled code is kept in the user's cache directory, so a run after the first compiles
    // little (src/cli/code-cache.ts: mailsend's own files, with V8's code cache; Node 22.1+'s own
    // compile cache for the packages it loads). No cache directory only means no cache.
    try {
      const dir = cache.cacheDir(process.env, process.platform);
      if (dir) {
        const { join } = require("node:path");
        cache.installCodeCache(join(__dirname, "..", "dist"), join(dir, "code"), cache.cacheCommand(args, role));
        const module = require("node:module");
        if (typeof module.enableCompileCache === "function" && !process.env.NODE_COMPILE_CACHE && cache.makeDir(dir)) module.enableCompileCache(dir);
      }
    } catch {}
  }
  require("../dist/cli/main.js").main();
}
