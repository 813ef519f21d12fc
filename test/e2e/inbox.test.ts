/**
 * `mailsend inbox` and `inbox show` as a user meets them: a dir with no
 * sandbox in it is an error that says so (66), not an empty inbox; a message
 * is found by its sandbox id or by the Message-ID `mailsend send` printed; an
 * id that matches nothing is a missing input (66), not a usage error; and the
 * header block of `inbox show` keeps one column for its values.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInProcess, stderrJson, stdoutJson } from "../helpers/cli.js";
import { inProcessSandbox, overRest, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

let s: Scratch;
let t: TestSandbox;
let smtpMessageId: string;
let restId: string;

const send = (subject: string, extra: string[] = []) => [
  "send",
  "-f",
  "a@example.com",
  "-t",
  "b@example.com",
  "-s",
  subject,
  "--text",
  `body of ${subject}`,
  ...extra,
];

beforeAll(async () => {
  s = scratch("mailsend-inbox-");
  t = overRest(await inProcessSandbox({}, s));
  const smtp = await runInProcess(
    [...send("over smtp", ["--transport", "smtp", "--json", "-H", "X-A-Rather-Long-Custom-Header: yes"])],
    { env: t.env },
  );
  expect(smtp.exitCode, smtp.stderr).toBe(0);
  smtpMessageId = stdoutJson(smtp).message_id;
  const rest = await runInProcess([...send("over rest", ["--json"])], { env: t.env });
  expect(rest.exitCode, rest.stderr).toBe(0);
  restId = stdoutJson(rest).message_id;
});

afterAll(async () => {
  await t?.stop();
  s?.remove();
});

describe("a dir without sandbox data", () => {
  it("is an error naming the dir and how to start one (66), in both output modes", async () => {
    const dir = join(s.dir, "does", "not", "exist");
    const r = await runInProcess(["inbox", "--dir", dir]);
    expect(r.exitCode).toBe(66);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`no sandbox data in ${dir}`);
    expect(r.stderr).toContain(`mailsend sandbox --dir ${dir}`);
    expect(r.stderr).toContain("MAILSEND_SANDBOX_DIR");
    expect(r.stderr).not.toContain("no messages");

    const j = await runInProcess(["inbox", "--dir", dir, "--json"]);
    expect(j.exitCode).toBe(66);
    expect(j.stdout).toBe("");
    expect(stderrJson(j).error).toMatchObject({ code: "file_not_found", exit: 66 });
    expect(stderrJson(j).error.message).toContain(dir);
  });

  it("the same for an empty dir, a file, and `inbox show`", async () => {
    const empty = join(s.dir, "empty");
    mkdirSync(empty);
    expect((await runInProcess(["inbox", "--dir", empty])).exitCode).toBe(66);
    const file = s.file("not-a-dir", "x");
    expect((await runInProcess(["inbox", "--dir", file])).exitCode).toBe(66);
    const show = await runInProcess(["inbox", "show", restId, "--dir", empty]);
    expect(show.exitCode).toBe(66);
    expect(show.stderr).toContain(`no sandbox data in ${empty}`);
  });

  it("says where the dir came from: MAILSEND_SANDBOX_DIR, or the default", async () => {
    const fromEnv = await runInProcess(["inbox"], { env: { MAILSEND_SANDBOX_DIR: join(s.dir, "env-dir") } });
    expect(fromEnv.exitCode).toBe(66);
    expect(fromEnv.stderr).toContain("from MAILSEND_SANDBOX_DIR");
    const xdg = join(s.dir, "xdg");
    const byDefault = await runInProcess(["inbox"], { env: { XDG_DATA_HOME: xdg } });
    expect(byDefault.exitCode).toBe(66);
    expect(byDefault.stderr).toContain(`no sandbox data in ${join(xdg, "mailsend", "sandbox")}`);
    expect(byDefault.stderr).toContain("MAILSEND_SANDBOX_DIR is not set");
  });

  it("a sandbox dir with no messages yet is an empty inbox (0)", async () => {
    const quiet = await inProcessSandbox({ dir: join(s.dir, "quiet") }, s);
    await quiet.stop();
    const r = await runInProcess(["inbox", "--dir", quiet.dir]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain(`no messages in ${quiet.dir}`);
    const j = await runInProcess(["inbox", "--dir", quiet.dir, "--json"]);
    expect(j.exitCode).toBe(0);
    expect(stdoutJson(j)).toEqual([]);
  });
});

describe("inbox show finds a message", () => {
  it("by the Message-ID an SMTP send printed, with or without the angle brackets", async () => {
    expect(smtpMessageId).toMatch(/^<[^<>@\s]+@[^<>\s]+>$/);
    const stored = (await t.sb.store.list()).find((m) => m.subject === "over smtp")!;
    for (const id of [smtpMessageId, smtpMessageId.slice(1, -1)]) {
      const r = await runInProcess(["inbox", "show", id, "--dir", t.dir, "--json"]);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(stdoutJson(r)).toMatchObject({ id: stored.id, subject: "over smtp" });
    }
    const raw = await runInProcess(["inbox", "show", smtpMessageId, "--raw", "--dir", t.dir]);
    expect(raw.stdout).toBe((await t.sb.store.raw(stored.id))!.toString("utf8"));
  });

  it("by the id a REST send printed (the sandbox id), and by that message's Message-ID header", async () => {
    const byId = await runInProcess(["inbox", "show", restId, "--dir", t.dir, "--json"]);
    expect(byId.exitCode, byId.stderr).toBe(0);
    const shown = stdoutJson(byId) as { id: string; headers: Array<{ name: string; value: string }> };
    expect(shown.id).toBe(restId);
    const header = shown.headers.find((h) => h.name.toLowerCase() === "message-id")!.value;
    const byHeader = await runInProcess(["inbox", "show", header, "--dir", t.dir, "--json"]);
    expect(byHeader.exitCode, byHeader.stderr).toBe(0);
    expect(stdoutJson(byHeader).id).toBe(restId);
  });

  it("through MAILSEND_SANDBOX_DIR from the sandbox's env, without --dir", async () => {
    expect(t.env.MAILSEND_SANDBOX_DIR).toBe(t.dir);
    const r = await runInProcess(["inbox", "show", smtpMessageId], { env: t.env });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain("body of over smtp");
  });

  it("the newest of several messages with one Message-ID, naming the others", async () => {
    const args = send("same id", ["--transport", "smtp", "-H", "Message-ID: <same-id-twice@example.com>"]);
    for (let i = 0; i < 2; i++) expect((await runInProcess(args, { env: t.env })).exitCode).toBe(0);
    const ids = (await t.sb.store.list()).filter((m) => m.subject === "same id").map((m) => m.id);
    expect(ids).toHaveLength(2);
    const r = await runInProcess(["inbox", "show", "same-id-twice@example.com", "--dir", t.dir]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`Id:`);
    expect(r.stdout).toContain(ids[0]!);
    expect(r.stderr).toContain(`2 messages have this Message-ID`);
    expect(r.stderr).toContain(ids[1]!);
  });
});

describe("inbox show of what is not there", () => {
  it("a well-formed id that matches nothing is missing input (66), with the error JSON in --json mode", async () => {
    for (const id of ["nosuchid", "0000000000000000zz", "<nobody@example.com>"]) {
      const r = await runInProcess(["inbox", "show", id, "--dir", t.dir]);
      expect(r.exitCode, id).toBe(66);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(`no message ${id} in ${t.dir}`);
      expect(r.stderr).toContain("mailsend inbox");
    }
    const j = await runInProcess(["inbox", "show", "nosuchid", "--dir", t.dir, "--json"]);
    expect(j.exitCode).toBe(66);
    expect(j.stdout).toBe("");
    expect(stderrJson(j).error).toMatchObject({ code: "file_not_found", exit: 66 });
    expect(stderrJson(j).error.message).toContain("no message nosuchid");
  });

  it("something that cannot be an id at all is a usage error (64)", async () => {
    for (const id of ["", "<>", "two words", "a<b>c"]) {
      const r = await runInProcess(["inbox", "show", id, "--dir", t.dir, "--json"]);
      expect(r.exitCode, JSON.stringify(id)).toBe(64);
      expect(stderrJson(r).error.code).toBe("usage");
    }
  });
});

describe("inbox show's header block", () => {
  it("puts every value in one column, X- headers (X-Idempotency-Key too) after the standard ones", async () => {
    const r = await runInProcess(["inbox", "show", smtpMessageId, "--dir", t.dir]);
    expect(r.exitCode, r.stderr).toBe(0);
    const block = r.stdout.split("\n\n")[0]!.split("\n");
    const labels = block.map((l) => /^([\w-]+):/.exec(l)?.[1]);
    expect(labels).toEqual(
      expect.arrayContaining([
        "Id",
        "Received",
        "Envelope",
        "From",
        "To",
        "Subject",
        "Message-ID",
        "X-Idempotency-Key",
        "X-A-Rather-Long-Custom-Header",
      ]),
    );
    const columns = new Set(block.map((l) => /^[\w-]+: +/.exec(l)![0].length));
    expect(columns.size, block.join("\n")).toBe(1);
    const firstX = labels.findIndex((l) => l!.startsWith("X-"));
    expect(
      labels.slice(firstX).every((l) => l!.startsWith("X-")),
      block.join("\n"),
    ).toBe(true);
    expect(r.stdout).toContain("body of over smtp");
  });
});

describe("inbox show prints headers as people read them", () => {
  it("RFC 2047 encoded words decoded, never =?UTF-8?...?= ", async () => {
    const subject = "Grüße aus Köln — Q3 📈";
    const r = await runInProcess(
      [
        "send",
        "--transport",
        "smtp",
        "-f",
        "Jürgen Müller <j@example.de>",
        "-t",
        "Zoë Ærø <z@example.com>",
        "-s",
        subject,
        "--text",
        "x",
        "-H",
        "X-Note: naïve café",
        "--json",
      ],
      { env: t.env },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const raw = await runInProcess(["inbox", "show", stdoutJson(r).message_id, "--raw", "--dir", t.dir]);
    expect(raw.stdout).toMatch(/^Subject: =\?UTF-8\?/im);
    const show = await runInProcess(["inbox", "show", stdoutJson(r).message_id, "--dir", t.dir]);
    expect(show.exitCode, show.stderr).toBe(0);
    const block = show.stdout.split("\n\n")[0]!;
    expect(block).not.toMatch(/=\?utf-8\?/i);
    expect(block).toMatch(new RegExp(`^Subject: +${subject}$`, "m"));
    expect(block).toMatch(/^From: +Jürgen Müller <j@example\.de>$/m);
    expect(block).toMatch(/^To: +Zoë Ærø <z@example\.com>$/m);
    expect(block).toMatch(/^X-Note: +naïve café$/m);
  });

  it("sizes in the unit the web inbox uses (B, KiB, MiB)", async () => {
    const big = s.file("big.bin", Buffer.alloc(3000, 1));
    const r = await runInProcess([...send("sized", ["--attach", big, "--json"])], { env: t.env });
    expect(r.exitCode, r.stderr).toBe(0);
    const list = await runInProcess(["inbox", "--dir", t.dir]);
    expect(list.stdout).toMatch(/\d+\.\d KiB/);
    expect(list.stdout).not.toMatch(/\bKB\b/);
    const show = await runInProcess(["inbox", "show", stdoutJson(r).message_id, "--dir", t.dir]);
    expect(show.stdout).toMatch(/^Attachment: +big\.bin \([^,]+, 2\.9 KiB\)$/m);
  });
});
