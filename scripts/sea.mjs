// The single executable (used by scripts/dist.mjs): Node 24 with mailsend's scripts injected as a
// single-executable application. The CLI is one CommonJS script; each package that only some
// commands use is a script of its own, compiled only when a command imports it; every script has a
// V8 code cache made by running the executable itself on a command or two (src/cli/sea-boot.ts).
import { build } from "esbuild";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { builtinModules, createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { Script } from "node:vm";

const FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
/** Packages every command loads: kept inside the CLI's script, whose cache has them compiled. */
const IN_CLI = new Set(["commander", "jsonc-parser"]);
/** Packages that must share one copy of another: ioredis logs through the `debug` mailsend quiets. */
const SHARES_WITH = { debug: "ioredis" };
/** A module's code as Node would run a CommonJS file: what sea-boot.ts calls each script with. */
const WRAPPER = {
  banner: { js: "(function (require, module, exports, __filename, __dirname, seaImport) {" },
  footer: { js: "})" },
};

/**
 * Builds `dest` from the Node 24 binary `node`, working in `work`. `fail` ends the build with a
 * message.
 */
export async function buildExecutable({ root, node, work, version, dest, fail }) {
  const common = {
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node24",
    // Less for V8 to read at each start; names are kept for the messages that show a class's name.
    minifyWhitespace: true,
    minifySyntax: true,
    // import() becomes a require of a module inside the same script, run when first asked for.
    supported: { "dynamic-import": false },
    logLevel: "warning",
    legalComments: "none",
    absWorkingDir: root,
  };
  const specifiers = await packageImports(root, common);
  const scripts = await bundlePackages(root, work, common, specifiers);
  const packages = Object.fromEntries(specifiers.map((s) => [s, scriptOf(s)]));
  await bundleCli(root, work, common, specifiers, version, fail);
  const assets = { "cli.js": join(work, "cli.js") };
  for (const name of scripts) assets[`${name}.js`] = join(work, `${name}.js`);

  const training = join(work, "mailsend-training");
  await bundleBoot(work, "boot-training.cjs", packages, true);
  inject(node, join(work, "boot-training.cjs"), assets, training, work, fail);
  const caches = join(work, "caches");
  train(training, caches);
  for (const name of ["cli", ...scripts]) assets[`${name}.cache`] = join(caches, `${name}.cache`);
  await bundleBoot(work, "boot.cjs", packages, false);
  inject(node, join(work, "boot.cjs"), assets, dest, work, fail);
  checkCaches(dest, fail);
}

/** The modules mailsend's sources import from packages (not from Node), bar those kept in the CLI. */
async function packageImports(root, common) {
  const result = await build({
    ...common,
    entryPoints: [join(root, "src/cli/sea-main.ts")],
    packages: "external",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  const found = new Set();
  for (const input of Object.values(result.metafile.inputs))
    for (const { path, external } of input.imports)
      if (external && !isBuiltin(path) && !IN_CLI.has(packageName(path))) found.add(path);
  return [...found].sort();
}

function isBuiltin(specifier) {
  return specifier.startsWith("node:") || builtinModules.includes(specifier.split("/")[0]);
}

/** `@scope/name` or `name`, from a specifier that may name a file inside it. */
function packageName(specifier) {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** The executable's script that holds a package's modules. */
function scriptOf(specifier) {
  const name = packageName(specifier);
  return `pkg-${(SHARES_WITH[name] ?? name).replace(/[^a-z0-9]+/gi, "-").replace(/^-/, "")}`;
}

/**
 * One script for each package (or packages that share a copy of one), whose default export maps
 * each specifier to its module's namespace as an ES import sees it.
 */
async function bundlePackages(root, work, common, specifiers) {
  const groups = new Map();
  for (const s of specifiers) groups.set(scriptOf(s), [...(groups.get(scriptOf(s)) ?? []), s]);
  for (const [name, members] of groups) {
    const lines = members.map((s, i) => `import * as m${i} from ${JSON.stringify(s)};`);
    lines.push(`export default { ${members.map((s, i) => `${JSON.stringify(s)}: m${i}`).join(", ")} };`);
    await build({
      ...common,
      ...WRAPPER,
      // .mjs: an ES module, so a CommonJS package's default export is its module.exports, as in Node.
      stdin: { contents: lines.join("\n"), sourcefile: `${name}.mjs`, resolveDir: root, loader: "js" },
      outfile: join(work, `${name}.js`),
      logOverride: { "empty-import-meta": "silent" },
    });
  }
  return [...groups.keys()];
}

/**
 * The CLI's script. Each package import goes to a small ES module written here (by esbuild's
 * alias) that takes the module from its package's script when first imported, with the names
 * it exports, which are read by running that script once here.
 */
async function bundleCli(root, work, common, specifiers, version, fail) {
  const facades = join(work, "facades");
  const require = createRequire(join(root, "package.json"));
  const loaded = new Map();
  for (const specifier of specifiers) {
    const name = scriptOf(specifier);
    if (!loaded.has(name)) loaded.set(name, runHere(join(work, `${name}.js`), require));
    const names = Object.keys(loaded.get(name)[specifier]).filter((n) => n !== "__esModule");
    const pkg = packageName(specifier);
    const sub = specifier.slice(pkg.length + 1) || "index";
    const file = join(facades, pkg, sub.endsWith(".js") ? sub : `${sub}.js`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, facade(specifier, names));
  }
  const alias = {};
  for (const specifier of specifiers)
    alias[packageName(specifier)] = `./${relative(root, join(facades, packageName(specifier)))}`;
  const result = await build({
    ...common,
    ...WRAPPER,
    entryPoints: [join(root, "src/cli/sea-main.ts")],
    outfile: join(work, "cli.js"),
    alias,
    define: { __MAILSEND_VERSION__: JSON.stringify(version) },
    metafile: true,
    // import.meta is only read where the executable never goes (a worker's require of nodemailer).
    logOverride: { "empty-import-meta": "silent" },
  });
  const outside = Object.values(result.metafile.outputs)
    .flatMap((o) => o.imports)
    .filter((i) => i.external && !isBuiltin(i.path));
  if (outside.length) fail(`the CLI's script would need ${outside.map((i) => i.path).join(", ")} from outside`);
}

/** Runs a package script in this process (as sea-boot.ts does) for the names its modules export. */
function runHere(file, require) {
  const module = { exports: {} };
  new Script(readFileSync(file, "utf8"), { filename: file }).runInThisContext()(
    require,
    module,
    module.exports,
    file,
    dirname(file),
  );
  return module.exports.default;
}

function facade(specifier, names) {
  const lines = [`const m = seaImport(${JSON.stringify(specifier)});`];
  for (const [i, n] of names.entries()) lines.push(`const e${i} = m[${JSON.stringify(n)}];`);
  const list = names.map((n, i) => `e${i} as ${n === "default" ? "default" : JSON.stringify(n)}`);
  lines.push(`export { ${list.join(", ")} };`);
  return `${lines.join("\n")}\n`;
}

async function bundleBoot(work, file, packages, training) {
  await build({
    entryPoints: [new URL("../src/cli/sea-boot.ts", import.meta.url).pathname],
    outfile: join(work, file),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node24",
    minifySyntax: true,
    define: { __SEA_PACKAGES__: JSON.stringify(packages), __SEA_TRAINING__: String(training) },
    logLevel: "warning",
  });
}

/**
 * The commands whose code caches the executable carries: a dry run over REST (the path of most
 * commands: options, settings, the message) and one over SMTP (the MIME message). Each writes the
 * caches of the scripts it ran that no earlier command wrote; the last, the top level of the rest.
 */
function train(exe, caches) {
  mkdirSync(caches, { recursive: true });
  withDryRun((run) => {
    const env = { MAILSEND_SEA_CACHE_DIR: caches };
    run(exe, ["--transport", "rest"], env);
    run(exe, ["--transport", "smtp"], env);
  });
  execFileSync(exe, ["--version"], {
    env: { PATH: process.env.PATH, MAILSEND_SEA_CACHE_DIR: caches, MAILSEND_SEA_CACHE_ALL: "1" },
    stdio: "ignore",
  });
}

/** Runs `mailsend send --dry-run` commands in a scratch home with settings of their own; each gives its stderr. */
function withDryRun(body) {
  const home = mkdtempSync(join(tmpdir(), "mailsend-sea-"));
  const message = ["-f", "ci@example.com", "-t", "dev@example.com", "-s", "Build passed", "--text", "ok"];
  const base = {
    PATH: process.env.PATH,
    HOME: home,
    NO_COLOR: "1",
    MAILSEND_CONFIG: join(home, "none.json"),
    MAILSEND_API_KEY: "training",
    MAILSEND_BASE_URL: "https://api.example.com",
    MAILSEND_SMTP_HOST: "smtp.example.com",
    MAILSEND_SMTP_USER: "training",
  };
  try {
    return body((exe, args, env) => {
      const argv = ["send", "--dry-run", ...args, ...message];
      const r = spawnSync(exe, argv, {
        env: { ...base, ...env },
        encoding: "utf8",
        stdio: ["ignore", "ignore", "pipe"],
      });
      if (r.status !== 0) throw new Error(`mailsend ${argv.join(" ")} exited ${r.status ?? r.signal}:\n${r.stderr}`);
      return r.stderr;
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The executable's CLI script must start from its code cache (NODE_DEBUG=mailsend-sea says): a
 * cache V8 refused would leave it working, only slower, so the build stops instead.
 */
function checkCaches(exe, fail) {
  const said = withDryRun((run) => run(exe, ["--transport", "rest"], { NODE_DEBUG: "mailsend-sea" }));
  if (!/cli\.js: code cache used/.test(said)) fail(`the executable's CLI script did not use its code cache:\n${said}`);
}

/**
 * Node's preparation blob of the boot script and the assets, injected into a copy of the Node 24
 * binary without its debug symbols.
 */
function inject(node, main, assets, dest, work, fail) {
  const blob = join(work, "sea.blob");
  const config = join(work, "sea-config.json");
  // --use-system-ca: the executable trusts what the machine trusts (its CA store, where a private
  // CA is added), beside Node's own roots and NODE_EXTRA_CA_CERTS.
  const seaConfig = {
    main,
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache: true,
    execArgv: ["--use-system-ca"],
    assets,
  };
  writeFileSync(config, JSON.stringify(seaConfig, null, 2));
  execFileSync(node, ["--experimental-sea-config", config], { stdio: ["ignore", "ignore", "inherit"] });
  copyFileSync(node, dest);
  chmodSync(dest, 0o755);
  // The symbol tables are for debuggers: the executable runs the same without them, and fits the size.
  execFileSync("strip", ["--strip-all", dest], { stdio: ["ignore", "ignore", "inherit"] });
  // postject's ELF library warns about each note section it copies as it is: shown only on failure.
  const cli = new URL("../node_modules/postject/dist/cli.js", import.meta.url).pathname;
  try {
    execFileSync(process.execPath, [cli, dest, "NODE_SEA_BLOB", blob, "--sentinel-fuse", FUSE], {
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    fail(`postject failed:\n${e.stdout}${e.stderr}`);
  }
}
