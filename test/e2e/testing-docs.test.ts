/**
 * docs/testing.md's examples, run as a reader would run them: its files (each code block after a
 * `<!-- file: name -->` line) in a project of their own, where `mailsend` is this package (the
 * built dist/), run by Vitest. The Playwright example needs Chromium.
 */
import { execa } from "execa";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { baseEnv, ROOT } from "../helpers/cli.js";
import { scratch } from "../helpers/tmp.js";
import { chromium, lacks } from "../helpers/tools.js";

const tmp = scratch("mailsend-testing-doc-");
afterAll(() => tmp.remove());

/** The doc's files by name. */
function docFiles(): Map<string, string> {
  const text = readFileSync(join(ROOT, "docs", "testing.md"), "utf8");
  const files = new Map<string, string>();
  for (const m of text.matchAll(/<!-- file: (\S+) -->\n```\w*\n([\s\S]*?)\n```/g)) files.set(m[1]!, `${m[2]!}\n`);
  return files;
}

/** A project holding the doc's files, with `mailsend`, `vitest` and `playwright-core` installed as links. */
function project(): string {
  const dir = join(tmp.dir, "project");
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  symlinkSync(ROOT, join(dir, "node_modules", "mailsend"));
  for (const dep of ["vitest", "playwright-core"])
    symlinkSync(join(ROOT, "node_modules", dep), join(dir, "node_modules", dep));
  writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n');
  for (const [name, code] of docFiles()) writeFileSync(join(dir, name), code);
  return dir;
}

describe("docs/testing.md", () => {
  it("has the app, the Vitest test and the Playwright test", () => {
    expect([...docFiles().keys()]).toEqual(["app.ts", "password-reset.test.ts", "password-reset.browser.test.ts"]);
  });

  const dir = project();
  const vitest = (file: string, env: Record<string, string> = {}) =>
    execa(process.execPath, [join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--root", dir, file], {
      cwd: dir,
      env: { ...baseEnv(), ...env },
      extendEnv: false,
      reject: false,
      timeout: 120_000,
      all: true,
    });

  it("its Vitest example passes", async () => {
    const r = await vitest("password-reset.test.ts");
    expect(r.exitCode, r.all).toBe(0);
    expect(r.all).toMatch(/2 passed/);
  });

  it.skipIf(lacks(chromium))("its Playwright example passes", async () => {
    const r = await vitest("password-reset.browser.test.ts", { CHROMIUM_PATH: chromium.path! });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.all).toMatch(/1 passed/);
  });
});
