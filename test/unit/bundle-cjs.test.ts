/**
 * scripts/bundle-cjs.mjs on a small split build of its own: the ES files become CommonJS that
 * Node runs (imports, live exports, a lazy import() of a chunk), and the output does not depend
 * on the directory the build ran in (scripts/build.mjs builds in dist.tmp-<pid>, and the build
 * id the code cache checks is a hash of these files).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scratch } from "../helpers/tmp.js";

const script = new URL("../../scripts/bundle-cjs.mjs", import.meta.url).href;
const { toCommonJS } = (await import(script)) as { toCommonJS: (dirs: string[], chunks: string) => Promise<void> };

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
