#!/usr/bin/env node
import module from "node:module";

// Node's own compile cache (22.1+) keeps what V8 compiled of each file between runs, so a run after
// the first compiles little. Where Node lacks it, or it cannot be used, there is simply no cache.
try {
  module.enableCompileCache?.();
} catch {}

const { main } = await import("../dist/cli/main.js");
await main();
