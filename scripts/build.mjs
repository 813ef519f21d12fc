// Bundles src/ into dist/ with code splitting: each command's code and its
// heavy dependencies load only when that command runs (see bench/startup).
import { build } from "esbuild";
import { readFileSync, renameSync, rmSync } from "node:fs";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

// Small pure-ESM libraries are bundled; the large ones stay in node_modules and
// are imported lazily, so a REST send never loads nodemailer.
const external = ["nodemailer", "nodemailer/*", "smtp-server", "postal-mime", "undici", "ora", "@peculiar/x509", "reflect-metadata", "marked"];

// Build beside dist/ and swap it in, so a CLI already running from dist/ (a
// test in another terminal) is not left without its files halfway.
const root = new URL("..", import.meta.url).pathname;
const tmp = `${root}dist.tmp-${process.pid}`;
const old = `${root}dist.old-${process.pid}`;
await build({
  entryPoints: { "cli/main": "src/cli/main.ts", index: "src/index.ts" },
  outdir: tmp,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20.18",
  sourcemap: "linked",
  external,
  chunkNames: "chunks/[name]-[hash]",
  // commander is CommonJS and calls require() for Node built-ins.
  banner: { js: 'import { createRequire as __mailsendRequire } from "node:module"; const require = __mailsendRequire(import.meta.url);' },
  define: { __MAILSEND_VERSION__: JSON.stringify(pkg.version) },
  logLevel: "warning",
});

try {
  renameSync(`${root}dist`, old);
} catch {}
renameSync(tmp, `${root}dist`);
rmSync(old, { recursive: true, force: true });
