// Bundles src/ into dist/ with esbuild's code splitting: the CLI's entry (dist/cli/main.js) and the
// library's (dist/index.js) share chunks, and each command's code, with the heavy libraries it
// alone uses (nodemailer, marked, ioredis, ...), is a chunk loaded only when it is imported.
import { build } from "esbuild";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { external, requireBanner } from "./bundle-options.mjs";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

// Build beside dist/ and swap it in, so a CLI already running from dist/ (a
// test in another terminal) is not left without its files halfway.
const root = new URL("..", import.meta.url).pathname;
const tmp = `${root}dist.tmp-${process.pid}`;
const old = `${root}dist.old-${process.pid}`;
// The CLI and the library are two builds, each split on its own: a library user never loads the
// CLI's chunks, and the CLI's chunks are not cut further by what the library shares with it.
const common = {
  outdir: tmp,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20.18",
  sourcemap: "linked",
  // Maps give file and line in src/ for a stack trace; the sources themselves are not shipped.
  sourcesContent: false,
  external,
  banner: requireBanner,
  define: { __MAILSEND_VERSION__: JSON.stringify(pkg.version) },
  logLevel: "warning",
  metafile: true,
};
const cli = await build({
  ...common,
  entryPoints: { "cli/main": "src/cli/main.ts" },
  chunkNames: "chunks/[name]-[hash]",
});
const lib = await build({ ...common, entryPoints: { index: "src/index.ts" }, chunkNames: "lib/[name]-[hash]" });
const result = { metafile: { inputs: { ...cli.metafile.inputs, ...lib.metafile.inputs } } };

writeThirdPartyNotices(result.metafile, `${tmp}/THIRD_PARTY_LICENSES.txt`);

await emitTypes(`${tmp}/types`);

try {
  renameSync(`${root}dist`, old);
} catch {}
renameSync(tmp, `${root}dist`);
rmSync(old, { recursive: true, force: true });

/**
 * The public API's declarations (dist/types), emitted file by file with
 * TypeScript's isolated declaration emit: from src/index.ts, following only
 * the imports the declarations themselves keep, so just the files the
 * public types reach are shipped. Each file must annotate its exports
 * (--isolatedDeclarations rules); a file that does not fails the build.
 * The test of a TypeScript consumer (test/e2e/pack.test.ts) compiles them.
 */
async function emitTypes(outDir) {
  const { default: ts } = await import("typescript");
  const compilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
  };
  const queue = ["src/index.ts"];
  const done = new Set();
  const problems = [];
  while (queue.length > 0) {
    const file = queue.shift();
    if (done.has(file)) continue;
    done.add(file);
    const source = readFileSync(join(root, file), "utf8");
    const r = ts.transpileDeclaration(source, { fileName: file, compilerOptions, reportDiagnostics: true });
    for (const d of r.diagnostics ?? []) {
      const { line } = d.file?.getLineAndCharacterOfPosition(d.start ?? 0) ?? { line: 0 };
      problems.push(`${file}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
    }
    const out = join(outDir, relative("src", file).replace(/\.ts$/, ".d.ts"));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, r.outputText);
    for (const m of r.outputText.matchAll(/(?:from\s+|import\()\s*["'](\.{1,2}\/[^"']+)\.js["']/g)) {
      queue.push(join(dirname(file), `${m[1]}.ts`));
    }
  }
  if (problems.length > 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`the public API's declarations cannot be emitted file by file:\n${problems.join("\n")}`);
  }
}

/**
 * The packages bundled into dist/ (commander, zod, nodemailer, ...) ship
 * inside our files, so their licence texts ship with them: one file listing
 * each bundled package, its version and its LICENSE.
 */
function writeThirdPartyNotices(metafile, path) {
  const names = new Set();
  for (const input of Object.keys(metafile.inputs)) {
    const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (m) names.add(m[1]);
  }
  const parts = [];
  for (const name of [...names].sort()) {
    const dir = join(root, "node_modules", name);
    const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    // A package whose tarball leaves its licence out (marked-footnote: MIT, the file is only in its
    // repository) has that file in scripts/licenses/<name>, as its repository has it.
    const file = [
      ...["LICENSE", "LICENSE.md", "LICENSE.txt", "license", "license.md", "LICENCE"].map((f) => join(dir, f)),
      join(root, "scripts", "licenses", name.replace("/", "+")),
    ].find((f) => existsSync(f));
    if (!file) throw new Error(`build: ${name} is bundled into dist/ but has no LICENSE file to ship with it`);
    parts.push(`${name}@${meta.version} (${meta.license})\n\n${readFileSync(file, "utf8").trim()}\n`);
  }
  writeFileSync(
    path,
    `Packages bundled into mailsend's dist/ files, and their licences.\n\n${parts.join(`\n${"-".repeat(72)}\n\n`)}`,
  );
}
