// How the CLI's code is grouped into chunks: a few large files for the paths that run often,
// instead of the ~35 small ones esbuild's code splitting makes on its own.
//
// esbuild puts each module into the chunk of the exact set of entry points that reach it by
// static imports, and every `import()` target is an entry point. mailsend has ~40 of them (one
// per command, transport and heavy library), so the modules a send needs were scattered over
// ~35 chunks by which of those entries happened to reach them; a send opened them all, and
// Node's ES module loader pays for each file (resolve, read, compile, link) about as much as a
// few kB of code costs to compile. bench/speed.mjs measures the difference.
//
// So every `import()` of our own code (src/) is pointed at a small virtual module instead: it
// re-exports the real target and also imports its group's "barrel", a virtual module that
// imports the roots of the group's hot path. Every module a barrel reaches is then reached by
// every entry point that imports the barrel, so all of them share one set of entry points and
// land in one chunk. Three groups:
//   - "core": what both paths below use (the REST transport, settings, the budget, errors);
//     every `import()` not claimed by another group (a transport, compose, the outbox) is in it,
//     so loading it from either path never drags in the other path's code.
//   - "cli": every command run through commander (program.ts): the program and its options,
//     the send command; its barrel includes core's.
//   - "sendmail": the sendmail/mailq front end, which programs call often and which never loads
//     commander: its command, the message parser, the outbox's submit path; includes core's.
// So a send loads about eight files, not ~35. Code no barrel reaches (a sandbox, the relay,
// compose, SMTP, ioredis, ...) still loads only when it runs, grouped as esbuild would.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

const FACADE = "mailsend-facade";
const BARREL = "mailsend-barrel";

/**
 * @param {{ root: string, groups: Record<string, { roots: string[], includes?: string[], targets?: string[], importers?: string[], default?: boolean }> }} options
 *   roots: files (relative to root) whose static closure is the group's hot path;
 *   includes: groups whose barrels this one's imports too;
 *   targets / importers: the `import()`s of these files, or made by these files, belong to this
 *   group (a target's group first); the group marked default takes the rest.
 */
export function groupsPlugin({ root, groups }) {
  const abs = (p) => join(root, p);
  const names = Object.keys(groups);
  const fallback = names.find((n) => groups[n].default);
  if (!fallback) throw new Error("build: one chunk group must be the default");
  const groupOf = (importer, target) =>
    names.find((n) => groups[n].targets?.some((f) => abs(f) === target)) ?? names.find((n) => groups[n].importers?.some((f) => abs(f) === importer)) ?? fallback;
  return {
    name: "mailsend-groups",
    setup(build) {
      build.onResolve({ filter: /^\./ }, async (args) => {
        if (args.kind !== "dynamic-import" || args.pluginData?.mailsendGroups) return undefined;
        if (!args.importer.startsWith(abs("src/"))) return undefined;
        const r = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: { mailsendGroups: true } });
        if (r.errors.length > 0) return { errors: r.errors };
        if (r.external || !r.path.startsWith(abs("src/"))) return undefined;
        return { path: r.path, namespace: `${FACADE}-${groupOf(args.importer, r.path)}` };
      });
      for (const group of names) build.onLoad({ filter: /.*/, namespace: `${FACADE}-${group}` }, (args) => {
        // `export *` leaves out a default export: name it when the target has one (a false match,
        // in a comment say, stops the build: esbuild finds no default to re-export).
        const hasDefault = /\bexport\s+default\b|\bas\s+default\s*[,}]/.test(readFileSync(args.path, "utf8"));
        return {
          contents: `export * from ${JSON.stringify(args.path)};\n${hasDefault ? `export { default } from ${JSON.stringify(args.path)};\n` : ""}import ${JSON.stringify(`${BARREL}:${group}`)};\n`,
          resolveDir: dirname(args.path),
          loader: "js",
        };
      });
      build.onResolve({ filter: new RegExp(`^${BARREL}:`) }, (args) => ({ path: args.path.slice(BARREL.length + 1), namespace: BARREL }));
      build.onLoad({ filter: /.*/, namespace: BARREL }, (args) => {
        const group = groups[args.path];
        if (!group) throw new Error(`build: no chunk group named ${args.path}`);
        const lines = [...(group.includes ?? []).map((g) => `${BARREL}:${g}`), ...group.roots.map(abs)].map((f) => `import ${JSON.stringify(f)};`);
        return { contents: lines.join("\n"), resolveDir: root, loader: "js" };
      });
    },
  };
}
