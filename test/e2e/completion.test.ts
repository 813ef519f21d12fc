/**
 * `mailsend completion <shell>`: the bash script run in a real bash (execa,
 * async) completing commands, options, choices and files as a user's Tab
 * would; the zsh and fish scripts run in real zsh and fish (installed by
 * .ci/run) the same way. The options offered come from the same tables as the
 * commands, so a test compares them.
 */
import { execa } from "execa";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOCTOR_OPTIONS, SEND_OPTIONS, type OptionSpec } from "../../src/cli/options.js";
import { runInProcess } from "../helpers/cli.js";
import { scratch } from "../helpers/tmp.js";
import { fish as fishTool, lacks, zsh as zshTool } from "../helpers/tools.js";

const tmp = scratch("mailsend-completion-");
let bashScript: string;

beforeAll(async () => {
  const r = await runInProcess(["completion", "bash"]);
  expect(r.exitCode, r.stderr).toBe(0);
  bashScript = tmp.file("mailsend.bash", r.stdout);
});
afterAll(() => tmp.remove());

/**
 * What bash offers for the line typed so far (words split as readline does;
 * the last word is the one being completed, "" after a space).
 */
async function complete(words: string[], cwd = tmp.dir): Promise<string[]> {
  const driver = `
source ${JSON.stringify(bashScript)}
COMP_WORDS=("$@")
COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$*"
COMP_POINT=\${#COMP_LINE}
_mailsend
printf '%s\\n' "\${COMPREPLY[@]}"
`;
  const r = await execa("bash", ["--norc", "--noprofile", "-c", driver, "bash", ...words], { cwd, reject: false });
  expect(r.exitCode, r.stderr).toBe(0);
  expect(r.stderr).toBe("");
  return r.stdout.split("\n").filter((l) => l !== "");
}

const longFlags = (specs: readonly OptionSpec[]) =>
  specs.map((o) => o.flags.split(/[ ,]+/).find((f) => f.startsWith("--"))!);

