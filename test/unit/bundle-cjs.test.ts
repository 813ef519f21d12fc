/**
 * scripts/bundle-cjs.mjs on a small split build of its own: the ES files become CommonJS that
 * Node runs (imports, live exports, a lazy import() of a chunk), and the output does not depend
 * on the directory the build ran in (scripts/build.mjs builds in dist.tmp-<pid>, and the build
 * id the code cache checks is a hash of these files).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scratch } from "../helpers/tmp.js";

const script = new URL("../../scripts/bundle-cjs.mjs", import.meta.url).href;
const { toCommonJS, rewriteImports, requiresCommonJs } = (await import(script)) as {
  toCommonJS: (dirs: string[], chunks: string) => Promise<void>;
  rewriteImports: (code: string, importer: string, isCommonJs?: (spec: string) => boolean) => { code: string; count: number };
  requiresCommonJs: (spec: string) => boolean;
};
const require = createRequire(import.meta.url);

const tmp = scratch("mailsend-bundle-cjs-");
afterAll(() => tmp.remove());

/** What esbuild's split ES build looks like: an entry importing a chunk, and a chunk loaded by import(). */
function esBuild(dir: string): string {
  mkdirSync(join(dir, "cli"), { recursive: true });
  mkdirSync(join(dir, "chunks"), { recursive: true });
  writeFileSync(join(dir, "chunks", "shared-AAAA.js"), "export let count = 0;\nexport function bump() { count++; }\n");
  writeFileSync(join(dir, "chunks", "late-BBBB.js"), 'import { bump } from "./shared-AAAA.js";\nexport function late() { bump(); return "late"; }\n');
  writeFileSync(
    join(dir, "cli", "main.js"),
    'import { bump, count } from "../chunks/shared-AAAA.js";\nbump();\nconst seen = count;\nimport("../chunks/late-BBBB.js").then((m) => { m.late(); console.log(seen, m.late(), count, typeof import.meta.url); });\n',
  );
  return dir;
}

const filesOf = (dir: string) =>
  ["cli", "chunks"].flatMap((d) =>
    readdirSync(join(dir, d))
      .sort()
      .map((f) => [`${d}/${f}`, readFileSync(join(dir, d, f), "utf8")] as const),
  );

describe("toCommonJS", () => {
  it("gives CommonJS that runs, the same bytes whichever directory it was built in", async () => {
    const a = esBuild(join(tmp.dir, "dist.tmp-111"));
    const b = esBuild(join(tmp.dir, "elsewhere", "dist.tmp-222"));
    await toCommonJS([join(a, "cli"), join(a, "chunks")], join(a, "chunks"));
    await toCommonJS([join(b, "cli"), join(b, "chunks")], join(b, "chunks"));
    const fa = filesOf(a);
    expect(fa.map(([f]) => f)).toEqual(filesOf(b).map(([f]) => f));
    expect(fa).toEqual(filesOf(b));
    for (const [, text] of fa) expect(text).not.toContain("dist.tmp-");
    expect(JSON.parse(readFileSync(join(a, "chunks", "package.json"), "utf8"))).toEqual({ type: "commonjs" });
    // Live bindings across files, the lazy chunk loaded by require, import.meta.url made.
    expect(execFileSync(process.execPath, [join(a, "cli", "main.js")], { encoding: "utf8" }).trim()).toBe("1 late 3 string");
  });
});

describe("import() of a package", () => {
  it("is require() for a package whose require() entry is CommonJS, import() for an ES module only one", () => {
    for (const spec of ["proper-lockfile", "juice", "socks", "html-to-text", "@peculiar/x509"]) expect(requiresCommonJs(spec), spec).toBe(true);
    for (const spec of ["ora", "marked", "no-such-package-here"]) expect(requiresCommonJs(spec), spec).toBe(false);
  });

  it("gives what import() gives: the named exports, and module.exports as default", async () => {
    for (const spec of ["proper-lockfile", "juice", "socks", "html-to-text", "@peculiar/x509"]) {
      // esbuild's mark on an import() it found (scripts/bundle-cjs.mjs's MARK), as the converter sees it.
      const { code, count } = rewriteImports(`ns = import("mailsend-dynamic-import:${spec}");`, "./esm-import.cjs");
      expect(count).toBe(1);
      expect(code).not.toContain("esm-import");
      const ours = (await new Function("require", `let ns; ${code} return ns;`)(require)) as Record<string, unknown>;
      const theirs = (await import(spec)) as Record<string, unknown>;
      expect(ours.default, spec).toBe(require(spec));
      // Node's names (found by its lexer of CommonJS, or the ES build's exports) are all there.
      const names = (o: object) => Object.keys(o).filter((k) => k !== "__esModule" && k !== "module.exports").sort();
      expect(names(ours), spec).toEqual(expect.arrayContaining(names(theirs)));
      for (const k of names(theirs)) expect(typeof ours[k], `${spec} ${k}`).toBe(typeof theirs[k]);
    }
  });
});
