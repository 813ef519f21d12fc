import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";

// The build's chunk groups (scripts/bundle-groups.mjs) on a small tree: three commands loaded by
// import(), each using two of three shared modules. esbuild alone makes a chunk for each pair;
// with the three shared modules as a group's roots they come in one chunk.
const script = new URL("../../scripts/bundle-groups.mjs", import.meta.url).href;
type Groups = Record<string, { roots: string[]; default?: boolean; includes?: string[]; targets?: string[]; importers?: string[] }>;
const { groupsPlugin } = (await import(script)) as { groupsPlugin: (o: { root: string; groups: Groups }) => import("esbuild").Plugin };

const root = mkdtempSync(join(tmpdir(), "mailsend-groups-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const src = join(root, "src");
mkdirSync(src);
const files: Record<string, string> = {
  "main.ts": `export async function run(): Promise<string[]> {
  const out: string[] = [];
  for (const load of [() => import("./a.js"), () => import("./b.js"), () => import("./c.js")]) out.push((await load()).default());
  return out;
}`,
  "x.ts": `export const x = "x";`,
  "y.ts": `export const y = "y";`,
  "z.ts": `export const z = "z";`,
  "a.ts": `import { x } from "./x.js"; import { y } from "./y.js"; export default () => "a" + x + y;`,
  "b.ts": `import { y } from "./y.js"; import { z } from "./z.js"; export default () => "b" + y + z;`,
  "c.ts": `import { x } from "./x.js"; import { z } from "./z.js"; export default () => "c" + x + z;`,
};
for (const [f, text] of Object.entries(files)) writeFileSync(join(src, f), text);

async function bundle(out: string, groups?: Groups) {
  const r = await build({
    entryPoints: { main: join(src, "main.ts") },
    outdir: join(root, out),
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    metafile: true,
    logLevel: "error",
    plugins: groups ? [groupsPlugin({ root: `${root}/`, groups })] : [],
  });
  // Which output file holds each shared module.
  const home = (m: string) => Object.entries(r.metafile.outputs).find(([, o]) => Object.keys(o.inputs).some((i) => i.endsWith(`src/${m}`)))?.[0];
  const { run } = (await import(pathToFileURL(join(root, out, "main.js")).href)) as { run: () => Promise<string[]> };
  return { homes: ["x.ts", "y.ts", "z.ts"].map(home), result: await run() };
}

describe("bundle-groups: the modules of a hot path share one chunk", () => {
  it("esbuild alone splits the shared modules by which entries reach them", async () => {
    const { homes, result } = await bundle("plain");
    expect(result).toEqual(["axy", "byz", "cxz"]);
    expect(new Set(homes).size).toBe(3);
  });

  it("as the roots of a group, they are in one chunk, and every import() still gets its module (default export included)", async () => {
    const { homes, result } = await bundle("grouped", { core: { default: true, roots: ["src/x.ts", "src/y.ts", "src/z.ts"] } });
    expect(result).toEqual(["axy", "byz", "cxz"]);
    expect(new Set(homes).size).toBe(1);
  });
});
