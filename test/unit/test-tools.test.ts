/**
 * The programs the tests drive are named twice, in test/helpers/tools.ts (to skip or fail without
 * one) and in .ci/tools (to install them): every package the helper names is one the script installs.
 */
import { readFileSync } from "node:fs";
import { expect, test } from "vitest";
import { ROOT } from "../helpers/cli.js";
import * as tools from "../helpers/tools.js";

test("every package test/helpers/tools.ts names, .ci/tools installs", () => {
  const script = readFileSync(`${ROOT}/.ci/tools`, "utf8");
  const installed = new Set([...script.matchAll(/need\+=\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(/\s+/)));
  const named = Object.values(tools).filter((v): v is tools.Tool => typeof v === "object" && v !== null && "pkg" in v);
  expect(named.length).toBeGreaterThan(10);
  for (const t of named.filter((t) => t.fetchedBy === undefined)) {
    for (const pkg of t.pkg.split(" ")) expect(installed, `${t.name}: ${pkg}`).toContain(pkg);
  }
});
