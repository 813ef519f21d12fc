import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";

// Every file system call the embedding makes, counted (they still reach the real file system).
const calls = vi.hoisted(() => ({ n: 0 }));
vi.mock("node:fs/promises", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs/promises")>();
  const counted =
    <A extends unknown[], R>(fn: (...a: A) => R) =>
    (...a: A): R => {
      calls.n++;
      return fn(...a);
    };
  return {
    ...fs,
    readFile: counted(fs.readFile),
    stat: counted(fs.stat),
    realpath: counted(fs.realpath),
    open: counted(fs.open),
  };
});

const { embedStylesheets } = await import("../../src/compose/styles.js");

const dir = mkdtempSync(join(tmpdir(), "mailsend-styles-reads-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a sheet imported again and again", () => {
  it("is checked and read once: each of 11 sheets imports the next twice (2^10 imports), a few calls per file, not per import", async () => {
    const depth = 10;
    for (let i = 0; i < depth; i++)
      writeFileSync(
        join(dir, `s${i}.css`),
        `@import "s${i + 1}.css";\n@import "s${i + 1}.css" print;\n.c${i} { color: red }\n`,
      );
    writeFileSync(join(dir, `s${depth}.css`), ".end { color: blue }\n");
    calls.n = 0;
    const out = await embedStylesheets('<link rel="stylesheet" href="s0.css"><p>x</p>', dir, dir);
    // Every import is embedded, as a browser applies each.
    expect(out.sheets.length).toBe(2 ** (depth + 1) - 1);
    expect(out.html.split(".end { color: blue }").length - 1).toBe(2 ** depth);
    expect(calls.n).toBeLessThanOrEqual(6 * (depth + 1));
  });
});
