/**
 * The one whole-file write (src/core/atomic.ts): the new content whole, the mode asked for, no temp
 * file left whether it worked or not, and the file system's own error for the caller to word.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeFileAtomic, writeFileAtomicAsync } from "../../src/core/atomic.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-atomic-");
afterAll(() => tmp.remove());

let n = 0;
const dir = () => {
  const d = join(tmp.dir, `d${n++}`);
  mkdirSync(d);
  writeFileSync(join(d, ".keep"), "");
  return d;
};

describe("writeFileAtomic", () => {
  it("replaces the file whole, 0600 unless told, and leaves nothing else", () => {
    const d = dir();
    const path = join(d, "f.json");
    writeFileSync(path, "old old old old");
    writeFileAtomic(path, "new\n");
    expect(readFileSync(path, "utf8")).toBe("new\n");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    writeFileAtomic(path, [Buffer.from("a"), Buffer.from("b")], { mode: 0o644, durable: false });
    expect(readFileSync(path, "utf8")).toBe("ab");
    expect(statSync(path).mode & 0o777).toBe(0o644 & ~process.umask());
    expect(readdirSync(d).sort()).toEqual([".keep", "f.json"]);
  });

  it("a write that cannot be made throws the file system's error (its code), and leaves no temp file", () => {
    const d = dir();
    // A directory where the file goes: the rename fails after the temp file was written.
    mkdirSync(join(d, "taken"));
    writeFileSync(join(d, "taken", "x"), "");
    let err: NodeJS.ErrnoException | undefined;
    try {
      writeFileAtomic(join(d, "taken"), "x");
    } catch (e) {
      err = e as NodeJS.ErrnoException;
    }
    expect(err?.code).toMatch(/^E(ISDIR|EXIST|NOTEMPTY)$/);
    expect(readdirSync(d).sort()).toEqual([".keep", "taken"]);
    expect(() => writeFileAtomic(join(d, "missing", "f"), "x")).toThrow(expect.objectContaining({ code: "ENOENT" }));
  });
});

describe("writeFileAtomicAsync", () => {
  it("writes through tmpDir, and a gate that refuses keeps the file out (its reason thrown as it is), leaving no temp file", async () => {
    const d = dir();
    const t = dir();
    const path = join(d, "m.msg");
    await writeFileAtomicAsync(path, [Buffer.from("head\n"), Buffer.from("body")], {
      tmpDir: t,
      gate: Promise.resolve(),
    });
    expect(readFileSync(path, "utf8")).toBe("head\nbody");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const no = new Error("refused");
    const other = join(d, "n.msg");
    await expect(writeFileAtomicAsync(other, "x", { tmpDir: t, gate: Promise.reject(no) })).rejects.toBe(no);
    expect(existsSync(other)).toBe(false);
    expect(readdirSync(t)).toEqual([".keep"]);
  });
});
