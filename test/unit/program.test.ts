/**
 * The program defines the commands a command line needs: one named command alone (so a run of
 * `send` loads no other command's file), every command for the program's own help, an unknown
 * name, `help` and completion (whose script lists them all).
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/program.js";

const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdin: new PassThrough(), env: {} };
const ALL = [
  "send",
  "batch",
  "run",
  "sandbox",
  "config",
  "inbox",
  "sendmail",
  "queue",
  "doctor",
  "relay",
  "completion",
];

async function defined(argv: string[]): Promise<string[]> {
  const program = await buildProgram({ io, setExit: () => {}, json: false, argv });
  return program.commands.map((c) => c.name());
}

describe("buildProgram", () => {
  it("defines only the command that runs", async () => {
    for (const name of ["send", "batch", "run", "sandbox", "config", "inbox", "queue", "doctor", "relay"]) {
      expect(await defined([name, "--help"])).toEqual([name]);
    }
  });

  it("defines every command, in help order, for the root, help, an unknown name and completion", async () => {
    for (const argv of [[], ["--help"], ["help", "queue"], ["sned"], ["completion", "bash"]]) {
      expect(await defined(argv)).toEqual(ALL);
    }
  });

  it("gives each registration what the context holds: sub-commands included", async () => {
    const program = await buildProgram({ io, setExit: () => {}, json: false, argv: ["queue"] });
    expect(program.commands[0]!.commands.map((c) => c.name())).toEqual(["ls", "run", "retry", "rm", "purge", "check"]);
  });
});
