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
//
// The network modules (http, https, net, tls, child_process, dns) and crypto load when first used, not when
// the chunk that names them loads: they cost a few ms each, and a dry run, an answer from the
// outbox or a usage error never opens a connection. Such a module bound as a whole
// (`import http from "node:http"`) becomes a stand-in object that loads it on the first property
// read; a named binding becomes a stand-in function that loads it on the first call, and only
// for the plain functions listed in LAZY_FUNCTIONS (a class would not survive `instanceof` or
// `extends`): any other named binding of those modules is loaded at once, as before. The same goes
// for commander's require of child_process, which it only uses to run external subcommands
// (mailsend has none): rewritten in its source (COMMANDER_CHILD_PROCESS below), or the build stops.
import { readFileSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";

const builtins = new Set(builtinModules.flatMap((m) => (m.startsWith("node:") ? [m] : [m, `node:${m}`])));
// The banner's own import makes `require`: it stays an import.
const KEEP = "node:module";

const LAZY_MODULES = new Set(["http", "https", "net", "tls", "child_process", "dns", "crypto"].flatMap((m) => [m, `node:${m}`]));
const LAZY_FUNCTIONS = new Set(["isIP", "isIPv4", "isIPv6", "connect", "createConnection", "request", "get", "spawn", "execFile", "lookup", "createHash", "createHmac", "randomUUID", "randomBytes", "randomInt", "timingSafeEqual", "scrypt", "scryptSync"]);
// One line each (the rewrite keeps every line where it was, for the source maps).
// Each stand-in looks its module up once, not on every use (a batch calls randomUUID per message).
const lazyModule = (req) => `(() => { let m; const g = () => (m ??= ${req}); return new Proxy({}, { get: (_, k) => g()[k], has: (_, k) => k in g() }); })()`;
const lazyFunction = (req, name) => `(() => { let f; return function (...a) { f ??= ${req}.${name}; return new.target ? Reflect.construct(f, a, new.target) : f.apply(this, a); }; })()`;

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
    if (LAZY_MODULES.has(spec) && first === undefined) {
      if (clause.startsWith("*")) return `const ${clause.replace(/^\*\s+as\s+/, "")} = ${lazyModule(req)};`;
      if (!clause.startsWith("{")) return `const ${clause} = ${lazyModule(req)};`;
      const bindings = named(clause)
        .slice(1, -1)
        .split(",")
        .map((b) => b.trim())
        .filter(Boolean)
        .map((b) => b.split(/\s*:\s*/));
      if (bindings.every(([name]) => LAZY_FUNCTIONS.has(name))) {
        return `const ${bindings.map(([name, local = name]) => `${local} = ${lazyFunction(req, name)}`).join(", ")};`;
      }
    }
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
const COMMANDER_CHILD_PROCESS = "const childProcess = require('node:child_process');";

export const builtinsPlugin = {
  name: "mailsend-builtins-by-require",
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]commander[\\/]lib[\\/]command\.js$/ }, (args) => {
      const code = readFileSync(args.path, "utf8");
      if (!code.includes(COMMANDER_CHILD_PROCESS)) throw new Error(`build: commander's ${args.path} no longer holds ${COMMANDER_CHILD_PROCESS}: see scripts/bundle-builtins.mjs`);
      return { contents: code.replace(COMMANDER_CHILD_PROCESS, "const childProcess = { spawn: (...a) => require('node:child_process').spawn(...a) };"), loader: "js" };
    });
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
