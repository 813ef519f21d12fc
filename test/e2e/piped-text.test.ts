/**
 * Text piped to `mailsend send` (`df -h | mailsend send ...`), against the sandbox: with an SMTP host
 * configured, the default transport is auto and it goes over SMTP as text/plain; with REST alone it
 * goes as <pre> HTML and a single warning says so and how to send it as text (not under -q; under
 * --json as a warning line).
 */
import { describe, expect, it } from "vitest";
import { runCli, stdoutJson } from "../helpers/cli.js";
import { parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";

let sb: TestSandbox;
useSandbox((v) => (sb = v));

const DF = "Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        40G   37G  3.0G  93% /\n";
const send = (subject: string, extra: string[] = []) => [
  "send",
  "-f",
  "cron@example.com",
  "-t",
  "ops@example.com",
  "-s",
  subject,
  ...extra,
];
const NOTE =
  /the text on stdin goes as HTML \(escaped inside <pre>\).*configure SMTP \(MAILSEND_SMTP_HOST\) and use --transport auto/;

async function stored(subject: string) {
  const list = (await sb.sb.store.list()).filter((m) => m.subject === subject);
  expect(list).toHaveLength(1);
  return list[0]!;
}

describe("text piped in, REST alone", () => {
  const restAlone = () => ({ ...sb.env, MAILSEND_SMTP_HOST: undefined });

  it("goes as HTML, said once on stderr with the way to send it as text", async () => {
    const r = await runCli(send("piped-rest"), { env: restAlone(), input: DF });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^warning: ${NOTE.source}`));
    expect((await stored("piped-rest")).channel).toBe("rest");
    // --text-file - is text from stdin too.
    const file = await runCli(send("piped-rest-file", ["--text-file", "-"]), { env: restAlone(), input: DF });
    expect(file.exitCode, file.stderr).toBe(0);
    expect(file.stderr).toMatch(NOTE);
  });

  it("nothing under -q; a warning line under --json; nothing for a body given as --text", async () => {
    const quiet = await runCli(send("piped-quiet", ["-q"]), { env: restAlone(), input: DF });
    expect(quiet.exitCode, quiet.stderr).toBe(0);
    expect(quiet.stdout + quiet.stderr).toBe("");

    const json = await runCli(send("piped-json", ["--json"]), { env: restAlone(), input: DF });
    expect(json.exitCode, json.stderr).toBe(0);
    expect(stdoutJson(json)).toMatchObject({ ok: true, transport: "rest" });
    const lines = json.stderr
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { warning?: string });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.warning).toMatch(NOTE);

    const flag = await runCli(send("flag-text", ["--text", "disk 93% full"]), { env: restAlone() });
    expect(flag.exitCode, flag.stderr).toBe(0);
    expect(flag.stderr).toBe("");
  });
});

describe("text piped in, SMTP configured too", () => {
  it("no transport chosen: auto, so it goes over SMTP as text/plain, without a warning", async () => {
    expect(sb.env.MAILSEND_TRANSPORT).toBeUndefined();
    const r = await runCli(send("piped-auto", ["--json"]), { env: sb.env, input: DF });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(stdoutJson(r)).toMatchObject({ ok: true, transport: "smtp" });
    const m = await stored("piped-auto");
    expect(m.channel).toBe("smtp");
    const raw = (await sb.sb.store.raw(m.id))!;
    expect(raw.toString("latin1")).toMatch(/^Content-Type: text\/plain/im);
    const email = await parseEml(raw);
    expect(email.html).toBeUndefined();
    expect(email.text).toContain("/dev/sda1        40G   37G  3.0G  93% /");
  });

  it("a transport chosen still wins: MAILSEND_TRANSPORT=rest, or --transport rest", async () => {
    const env = await runCli(send("piped-env-rest"), { env: { ...sb.env, MAILSEND_TRANSPORT: "rest" }, input: DF });
    expect(env.exitCode, env.stderr).toBe(0);
    expect((await stored("piped-env-rest")).channel).toBe("rest");
    const flag = await runCli(send("piped-flag-rest", ["--transport", "rest"]), { env: sb.env, input: DF });
    expect(flag.exitCode, flag.stderr).toBe(0);
    expect((await stored("piped-flag-rest")).channel).toBe("rest");
  });
});
