import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync, spawnSync } from "node:child_process";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CACHE_COMMANDS, cacheCommand, cacheDir, EARLY_MS, optimisationDelay, V8_11_INTERRUPT_BUDGET, V8_12_MAGLEV_CALLS, V8_12_TURBOFAN_CALLS } from "../../src/cli/code-cache.js";

// src/cli/code-cache.ts as bin/mailsend.js uses it: bundled to CommonJS, installed in a fresh
// Node process, which then requires CommonJS files of a small "dist" and prints what it counted
// and what the files returned.
let work: string;
let loader: string;
let dist: string;
let driver: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "mailsend-code-cache-"));
  loader = join(work, "code-cache.cjs");
  await build({ entryPoints: [new URL("../../src/cli/code-cache.ts", import.meta.url).pathname], outfile: loader, bundle: true, format: "cjs", platform: "node", logLevel: "error" });
  dist = join(work, "dist");
  mkdirSync(dist);
  writeFileSync(join(dist, "a.js"), 'const b = require("./b.js");\nexports.value = () => `a+${b.value()}` + require("node:path").sep;\n');
  writeFileSync(join(dist, "b.js"), 'exports.value = () => "b1";\n');
  // Not under the root: Node compiles it itself.
  writeFileSync(join(work, "outside.js"), 'exports.value = () => "outside";\n');
  driver = join(work, "driver.cjs");
  writeFileSync(
    driver,
    `const cc = require(${JSON.stringify(loader)});
const [dist, dir, command, build] = process.argv.slice(2);
const [delay, stay] = [process.env.DELAY === "1" && cc.delayOptimisation(command), Number(process.env.STAY ?? 0)];
const stats = cc.installCodeCache(dist, dir, command, build, ...(process.env.NODEV ? [process.env.NODEV] : []));
if (stay) setTimeout(() => {}, stay);
const value = require(dist + "/a.js").value() + " " + require(${JSON.stringify(join(work, "outside.js"))}).value();
const http = process.moduleLoadList.includes("NativeModule http");
if (process.env.EXIT) process.exitCode = Number(process.env.EXIT);
process.on("exit", () => console.log(JSON.stringify({ value, ...stats, ...(delay ? { delayed: true, http } : {}) })));
`,
  );
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

function run(dir: string, command = "send", buildId = "b1", env: Record<string, string> = {}): { value: string; used: number; refused: number; missing: number; written: number; delayed?: true; http?: boolean } {
  const out = spawnSync(process.execPath, [driver, dist, dir, command, buildId], { encoding: "utf8", env: { ...process.env, ...env } });
  return JSON.parse(out.stdout);
}

