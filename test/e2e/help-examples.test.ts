/**
 * Every command's --help ends with examples: the built binary's help for the
 * root and for each command of the program (found by walking it, so a new
 * command is checked without adding it here) ends with an "Examples:"
 * section of indented `mailsend ...` lines.
 */
import type { Command } from "commander";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/program.js";
import { runCli, runInProcess } from "../helpers/cli.js";

function commandPaths(cmd: Command, prefix: string[] = []): string[][] {
  return cmd.commands.flatMap((sub) => {
    const path = [...prefix, sub.name()];
    return [path, ...commandPaths(sub, path)];
  });
}

const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdin: new PassThrough(), env: {} };
const paths: string[][] = [[], ...commandPaths(await buildProgram({ io, setExit: () => {}, json: false, argv: [] }))];

/** The lines after the last "Examples:" heading, if the help ends with that section. */
function closingExamples(help: string): string[] | undefined {
  const lines = help.replace(/\s+$/, "").split("\n");
  const at = lines.lastIndexOf("Examples:");
  if (at < 0) return undefined;
  const after = lines.slice(at + 1);
  // Only examples (indented) and blank lines between them: no other section follows.
  if (!after.every((l) => l === "" || l.startsWith("  "))) return undefined;
  return after.filter((l) => l.trim() !== "");
}

describe("--help ends with examples", () => {
  it("covers the commands of this issue", () => {
    const names = paths.map((p) => p.join(" "));
    for (const c of [
      "send",
      "batch",
      "sandbox",
      "sandbox keys",
      "sandbox keys add",
      "sandbox keys list",
      "sandbox keys revoke",
      "inbox",
      "inbox show",
      "doctor",
      "completion",
    ]) {
      expect(names).toContain(c);
    }
  });

  it.each(paths.map((p) => [p.length ? p.join(" ") : "(root)", p] as const))(
    "mailsend %s --help",
    async (_name, path) => {
      // mailsend sendmail is the sendmail personality, which main() runs before the program.
      const r = await (path[0] === "sendmail" ? runCli : runInProcess)([...path, "--help"]);
      expect(r.exitCode, r.stderr).toBe(0);
      const examples = closingExamples(r.stdout);
      expect(
        examples,
        `the help of "mailsend ${path.join(" ")}" does not end with an Examples section:\n${r.stdout}`,
      ).toBeDefined();
      const commands = examples!.filter((l) => /^\s+(\S+ \| )?mailsend\b|^\s+source <\(mailsend\b/.test(l));
      expect(commands.length).toBeGreaterThanOrEqual(1);
      // The examples of a subcommand use it.
      if (path.length) expect(commands.some((l) => l.includes(`mailsend ${path.join(" ")}`))).toBe(true);
    },
  );
});
