/**
 * The manual pages (scripts/gen-man.mjs): the set package.json's "man" installs, each renders
 * without a warning, and each names every option its command's --help shows.
 */
import type { Command } from "commander";
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/program.js";
import { SENDMAIL_HELP } from "../../src/cli/commands/sendmail.js";
import { ROOT } from "../helpers/cli.js";
import { scratch } from "../helpers/tmp.js";

const out = scratch("mailsend-man-");
afterAll(() => out.remove());
execFileSync(process.execPath, [join(ROOT, "scripts/gen-man.mjs"), out.dir, "--quiet"], { stdio: "inherit" });
const page = (file: string) => readFileSync(join(out.dir, file), "utf8");

const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdin: new PassThrough(), env: {} };
const program = await buildProgram({ io, setExit: () => {}, json: false, argv: [] });
const visibleCommands = (cmd: Command) =>
  cmd
    .createHelp()
    .visibleCommands(cmd)
    .filter((c) => c.name() !== "help");

/** Each flag as the page writes it: bold, with its dashes as roff minus signs. */
const roffFlag = (flag: string) => `\\fB${flag.replace(/-/g, "\\-")}\\fR`;

/** The flags of a command's --help and of its sub-commands' (they share its page). */
function helpFlags(cmd: Command): string[] {
  const own = cmd
    .createHelp()
    .visibleOptions(cmd)
    .flatMap((o) => [o.short, o.long].filter((f): f is string => !!f));
  return [...own, ...visibleCommands(cmd).flatMap(helpFlags)];
}

// Under CI every tool the suite drives is installed, so a missing one is a failure there.
// (A shared helper for this is coming in test/helpers/tools.ts; this is the local form of it.)
const groff = spawnSync("groff", ["--version"]).status === 0;
if (!groff && process.env.CI !== "true")
  console.log("skipping the man page rendering check: groff is not installed (apt-get install groff-base)");

describe("man pages", () => {
  it("are the pages package.json's man field installs", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { man: string[] };
    expect(readdirSync(out.dir).sort()).toEqual(pkg.man.map((p) => p.replace(/^\.\/dist\/man\//, "")).sort());
    expect(pkg.man).toContain("./dist/man/mailsend-sendmail.8");
    for (const c of visibleCommands(program)) expect(pkg.man).toContain(`./dist/man/mailsend-${c.name()}.1`);
  });

  it.runIf(groff || process.env.CI === "true").each(readdirSync(out.dir).sort())(
    "%s renders without warnings",
    (file) => {
      expect(groff, "groff is not installed (apt-get install groff-base)").toBe(true);
      const r = spawnSync("groff", ["-man", "-Tutf8", "-ww", "-z", join(out.dir, file)], { encoding: "utf8" });
      expect(r.status).toBe(0);
      expect(r.stderr).toBe("");
    },
  );

  it.each(visibleCommands(program).map((c) => [c.name(), c] as const))(
    "mailsend-%s(1) names every option of its --help",
    (name, cmd) => {
      const text = page(`mailsend-${name}.1`);
      const missing = helpFlags(cmd).filter((f) => !text.includes(roffFlag(f)));
      expect(missing).toEqual([]);
    },
  );

  it("mailsend(1) lists every command and its page", () => {
    const text = page("mailsend.1");
    for (const c of visibleCommands(program)) {
      expect(text).toContain(`.B mailsend ${c.name()}`);
      expect(text).toContain(`.BR \\%mailsend-${c.name()} (1)`);
    }
    for (const f of program
      .createHelp()
      .visibleOptions(program)
      .flatMap((o) => [o.short, o.long]))
      expect(text).toContain(roffFlag(f!));
  });

  it("mailsend-sendmail(8) names every option of sendmail --help, and each mode", () => {
    const text = page("mailsend-sendmail.8");
    const options = SENDMAIL_HELP.slice(SENDMAIL_HELP.indexOf("\nOptions"), SENDMAIL_HELP.indexOf("\nLocal names"));
    const flags = [...new Set(options.match(/(?<=^|[\s,])--?[A-Za-z][\w-]*/g) ?? [])];
    expect(flags.length).toBeGreaterThan(20);
    const missing = flags.filter((f) => !text.includes(f.replace(/-/g, "\\-")));
    expect(missing).toEqual([]);
    for (const mode of ["mailq", "newaliases", "\\-bp", "\\-bs", "\\-bi", "\\-q"]) expect(text).toContain(mode);
  });

  it("escapes roff: no line of text starts with a dot or quote it did not mean", () => {
    for (const file of readdirSync(out.dir)) {
      for (const line of page(file).split("\n")) {
        if (/^[.']/.test(line))
          expect(line, `${file}: ${line}`).toMatch(/^\.(\\"|TH|SH|SS|TP|PP|IP|B|BR|I|EX|EE|br|nh|ad)( |$)/);
      }
    }
  });
});
