/**
 * What a start of the sandbox made in its data dir, so that a start that
 * fails (a port taken, a damaged file) takes back exactly that: the next
 * start is then a first start again, with the key printed. Whatever existed
 * before the start, made by an earlier one, is never touched.
 */
import { existsSync, rmdirSync, unlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import type { SandboxPaths } from "./paths.js";

export interface CreatedByStart {
  /** Note what exists now (call it with the data dir's lock held); remove() spares it. */
  snapshot(): void;
  /** The first directory that making the data dir created (mkdir -p's answer), if it made one. */
  madeDir(first: string | undefined): void;
  /** Remove what was not there at the last snapshot (or when createdByStart() was called). Never throws. */
  remove(): void;
  /** Remove the data dir and the parents this start made, where they are empty (after the lock file is gone). */
  removeEmptyDirs(): void;
}

/** Files and directories a start may make, a directory before what is in it. */
function startOutputs(paths: SandboxPaths): Array<{ path: string; dir: boolean }> {
  return [
    { path: paths.tls, dir: true },
    ...["ca.pem", "cert.pem", "key.pem"].map((f) => ({ path: join(paths.tls, f), dir: false })),
    { path: paths.keys, dir: false },
    { path: paths.apiKeyFile, dir: false },
    { path: paths.messages, dir: true },
    { path: paths.index, dir: false },
  ];
}

export function createdByStart(paths: SandboxPaths): CreatedByStart {
  const outputs = startOutputs(paths);
  const existing = () => new Set(outputs.filter((o) => existsSync(o.path)).map((o) => o.path));
  let before = existing();
  let firstMadeDir: string | undefined;
  return {
    snapshot() {
      before = existing();
    },
    madeDir(first) {
      firstMadeDir = first;
    },
    remove() {
      for (const o of [...outputs].reverse()) {
        if (before.has(o.path)) continue;
        try {
          if (o.dir) rmdirSync(o.path);
          else unlinkSync(o.path);
        } catch {
          // Not made after all, or (a directory) someone else put a file in it: leave it.
        }
      }
      this.removeEmptyDirs();
    },
    removeEmptyDirs() {
      if (firstMadeDir === undefined) return;
      // The data dir and the parents mkdir -p made for it, deepest first, each only if empty.
      for (let d = paths.dir; ; d = dirname(d)) {
        try {
          rmdirSync(d);
        } catch {
          return;
        }
        if (d === firstMadeDir || dirname(d) === d) return;
      }
    },
  };
}
