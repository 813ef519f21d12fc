/**
 * `npm run demo` (scripts/demo.mjs, on the built CLI): it sends over both channels, shows the
 * inbox, and ends with the next step to take, never with variables for the sandbox it removed.
 */
import { execa } from "execa";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { baseEnv, ROOT } from "../helpers/cli.js";

const DEMO = fileURLToPath(new URL("../../scripts/demo.mjs", import.meta.url));

it("runs through and ends with the next step, printing no export line for its removed sandbox", async () => {
  const r = await execa(process.execPath, [DEMO], {
    env: baseEnv(),
    extendEnv: false,
    cwd: ROOT,
    reject: false,
    timeout: 60_000,
    stdin: "ignore",
  });
  expect(r.exitCode, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^sent \S+ \(rest, to you@example\.com\)$/m);
  expect(r.stdout).toMatch(/^sent \S+ \(smtp, to you@example\.com\)$/m);
  expect(r.stdout).toMatch(/Sandbox stopped \(exit 0\); its data dir is removed/);
  expect(r.stdout).not.toMatch(/^\s*export \w+=/m);
  // The last words say what to run next: mailsend on PATH, then a sandbox of one's own.
  const tail = r.stdout.slice(r.stdout.lastIndexOf("Sandbox stopped"));
  expect(tail).toMatch(/`npm link`/);
  expect(tail).toMatch(/run `mailsend sandbox`/);
}, 60_000);