describe("code cache (src/cli/code-cache.ts)", () => {
  it("writes a cache for each file the first time, and the next run compiles from it", () => {
    const dir = join(work, "cache-1", "nested", "code");
    const first = run(dir);
    expect(first).toEqual({ value: "a+b1/ outside", used: 0, refused: 0, missing: 2, written: 2 });
    expect(readdirSync(dir)).toHaveLength(2);
    // Compiled code of the user's files only: a directory and files no one else can read.
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(dir)) expect(statSync(join(dir, f)).mode & 0o777).toBe(0o600);
    expect(run(dir)).toEqual({ value: "a+b1/ outside", used: 2, refused: 0, missing: 0, written: 0 });
  });

  it("a run that exits non-zero writes no cache (it ran little of its command); the next one that succeeds does", () => {
    const dir = join(work, "cache-failed");
    expect(run(dir, "send", "b1", { EXIT: "78" })).toMatchObject({ missing: 2, written: 0 });
    expect(existsSync(dir) ? readdirSync(dir) : []).toHaveLength(0);
    expect(run(dir)).toMatchObject({ missing: 2, written: 2 });
    expect(run(dir)).toMatchObject({ used: 2 });
  });

  it("keeps one cache per command, and another build or a changed file is not given an old cache", () => {
    const dir = join(work, "cache-2");
    run(dir, "send");
    expect(run(dir, "batch")).toMatchObject({ used: 0, missing: 2, written: 2 });
    expect(run(dir, "send")).toMatchObject({ used: 2 });
    expect(run(dir, "send", "b2")).toMatchObject({ used: 0, missing: 2, written: 2 });
    // Same length, new content: the file's stamp (mtime) differs, so its old cache is not used.
    writeFileSync(join(dist, "b.js"), 'exports.value = () => "b2";\n');
    try {
      expect(run(dir, "send", "b2")).toEqual({ value: "a+b2/ outside", used: 1, refused: 0, missing: 1, written: 1 });
    } finally {
      writeFileSync(join(dist, "b.js"), 'exports.value = () => "b1";\n');
    }
  });

  it("keeps one cache per Node version: two Nodes taking turns do not rewrite each other's", () => {
    const dir = join(work, "cache-nodes");
    // The version only names and stamps the cache here (V8 is this Node's either way).
    const [v20, v24] = [{ NODEV: "v20.99.0" }, { NODEV: "v24.99.0" }];
    expect(run(dir, "send", "b1", v20)).toMatchObject({ missing: 2, written: 2 });
    expect(run(dir, "send", "b1", v24)).toMatchObject({ missing: 2, written: 2 });
    expect(run(dir, "send", "b1", v20)).toMatchObject({ used: 2, written: 0 });
    expect(run(dir, "send", "b1", v24)).toMatchObject({ used: 2, written: 0 });
    expect(readdirSync(dir)).toHaveLength(4);
  });

  it("a cache file that is not one, or cut short, is not used, and the run still works", () => {
    const dir = join(work, "cache-3");
    run(dir);
    const files = readdirSync(dir);
    writeFileSync(join(dir, files[0]!), "garbage");
    writeFileSync(join(dir, files[1]!), "MSC1\u0005\u0000ab");
    expect(run(dir)).toEqual({ value: "a+b1/ outside", used: 0, refused: 0, missing: 2, written: 2 });
    expect(run(dir)).toMatchObject({ used: 2 });
  });

  it("V8's own check refuses a cache of other bytes with a matching header, and the file runs from source", () => {
    const dir = join(work, "cache-4");
    run(dir);
    for (const f of readdirSync(dir)) {
      const path = join(dir, f);
      const b = execFileSync(process.execPath, ["-e", `const b=require("fs").readFileSync(${JSON.stringify(path)}); const n=6+b.readUInt16LE(4); b.fill(7, n); process.stdout.write(b.toString("base64"))`], { encoding: "utf8" });
      writeFileSync(path, Buffer.from(b, "base64"));
    }
    expect(run(dir)).toEqual({ value: "a+b1/ outside", used: 0, refused: 2, missing: 0, written: 2 });
    expect(run(dir)).toMatchObject({ used: 2, refused: 0 });
  });

  it("a cache directory that cannot be made or written means no cache, and no error", () => {
    if (process.getuid?.() === 0) {
      // root writes anywhere: a path under a regular file cannot be made even so.
      const file = join(work, "a-file");
      writeFileSync(file, "x");
      expect(run(join(file, "code"))).toEqual({ value: "a+b1/ outside", used: 0, refused: 0, missing: 2, written: 0 });
      return;
    }
    const ro = join(work, "read-only");
    mkdirSync(ro);
    chmodSync(ro, 0o500);
    expect(run(join(ro, "code"))).toEqual({ value: "a+b1/ outside", used: 0, refused: 0, missing: 2, written: 0 });
  });

  it("a run that writes a cache removes caches not written for 30 days and stale temporary files", () => {
    const dir = join(work, "cache-5");
    run(dir);
    const day = 24 * 3600;
    const old = join(dir, "old0000.bin");
    const recent = join(dir, "recent00.bin");
    const tmpOld = join(dir, "x.bin.123.tmp");
    const other = join(dir, "not-ours.txt");
    for (const f of [old, recent, tmpOld, other]) writeFileSync(f, "x");
    const now = Date.now() / 1000;
    utimesSync(old, now - 31 * day, now - 31 * day);
    utimesSync(recent, now - 29 * day, now - 29 * day);
    utimesSync(tmpOld, now - 2 * 3600, now - 2 * 3600);
    utimesSync(other, now - 99 * day, now - 99 * day);
    // A run that finds its caches writes nothing, and lists nothing.
    expect(run(dir)).toMatchObject({ used: 2, written: 0 });
    expect(readdirSync(dir)).toContain("old0000.bin");
    // One that writes (another command) prunes.
    expect(run(dir, "batch")).toMatchObject({ written: 2 });
    const left = readdirSync(dir);
    expect(left).not.toContain("old0000.bin");
    expect(left).not.toContain("x.bin.123.tmp");
    expect(left).toContain("recent00.bin");
    expect(left).toContain("not-ours.txt");
    expect(left.filter((f) => f.endsWith(".bin"))).toHaveLength(5);
  });

  it("Node 20 to 24: a batch starts with V8 optimising later and reads the caches it wrote; one still going at EARLY_MS writes them then", () => {
    const dir = join(work, "cache-delay");
    const v8 = Number(process.versions.v8.split(".")[0]);
    const delay = { DELAY: "1" };
    const first = run(dir, "batch", "b1", delay);
    expect(first).toMatchObject({ written: 2 });
    // V8 checks a cache against its flags: the next batch, started the same way, uses them all.
    expect(run(dir, "batch", "b1", delay)).toMatchObject({ used: 2, refused: 0, written: 0 });
    // Other commands keep V8's flags (Node's own modules' compiled code is then used).
    expect(run(dir, "send", "b1", delay).delayed).toBeUndefined();
    if (v8 >= 11 && v8 <= 13) {
      expect(first.delayed).toBe(true);
      // Node's own modules a batch needs were loaded before the flags changed (from Node's compiled code).
      expect(first.http).toBe(true);
      // A long run gets V8's default budget back, and writes its caches first: a later batch,
      // long or short, starts under the flags they were made with and uses them.
      const long = { ...delay, STAY: String(EARLY_MS + 300) };
      expect(run(join(work, "cache-delay-long"), "batch", "b1", long)).toMatchObject({ missing: 2, written: 2 });
      expect(run(join(work, "cache-delay-long"), "batch", "b1", long)).toMatchObject({ used: 2, refused: 0, written: 0 });
      expect(run(join(work, "cache-delay-long"), "batch", "b1", delay)).toMatchObject({ used: 2, refused: 0, written: 0 });
    } else {
      // A V8 whose flags were not measured is left as it is.
      expect(first.delayed).toBeUndefined();
    }
  });

  it("which flags a batch changes, on which V8, and when it leaves them alone", () => {
    expect(optimisationDelay("send", "11.3.244.8", "")).toBeUndefined();
    expect(optimisationDelay("batch", "11.3.244.8", "")).toEqual({ early: [`--interrupt-budget=${4 * V8_11_INTERRUPT_BUDGET}`], later: [`--interrupt-budget=${V8_11_INTERRUPT_BUDGET}`] });
    for (const v8 of ["12.4.254.21-node.57", "13.6.233.10-node.28"]) {
      const plan = optimisationDelay("batch", v8, "--max-old-space-size=100");
      expect(plan?.later).toEqual([`--invocation-count-for-maglev=${V8_12_MAGLEV_CALLS}`, `--invocation-count-for-turbofan=${V8_12_TURBOFAN_CALLS}`]);
      expect(plan?.early).toEqual(["--invocation-count-for-maglev=6000", "--invocation-count-for-turbofan=99000"]);
      expect(optimisationDelay("sendmail", v8, "")).toBeUndefined();
    }
    expect(optimisationDelay("batch", "10.2.154.26", "")).toBeUndefined();
    expect(optimisationDelay("batch", "14.1.146.11", "")).toBeUndefined();
    // Flags the user gave on node's command line are theirs.
    expect(optimisationDelay("batch", "11.3.244.8", "--interrupt-budget=1000")).toBeUndefined();
    expect(optimisationDelay("batch", "11.3.244.8", "--interrupt_budget=1000")).toBeUndefined();
    for (const given of ["--no-maglev", "--no_turbofan", "--maglev", "--invocation-count-for-turbofan=10", "--stack-size=2000 --invocation_count_for_maglev=9"]) {
      expect(optimisationDelay("batch", "13.6.233.10", given)).toBeUndefined();
    }
  });

  it("the V8 running here has the defaults a batch gives back (when it is one whose flags a batch changes)", () => {
    const v8 = Number(process.versions.v8.split(".")[0]);
    const plan = optimisationDelay("batch", process.versions.v8, "");
    if (!plan) return expect(v8 < 11 || v8 > 13).toBe(true);
    const options = execFileSync(process.execPath, ["--v8-options"], { encoding: "utf8" });
    for (const flag of plan.later) {
      const [name, value] = flag.slice(2).split("=");
      // V8 prints each flag's default as `default: --name=value`.
      expect(options).toContain(`default: --${name}=${value}`);
    }
  });

  it("names the cache by the command, the sendmail role, or 'other'", () => {
    expect(cacheCommand(["send", "-t", "x"], undefined)).toBe("send");
    // A dry run runs none of the delivery: its cache is its own.
    expect(cacheCommand(["send", "-t", "x", "-n"], undefined)).toBe("send-dry");
    expect(cacheCommand(["send", "--dry-run", "-t", "x"], undefined)).toBe("send-dry");
    expect(cacheCommand(["send", "-t", "x", "--", "-n"], undefined)).toBe("send");
    expect(cacheCommand(["batch", "-n"], undefined)).toBe("batch");
    expect(cacheCommand(["-t", "x"], "sendmail")).toBe("sendmail");
    expect(cacheCommand(["nosuch"], undefined)).toBe("other");
    expect(cacheCommand([], undefined)).toBe("other");
    // Every command of the program has its own (program.ts defines only the one that runs).
    const program = readFileSync(new URL("../../src/cli/program.ts", import.meta.url), "utf8");
    const commands = JSON.parse(/const COMMANDS = (\[[^\]]*\])/.exec(program)![1]!) as string[];
    expect(commands.length).toBeGreaterThan(5);
    for (const c of commands) expect(CACHE_COMMANDS).toContain(c);
  });

  it("lives in the platform's cache directory", () => {
    const there = () => true;
    expect(cacheDir({ HOME: "/home/u" }, "linux", there)).toBe("/home/u/.cache/mailsend/compile-cache");
    expect(cacheDir({ HOME: "/home/u", XDG_CACHE_HOME: "/c" }, "linux", there)).toBe("/c/mailsend/compile-cache");
    expect(cacheDir({ HOME: "/Users/u" }, "darwin", there)).toBe("/Users/u/Library/Caches/mailsend/compile-cache");
    expect(cacheDir({ LOCALAPPDATA: "C:\\L" }, "win32", there)).toBe("C:\\L\\mailsend\\compile-cache");
    expect(cacheDir({}, "linux", there)).toBeUndefined();
    // A home that does not exist (nobody's /nonexistent, as a cron job or a root service may have
    // it) is not made for a cache: no cache. XDG_CACHE_HOME, given, is made as asked.
    expect(cacheDir({ HOME: join(work, "no-such-home") }, "linux")).toBeUndefined();
    expect(cacheDir({ HOME: work }, "linux")).toBe(join(work, ".cache", "mailsend", "compile-cache"));
    expect(cacheDir({ HOME: join(work, "no-such-home"), XDG_CACHE_HOME: join(work, "xdg") }, "linux")).toBe(join(work, "xdg", "mailsend", "compile-cache"));
  });
});
