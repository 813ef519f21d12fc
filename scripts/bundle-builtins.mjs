// How the bundle loads Node's built-in modules: with require(), not as ES modules.
//
// An ES import of a built-in (import http from "node:http") makes Node build an ES facade of
// the module, and building it reads every export once, getters included: a lazy getter then
// loads what it guards. On Node 24 `node:http`'s facade loads Node's internal undici (for its
// WebSocket and EventSource getters): ~44 more internal modules for a send that never uses
// them. `node:util`, `node:process` (chalk's) and `node:fs` pull in 4 to 40 more each, on
// Node 20 too. require() returns the module object as it is and reads nothing.
//
// So, once esbuild has written the chunks, each top-level import of a built-in becomes a
// require() of it (the banner defines `require` in every chunk with createRequire), line for
// line, so the source maps stay right. Only the forms esbuild writes are rewritten:
//   import X from "node:m";        -> const X = require("node:m");
//   import { a, b as c } from ...  -> const { a, b: c } = require(...);
//   import * as X from ...         -> const X = require(...);
//   import X, { a } from ...       -> const X = require(...), { a } = X;
//   import "node:m";               -> require("node:m");
// Anything else that names a built-in stops the build, rather than ship a half-rewritten file.
// Bindings become constants read once: built-ins are never reassigned by mailsend.
import { readFileSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";

const builtins = new Set(builtinModules.flatMap((m) => (m.startsWith("node:") ? [m] : [m, `node:${m}`])));
// The banner's own import makes `require`: it stays an import.
const KEEP = "node:module";

const IMPORT = /^import\s+(?:([\w$]+)\s*,\s*)?(\{[^}]*\}|\*\s+as\s+[\w$]+|[\w$]+)?\s*(?:from\s*)?"([^"]+)";/gm;

export function requireBuiltins(code, file) {
  const out = code.replace(IMPORT, (whole, first, clause, spec) => {
    if (!builtins.has(spec) || (spec === KEEP && /__mailsendRequire/.test(whole))) return whole;
    const req = `require(${JSON.stringify(spec)})`;
    const named = (braces) => {
      // A module object has no `default`: that form is not one esbuild writes; stop rather than guess.
      if (/\bdefault\b/.test(braces)) throw new Error(`build: ${file}: cannot rewrite ${JSON.stringify(whole)}`);
      return braces.replace(/([\w$]+)\s+as\s+([\w$]+)/g, "$1: $2");
    };
    if (first === undefined && clause === undefined) return `${req};`;
    if (first !== undefined) {
      if (!clause?.startsWith("{")) throw new Error(`build: ${file}: cannot rewrite ${JSON.stringify(whole)}`);
      return `const ${first} = ${req}, ${named(clause)} = ${first};`;
    }
    if (clause.startsWith("{")) return `const ${named(clause)} = ${req};`;
    if (clause.startsWith("*")) return `const ${clause.replace(/^\*\s+as\s+/, "")} = ${req};`;
    return `const ${clause} = ${req};`;
  });
  for (const m of out.matchAll(/^import\b[^;]*?"((?:node:)?[a-z_/]+)";/gm)) {
    if (builtins.has(m[1]) && !(m[1] === KEEP && m[0].includes("__mailsendRequire"))) {
      throw new Error(`build: ${file}: an import of ${m[1]} was left as an ES import: ${JSON.stringify(m[0])}`);
    }
  }
  return out;
}

/** Rewrites every .js file esbuild wrote (the metafile's outputs). */
export const builtinsPlugin = {
  name: "mailsend-builtins-by-require",
  setup(build) {
    build.onEnd((result) => {
      if (result.errors.length > 0 || !result.metafile) return;
      for (const file of Object.keys(result.metafile.outputs)) {
        if (!file.endsWith(".js")) continue;
        const code = readFileSync(file, "utf8");
        const out = requireBuiltins(code, file);
        if (out !== code) writeFileSync(file, out);
      }
    });
  },
};
