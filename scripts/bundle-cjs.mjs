// The CLI's files become CommonJS after esbuild has split them (esbuild splits only ES modules).
//
// Why: Node loads an ES module through its ES loader (resolve, load, translate, link: about a
// dozen internal modules of its own, then work per file), and compiles it without any cache on
// Node 20; a CommonJS file is one read and one compile, and that compile can be given V8's code
// cache (src/cli/code-cache.ts). A REST send spent ~17 ms in the ES loader and ~14 ms compiling.
//
// How: each output file of the ES build (dist/cli/main.js, dist/chunks/*.js) is bundled again on
// its own with format "cjs", every import left external, so esbuild rewrites the file's imports
// into require() calls and its exports into a getter object (live bindings, as ES exports are),
// and chains the file's source map so the new map still points into src/. Then:
//   - import() of our own files becomes a require() in a promise: it stays lazy (a command's code
//     loads when it runs), without the ES loader.
//   - import() of a package whose entry for require() is CommonJS (html-to-text, juice, socks,
//     proper-lockfile, ...) becomes a require() in a promise too, giving what import() would: the
//     exports as named bindings and the whole module.exports as `default`. Node's ES loader, which
//     an import() starts, costs a short-lived process ~15-35 ms more than require() (html-to-text:
//     ~35 ms).
//   - import() of a package that is an ES module only (ora, marked) goes through
//     chunks/esm-import.cjs, a file Node compiles itself: the CLI's .js files are compiled by
//     src/cli/code-cache.ts with vm.Script, where an import() needs an option Node 20 and 24 call
//     experimental (and warn about on stderr). Resolved from chunks/, as it was. (require() of an
//     ES module is refused by Node 20.18, and warned about by some later versions.)
//   - import.meta.url, which CommonJS lacks, becomes the file's own URL.
//   - a package.json with "type": "commonjs" beside the files tells Node what they are.
// The library (dist/index.js, dist/lib/) stays ES modules: it is imported, not run.
import { build } from "esbuild";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, sep } from "node:path";

const META_URL = "__mailsend_import_meta_url";
// One line, so the map's lines stay right (the banner's line is added before the map's first).
const META_BANNER = `const ${META_URL} = require("node:url").pathToFileURL(__filename).href;`;
// While converting, esbuild marks the path of each import() it finds (not one in a comment or a
// string): then only those are rewritten.
const MARK = "mailsend-dynamic-import:";
const MARKED = new RegExp(`\\bimport\\((["'])${MARK}([^"']+)\\1\\)`, "g");
export const ESM_IMPORT_FILE = "esm-import.cjs";

/** esbuild's options for a CommonJS file of the CLI (here, and the code cache's in build.mjs). */
export const CJS_OPTIONS = { bundle: true, format: "cjs", platform: "node", target: "node20.18", sourcemap: "linked", sourcesContent: false, logLevel: "warning" };

/** The project's own resolution: the installed CLI finds its packages in the same node_modules. */
const projectRequire = createRequire(new URL("../package.json", import.meta.url));

/**
 * Whether require() of `spec` loads CommonJS: its entry for require() is a .cjs file, or a .js
 * file whose package is not "type": "module". Unresolvable here: false (left to import()).
 */
export function requiresCommonJs(spec, resolve = projectRequire.resolve) {
  let file;
  try {
    file = resolve(spec);
  } catch {
    return false;
  }
  if (file.endsWith(".cjs")) return true;
  if (!file.endsWith(".js")) return false;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg)) return JSON.parse(readFileSync(pkg, "utf8")).type !== "module";
    if (dirname(dir) === dir) return true;
  }
}

/**
 * Rewrites each marked import() into a require(): of our own file (a relative path) in a promise;
 * of a CommonJS package in a promise, as the namespace import() would give (named exports and
 * `default`, the whole module.exports); of another package through `importer` (the path from the
 * file to chunks/esm-import.cjs). Returns the code and how many it rewrote.
 */
export function rewriteImports(code, importer, isCommonJs = requiresCommonJs) {
  let count = 0;
  const out = code.replace(MARKED, (_, q, spec) => {
    count++;
    if (spec.startsWith(".")) return `Promise.resolve().then(() => require(${q}${spec}${q}))`;
    if (isCommonJs(spec)) return `Promise.resolve().then(() => { const m = require(${q}${spec}${q}); return { ...m, default: m }; })`;
    return `require(${JSON.stringify(importer)})(${q}${spec}${q})`;
  });
  return { code: out, count };
}

/**
 * Converts every .js file directly in each of `dirs` (ES modules written by esbuild) to CommonJS,
 * in place; `chunks` (one of them) gets esm-import.cjs.
 */
export async function toCommonJS(dirs, chunks) {
  const files = dirs.flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith(".js")).map((f) => join(dir, f)));
  await Promise.all(
    files.map(async (file) => {
      const usesMeta = readFileSync(file, "utf8").includes("import.meta");
      let marked = 0;
      const r = await build({
        entryPoints: [file],
        outfile: file,
        // esbuild heads each module with its path from here: from the build's own directory, it
        // names no temporary directory, so the same sources make the same files (and build id).
        absWorkingDir: dirname(chunks),
        allowOverwrite: true,
        ...CJS_OPTIONS,
        write: false,
        ...(usesMeta ? { define: { "import.meta.url": META_URL }, banner: { js: META_BANNER } } : {}),
        plugins: [
          {
            name: "mailsend-all-external",
            setup(b) {
              b.onResolve({ filter: /.*/ }, (a) => {
                if (a.kind === "entry-point") return undefined;
                if (a.kind === "dynamic-import") marked++;
                return { path: a.kind === "dynamic-import" ? MARK + a.path : a.path, external: true };
              });
            },
          },
        ],
      });
      let importer = relative(dirname(file), join(chunks, ESM_IMPORT_FILE)).split(sep).join("/");
      if (!importer.startsWith(".")) importer = `./${importer}`;
      for (const out of r.outputFiles) {
        if (out.path.endsWith(".map")) writeFileSync(out.path, out.contents);
        else {
          const { code, count } = rewriteImports(out.text, importer);
          // Every import() esbuild saw must have been rewritten: vm.Script would refuse one.
          // (esbuild resolves a path once per file: `marked` counts paths, `count` calls.)
          if (count < marked || code.includes(MARK)) throw new Error(`build: ${file}: an import() is left in the CommonJS file`);
          writeFileSync(out.path, code);
        }
      }
    }),
  );
  for (const dir of dirs) writeFileSync(join(dir, "package.json"), `${JSON.stringify({ type: "commonjs" })}\n`);
  writeFileSync(join(chunks, ESM_IMPORT_FILE), "// import() of a package, for the CLI's files (scripts/bundle-cjs.mjs).\nmodule.exports = (specifier) => import(specifier);\n");
}
