// The esbuild options every bundle of src/ shares (the build, and the generators that run the
// program's own tables): which packages stay in node_modules, and the require() that bundled
// CommonJS packages call for Node's built-ins.

// Dependencies of the published package stay in node_modules, each imported where it is used;
// the others (commander, zod, marked, ioredis, jsonc-parser, ...) are build-time only and bundled.
export const external = [
  "smtp-server",
  "ora",
  "@peculiar/x509",
  "reflect-metadata",
  "socks",
  "proper-lockfile",
  "html-to-text",
  "juice",
];

export const requireBanner = {
  js: 'import { createRequire as __mailsendRequire } from "node:module"; const require = __mailsendRequire(import.meta.url);',
};