describe("bash", () => {
  it("is valid bash and registers itself for mailsend", async () => {
    expect((await execa("bash", ["-n", bashScript], { reject: false })).exitCode).toBe(0);
    const r = await execa("bash", [
      "--norc",
      "--noprofile",
      "-c",
      `source ${JSON.stringify(bashScript)} && complete -p mailsend`,
    ]);
    expect(r.stdout).toBe("complete -F _mailsend mailsend");
  });

  it("completes a command: mailsend se -> send", async () => {
    expect(await complete(["mailsend", "se"])).toEqual(["send"]);
  });

  it("completes an option: mailsend send --tr -> --transport", async () => {
    expect(await complete(["mailsend", "send", "--tr"])).toEqual(["--transport"]);
  });

  it("offers an option's choices: mailsend send --transport <Tab> -> rest smtp auto", async () => {
    expect(await complete(["mailsend", "send", "--transport", ""])).toEqual(["rest", "smtp", "auto"]);
    // --transport=<Tab>: bash splits the word at "=".
    expect(await complete(["mailsend", "send", "--transport", "=", "sm"])).toEqual(["smtp"]);
    expect(await complete(["mailsend", "doctor", "--smtp-tls", ""])).toEqual(["starttls", "implicit"]);
    expect(await complete(["mailsend", "batch", "--format", ""])).toEqual(["jsonl", "json", "csv"]);
  });

  it("lists every command, and the subcommands under sandbox keys and inbox", async () => {
    const top = await complete(["mailsend", ""]);
    for (const c of ["send", "batch", "sandbox", "inbox", "doctor", "completion"]) expect(top).toContain(c);
    expect(await complete(["mailsend", "sandbox", "keys", ""])).toEqual(
      expect.arrayContaining(["add", "list", "revoke"]),
    );
    // An option of sandbox (and its value) before the subcommand does not lose the place.
    expect(await complete(["mailsend", "sandbox", "--dir", "/tmp", "keys", "re"])).toEqual(["revoke"]);
    expect(await complete(["mailsend", "inbox", "s"])).toEqual(["show"]);
    expect(await complete(["mailsend", "sandbox", "keys", "add", "--"])).toEqual(
      expect.arrayContaining(["--label", "--expires", "--save", "--dir", "--json"]),
    );
  });

  it("offers exactly the option table's flags (no drift)", async () => {
    const send = await complete(["mailsend", "send", "--"]);
    for (const f of longFlags(SEND_OPTIONS)) expect(send).toContain(f);
    const doctor = await complete(["mailsend", "doctor", "--"]);
    for (const f of longFlags(DOCTOR_OPTIONS)) expect(doctor).toContain(f);
    expect(doctor).not.toContain("--subject");
  });

  it("completes file arguments: --attach, --html-file, --ca-file, batch's <file>; directories for --dir", async () => {
    const dir = tmp.dir;
    writeFileSync(join(dir, "report.html"), "<p>x</p>");
    writeFileSync(join(dir, "rows.csv"), "to\n");
    expect(await complete(["mailsend", "send", "--attach", "rep"], dir)).toEqual(["report.html"]);
    expect(await complete(["mailsend", "send", "--html-file", "rep"], dir)).toEqual(["report.html"]);
    expect(await complete(["mailsend", "doctor", "--ca-file", "rep"], dir)).toEqual(["report.html"]);
    expect(await complete(["mailsend", "batch", "ro"], dir)).toEqual(["rows.csv"]);
    expect(await complete(["mailsend", "batch", "-s", "Hi", "ro"], dir)).toEqual(["rows.csv"]);
    // A value that is not a file is not completed as one.
    expect(await complete(["mailsend", "send", "--subject", "rep"], dir)).toEqual([]);
    expect(await complete(["mailsend", "sandbox", "--dir", "/tm"])).toEqual(["/tmp"]);
  });

  it("completes the shells of mailsend completion, and nothing once one is given", async () => {
    expect(await complete(["mailsend", "completion", ""])).toEqual(["bash", "zsh", "fish"]);
    // Only its options are left to offer.
    expect(await complete(["mailsend", "completion", "bash", ""])).toEqual(["-h", "--help"]);
  });

  it("config get/set/unset offer the setting names; set's value is not offered them again", async () => {
    const set = await complete(["mailsend", "config", "set", ""]);
    expect(set).toEqual(expect.arrayContaining(["profile", "base_url", "smtp_host", "api_key_env", "rate_limit"]));
    expect(await complete(["mailsend", "config", "set", "smtp_h"])).toEqual(["smtp_host"]);
    expect(await complete(["mailsend", "config", "set", "--profile", "work", "base"])).toEqual(["base_url"]);
    expect(await complete(["mailsend", "config", "unset", "api_key_"])).toEqual(["api_key_env", "api_key_file"]);
    expect(await complete(["mailsend", "config", "set", "base_url", ""])).not.toContain("base_url");
  });
});

