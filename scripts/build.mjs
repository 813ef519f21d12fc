// Bundles src/ into dist/ with code splitting: each command's code and its
// heavy dependencies load only when that command runs (see bench/startup), and the
// code of the hot paths (a send, sendmail) comes in a few chunks (bench/speed).
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { ioredisPlugin } from "./bundle-ioredis.mjs";
import { builtinsPlugin } from "./bundle-builtins.mjs";
import { groupsPlugin } from "./bundle-groups.mjs";
import { CJS_OPTIONS, toCommonJS } from "./bundle-cjs.mjs";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

// postal-mime is bundled too: the sendmail front end parses every message it takes, and its ten
// ES modules cost more to resolve and load than one chunk. So is nodemailer: its ES build is ~40
// modules, all loaded by an SMTP send (its entry imports every transport); as one chunk an SMTP
// send costs about what a plain nodemailer script does (bench/speed.mjs).
// commander and zod are bundled (so they are build-time dependencies only);
// the large libraries stay in node_modules and are imported lazily, so a REST send
// never loads nodemailer.
const external = ["smtp-server", "ora", "@peculiar/x509", "reflect-metadata", "socks", "proper-lockfile", "html-to-text", "juice"];

// The CLI's hot paths, each loaded as a few chunks (see scripts/bundle-groups.mjs): "core" is
// what a send and the sendmail front end share, "cli" the commander program and the send
// command, "sendmail" the front end and the outbox it writes to.
const CHUNK_GROUPS = {
  core: {
    default: true,
    roots: [
      "src/transports/rest.ts",
      "src/transports/index.ts",
      "src/transports/choose.ts",
      "src/settings/profile.ts",
      "src/settings/resolve.ts",
      "src/input/stdin-body.ts",
      "src/input/eml.ts",
      "src/limits/deliver.ts",
      "src/limits/budget.ts",
      "src/core/headers.ts",
      "src/core/size.ts",
      "src/core/version.ts",
      "src/cli/report.ts",
      "src/cli/io.ts",
    ],
  },
  cli: {
    includes: ["core"],
    targets: ["src/cli/program.ts"],
    importers: ["src/cli/program.ts"],
    roots: ["src/cli/program.ts", "src/cli/commands/send.ts", "src/cli/stray.ts"],
  },
  sendmail: {
    includes: ["core"],
    targets: [
      "src/cli/commands/sendmail.ts",
      "src/cli/commands/queue.ts",
      "src/outbox/queue-message.ts",
      "src/outbox/runner.ts",
      "src/outbox/store.ts",
      "src/outbox/message.ts",
      "src/outbox/submit.ts",
      "src/outbox/spawn.ts",
      "src/input/sendmail-message.ts",
      "src/input/aliases.ts",
    ],
    importers: ["src/cli/commands/sendmail.ts"],
    roots: ["src/cli/commands/sendmail.ts", "src/input/sendmail-message.ts", "src/input/aliases.ts", "src/outbox/submit.ts", "src/outbox/spawn.ts", "src/cli/commands/queue.ts"],
  },
};

// ioredis is bundled on purpose (see scripts/bundle-ioredis.mjs): one chunk, loaded only by a
// run with MAILSEND_RATE_LIMIT_URL, costs ~30 ms less than resolving its ~60 files.

// Build beside dist/ and swap it in, so a CLI already running from dist/ (a
// test in another terminal) is not left without its files halfway.
const root = new URL("..", import.meta.url).pathname;
const tmp = `${root}dist.tmp-${process.pid}`;
const old = `${root}dist.old-${process.pid}`;
// The CLI and the library are two builds: each splits its own code (a library user never loads
// the CLI's chunks, and the CLI's chunks are grouped for its hot paths, see bundle-groups.mjs).
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
  // commander is CommonJS and calls require() for Node built-ins.
  banner: { js: 'import { createRequire as __mailsendRequire } from "node:module"; const require = __mailsendRequire(import.meta.url);' },
  define: { __MAILSEND_VERSION__: JSON.stringify(pkg.version) },
  logLevel: "warning",
  metafile: true,
};
// Built-in modules by require(), not as ES modules: see scripts/bundle-builtins.mjs.
// The CLI is split as ES modules (esbuild splits nothing else), then each file becomes CommonJS
// (scripts/bundle-cjs.mjs), which Node loads without its ES loader and V8 can cache: so no banner
// making `require`, CommonJS has its own.
const cli = await build({
  ...common,
  banner: {},
  entryPoints: { "cli/main": "src/cli/main.ts" },
  plugins: [groupsPlugin({ root, groups: CHUNK_GROUPS }), ioredisPlugin, builtinsPlugin],
  chunkNames: "chunks/[name]-[hash]",
});
await toCommonJS([`${tmp}/cli`, `${tmp}/chunks`], `${tmp}/chunks`);
// What bin/mailsend.js loads first, to compile the CLI's files with V8's cache: CommonJS, alone,
// with the hash of the CLI's files, which each cache is checked against (src/cli/code-cache.ts).
await build({
  define: { __MAILSEND_BUILD_ID__: JSON.stringify(hashFiles([`${tmp}/cli`, `${tmp}/chunks`])) },
  entryPoints: { "cli/code-cache": "src/cli/code-cache.ts" },
  outdir: tmp,
  ...CJS_OPTIONS,
});
const lib = await build({
  ...common,
  entryPoints: { index: "src/index.ts" },
  plugins: [ioredisPlugin, builtinsPlugin],
  chunkNames: "lib/[name]-[hash]",
});
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
  const compilerOptions = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true };
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

/** A hash of the names and contents of the files directly in `dirs`. */
function hashFiles(dirs) {
  const h = createHash("sha256");
  for (const dir of dirs) {
    for (const f of readdirSync(dir).sort()) {
      h.update(`${f}\0`);
      h.update(readFileSync(join(dir, f)));
    }
  }
  return h.digest("hex").slice(0, 16);
}

/**
 * The packages bundled into dist/ (commander, zod, undici, nodemailer, ...) ship
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
    const file = [...["LICENSE", "LICENSE.md", "LICENSE.txt", "license", "LICENCE"].map((f) => join(dir, f)), join(root, "scripts", "licenses", name.replace("/", "+"))].find((f) => existsSync(f));
    if (!file) throw new Error(`build: ${name} is bundled into dist/ but has no LICENSE file to ship with it`);
    parts.push(`${name}@${meta.version} (${meta.license})\n\n${readFileSync(file, "utf8").trim()}\n`);
  }
  writeFileSync(path, `Packages bundled into mailsend's dist/ files, and their licences.\n\n${parts.join(`\n${"-".repeat(72)}\n\n`)}`);
}
