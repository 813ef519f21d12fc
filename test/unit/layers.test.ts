/**
 * The rooms of src/ import downwards only, in the order docs/internals.md draws them, and no
 * files import each other in a circle: a change to a lower room never needs one above it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src", import.meta.url));

/** Top to bottom: a room may import from the rooms after it. */
const ROOMS = [
  "index.ts",
  "cli",
  "api",
  "doctor",
  "relay",
  "run",
  "batch",
  "outbox",
  "limits",
  "transports",
  "net",
  "message",
  "compose",
  "sendmail",
  "settings",
  "sandbox",
  "core",
] as const;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** Each file (relative to src/) and the files of the house it imports, statically or by import(). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const specifier = /(?:^|\s)(?:import|export)\s[^;]*?\sfrom\s+["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/g;
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, "utf8");
    const deps = [...text.matchAll(specifier)].map((m) =>
      relative(SRC, resolve(dirname(file), (m[1] ?? m[2])!)).replace(/\.js$/, ".ts"),
    );
    graph.set(relative(SRC, file), deps);
  }
  return graph;
}

const roomOf = (file: string) => (file.includes("/") ? file.slice(0, file.indexOf("/")) : file);

/** Strongly connected groups of more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) found.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe("the rooms of src/", () => {
  const graph = importGraph();

  it("are the rooms docs/internals.md lists", () => {
    const rooms = new Set([...graph.keys()].map(roomOf));
    expect([...rooms].filter((r) => !(ROOMS as readonly string[]).includes(r))).toEqual([]);
  });

  it("import only from the rooms below them", () => {
    const upward: string[] = [];
    for (const [file, deps] of graph) {
      const from = ROOMS.indexOf(roomOf(file) as (typeof ROOMS)[number]);
      for (const dep of deps) {
        const to = ROOMS.indexOf(roomOf(dep) as (typeof ROOMS)[number]);
        if (to !== from && to < from) upward.push(`${file} -> ${dep}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it("have no files that import each other, directly or round a circle", () => {
    expect(circles(graph)).toEqual([]);
  });
});