describe("zsh and fish", () => {
  it("zsh: a #compdef script covering the commands, options and choices", async () => {
    const r = await runInProcess(["completion", "zsh"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1000);
    expect(r.stdout.startsWith("#compdef mailsend\n")).toBe(true);
    expect(r.stdout).toContain("compdef _mailsend mailsend");
    for (const c of [
      "'send:send one message'",
      "'doctor:",
      "'completion:",
      "'sandbox keys')",
      "'--transport:rest or smtp'",
    ])
      expect(r.stdout).toContain(c);
    expect(r.stdout).toContain("'send|--transport') REPLY='choice rest smtp auto'");
    expect(r.stdout).toMatch(/'send\|--html-file'[^)]*\) REPLY='file'/);
    const zsh = zshTool.path;
    if (zsh) {
      const f = tmp.file("_mailsend", r.stdout);
      expect((await execa(zsh, ["-n", f], { reject: false })).exitCode).toBe(0);
    }
  });

  it("fish: complete lines for commands, options, choices and files", async () => {
    const r = await runInProcess(["completion", "fish"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1000);
    const lines = r.stdout.split("\n");
    expect(lines).toContain("complete -c mailsend -f");
    expect(r.stdout).toContain("complete -c mailsend -n '__mailsend_at \\'\\' 0' -a 'send' -d 'send one message'");
    expect(r.stdout).toContain(
      "complete -c mailsend -n '__mailsend_at \\'send\\'' -l transport -x -a 'rest smtp auto' -d 'rest, smtp, or auto",
    );
    expect(r.stdout).toContain(
      "complete -c mailsend -n '__mailsend_at \\'batch\\'' -l transport -x -a 'rest smtp auto' -d 'rest, smtp, or auto: for each row",
    );
    expect(r.stdout).toContain(
      "complete -c mailsend -n '__mailsend_at \\'doctor\\'' -l transport -x -a 'rest smtp' -d 'rest or smtp'",
    );
    expect(r.stdout).toContain("complete -c mailsend -n '__mailsend_at \\'send\\'' -s a -l attach -r -F");
    expect(r.stdout).toContain("complete -c mailsend -n '__mailsend_at \\'sandbox keys\\' 0' -a 'revoke'");
    expect(r.stdout).toContain("complete -c mailsend -n '__mailsend_at \\'batch\\' 0' -F");
    // Every function the conditions call is defined.
    for (const fn of ["__mailsend_at", "__mailsend_where", "__mailsend_optarg", "__mailsend_commands"])
      expect(r.stdout).toContain(`function ${fn}`);
    const fish = fishTool.path;
    if (fish) {
      const f = tmp.file("mailsend.fish", r.stdout);
      expect((await execa(fish, ["--no-execute", f], { reject: false })).exitCode).toBe(0);
    }
  });

  // The completion logic run for real in each shell (.ci/run installs both).
  // zsh: compsys's own builtins (_describe, compadd, _files) are stood in for by
  // functions that print what they are given, so what runs is our script's code.
  // fish: `complete -C` asks fish itself what Tab would offer.
  describe.skipIf(lacks(zshTool))("zsh, run", () => {
    let script: string;
    let driver: string;
    beforeAll(async () => {
      script = tmp.file("_mailsend.zsh", (await runInProcess(["completion", "zsh"])).stdout);
      driver = tmp.file(
        "zdrive.zsh",
        [
          "compdef() { :; }",
          '_describe() { local arr=${@[-1]}; print -l -- "${(@P)arr}"; }',
          'compadd() { local arr=${@[-1]}; print -l -- "${(@P)arr}"; }',
          "_files() { if [[ $1 == -/ ]]; then print DIRS; else print FILES; fi; }",
          "compset() { return 0; }",
          '_message() { print "MESSAGE:$1"; }',
          "source $1; shift",
          'words=("$@"); CURRENT=${#words}',
          "_mailsend",
        ].join("\n"),
      );
    });
    const zcomplete = async (...words: string[]) => {
      const r = await execa(zshTool.path!, ["-f", driver, script, ...words], { reject: false });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
      return r.stdout.split("\n").filter(Boolean);
    };

    it("registers itself with compinit, sourced or from $fpath (the README's two ways)", async () => {
      const zsh = zshTool.path!;
      const fp = join(tmp.dir, "fpath");
      mkdirSync(fp, { recursive: true });
      writeFileSync(join(fp, "_mailsend"), readFileSync(script));
      const init = `autoload -U compinit; compinit -u -d ${join(tmp.dir, "zcompdump")}`;
      expect((await execa(zsh, ["-f", "-c", `${init}; source ${script}; print -r -- $_comps[mailsend]`])).stdout).toBe(
        "_mailsend",
      );
      expect(
        (await execa(zsh, ["-f", "-c", `fpath=(${fp} $fpath); ${init}-2; print -r -- $_comps[mailsend]`])).stdout,
      ).toBe("_mailsend");
    });

    it("completion bash <Tab> offers no shell again; config set <Tab> offers the setting names", async () => {
      expect(await zcomplete("mailsend", "completion", "")).toEqual(["bash", "zsh", "fish"]);
      const after = await zcomplete("mailsend", "completion", "bash", "");
      for (const shell of ["bash", "zsh", "fish"]) expect(after).not.toContain(shell);
      expect(await zcomplete("mailsend", "config", "set", "")).toEqual(
        expect.arrayContaining(["profile", "base_url", "smtp_host", "api_key_file"]),
      );
      expect(await zcomplete("mailsend", "config", "set", "base_url", "")).not.toContain("base_url");
    });

    it("offers the commands with their descriptions, and the subcommands of sandbox keys", async () => {
      expect(await zcomplete("mailsend", "se")).toContain("send:send one message");
      expect((await zcomplete("mailsend", "sandbox", "keys", "")).map((l) => l.split(":")[0])).toEqual(
        expect.arrayContaining(["add", "list", "revoke"]),
      );
    });

    it("offers send's options, an option's choices, and files where a file goes", async () => {
      const options = (await zcomplete("mailsend", "send", "--tr")).map((l) => l.split(":")[0]);
      expect(options).toEqual(expect.arrayContaining(longFlags(SEND_OPTIONS)));
      expect(await zcomplete("mailsend", "send", "--transport", "")).toEqual(["rest", "smtp", "auto"]);
      expect(await zcomplete("mailsend", "send", "--attach", "")).toEqual(["FILES"]);
      expect(await zcomplete("mailsend", "sandbox", "--dir", "")).toEqual(["DIRS"]);
      expect(await zcomplete("mailsend", "batch", "")).toContain("FILES");
    });
  });

  describe.skipIf(lacks(fishTool))("fish, run", () => {
    let script: string;
    beforeAll(async () => {
      script = tmp.file("mailsend.fish", (await runInProcess(["completion", "fish"])).stdout);
    });
    const fcomplete = async (line: string, cwd = tmp.dir) => {
      const r = await execa(
        fishTool.path!,
        ["--no-config", "-c", `source ${script}; complete -C ${JSON.stringify(line)}`],
        { reject: false, cwd },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
      return r.stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("\t")[0]!);
    };

    it("completes a command and an option as Tab would", async () => {
      expect(await fcomplete("mailsend se")).toEqual(["send"]);
      expect(await fcomplete("mailsend send --tr")).toEqual(["--transport"]);
      expect(await fcomplete("mailsend batch --con")).toEqual(["--concurrency"]);
    });

    it("completion bash <Tab> offers no shell again; config set <Tab> offers the setting names", async () => {
      expect((await fcomplete("mailsend completion ")).sort()).toEqual(["bash", "fish", "zsh"]);
      expect(await fcomplete("mailsend completion bash ")).toEqual([]);
      expect(await fcomplete("mailsend config set ")).toEqual(
        expect.arrayContaining(["profile", "base_url", "smtp_host"]),
      );
      expect(await fcomplete("mailsend config set smtp_")).toEqual(expect.arrayContaining(["smtp_host", "smtp_port"]));
      expect(await fcomplete("mailsend config set base_url ")).toEqual([]);
      expect(await fcomplete("mailsend batch rows.csv --con")).toEqual(["--concurrency"]);
    });

    it("offers choices, subcommands and files", async () => {
      expect(await fcomplete("mailsend send --transport ")).toEqual(["auto", "rest", "smtp"]); // fish sorts
      expect(await fcomplete("mailsend sandbox keys ")).toEqual(expect.arrayContaining(["add", "list", "revoke"]));
      tmp.file("report-for-fish.html", "<p>x</p>");
      expect(await fcomplete("mailsend send --html-file report-for-f")).toEqual(["report-for-fish.html"]);
    });
  });

  it("an unknown shell is a usage error (64)", async () => {
    const r = await runInProcess(["completion", "powershell"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/bash, zsh, fish/);
  });
});
