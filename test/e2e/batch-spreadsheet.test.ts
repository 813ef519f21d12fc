/**
 * `mailsend batch` with CSV files as spreadsheets save them: Excel's "CSV UTF-8" (a BOM, CRLF),
 * header names written for people ("First Name", "Prénom"), and what a user sees when a file is
 * not what mailsend reads. The built binary against an in-process sandbox; each test has its own
 * subject prefix.
 */
import { utimesSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { StoredMessage } from "../../src/sandbox/types.js";
import { runCli, runInProcess } from "../helpers/cli.js";
import { inProcessSandbox, overRest, parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

let t: TestSandbox;
let tmp: Scratch;
useSandbox((sb) => (t = overRest(sb)), { rateLimit: 1_000_000 });
beforeAll(async () => {
  tmp = scratch("mailsend-batch-sheet-");
});
afterAll(async () => {
  tmp?.remove();
});

const batch = (args: string[], env: Record<string, string | undefined> = {}) =>
  runInProcess(["batch", ...args], { env: { ...t.env, ...env }, timeoutMs: 30_000 });

async function stored(prefix: string): Promise<StoredMessage[]> {
  return (await t.sb.store.list()).filter((m) => m.subject.startsWith(prefix)).reverse();
}

async function body(m: StoredMessage): Promise<{ text?: string | undefined; html?: string | undefined }> {
  const e = await parseEml((await t.sb.store.raw(m.id))!);
  return { text: e.text, html: e.html };
}

/** Excel's "CSV UTF-8 (Comma delimited)": a byte order mark, CRLF line ends. */
const excelUtf8 = (lines: string[]) =>
  Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(lines.map((l) => `${l}\r\n`).join(""))]);

describe("spreadsheet column names", () => {
  test("placeholders name accented columns and columns with spaces; none reaches the inbox as written", async () => {
    const input = tmp.file(
      "names.csv",
      excelUtf8([
        "to,Prénom,First Name,Straße",
        "anna@example.com,Anaïs,Ann,Hauptstraße 1",
        "bob@example.com,Börje,Bob,Ringweg 2",
      ]),
    );
    const md = tmp.file("names.md", "Bonjour **{{Prénom}}** ({{first_name}}), {{Straße}}\n");
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "names {{Prénom}}",
      "--markdown-file",
      md,
      "--transport",
      "smtp",
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const got = await stored("names ");
    expect(got.map((m) => m.subject).sort()).toEqual(["names Anaïs", "names Börje"]);
    const anna = await body(got.find((m) => m.subject === "names Anaïs")!);
    expect(anna.text).toContain("Bonjour **Anaïs** (Ann), Hauptstraße 1");
    expect(anna.html).toContain("Bonjour <strong>Anaïs</strong> (Ann), Hauptstraße 1");
    expect(`${anna.text}${anna.html}`).not.toContain("{{");
  });

  test("a placeholder no column fills is an invalid row whose hint lists the columns", async () => {
    const input = tmp.file("nocol.csv", excelUtf8(["to,Nom", "anna@example.com,Anaïs"]));
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "nocol {{Prénom}}",
      "--html-file",
      tmp.file("nocol.html", "<p>{{Nom}}</p>"),
    ]);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/--subject: no value for \{\{Prénom\}\}/);
    expect(r.stderr).toMatch(/This row's variables: Nom/);
    expect(await stored("nocol")).toEqual([]);
  });
});

describe("spreadsheet exports", () => {
  const people = [
    ["anna@example.com", "Anna", "Müller", "Gold €5"],
    ["bob@example.com", "Bob", "Ståhl", "Silver"],
  ];
  const text = () => tmp.file("sheet.txt", "Hello {{first_name}} {{last_name}}: {{plan}}\n");

  test("Excel in a ';' locale (with its sep= line or not), tab-separated text, and Excel's unnamed empty columns and rows: every row sent, as written", async () => {
    const files = {
      semi: excelUtf8(["to;first_name;last_name;plan", ...people.map((p) => p.join(";"))]),
      sepline: excelUtf8(["sep=;", "to;first_name;last_name;plan", ...people.map((p) => p.join(";"))]),
      tabs: Buffer.from(["to\tfirst_name\tlast_name\tplan", ...people.map((p) => p.join("\t")), ""].join("\n")),
      formatted: excelUtf8([
        "to,first_name,last_name,plan,,",
        ...people.map((p) => `${p.join(",")},,`),
        ",,,,,",
        ",,,,,",
      ]),
    };
    for (const [name, bytes] of Object.entries(files)) {
      const input = tmp.file(`${name}.${name === "tabs" ? "tsv" : "csv"}`, bytes);
      const r = await batch([
        input,
        "-f",
        "shop@example.com",
        "-s",
        `sheet ${name} {{first_name}}`,
        "--text-file",
        text(),
        "--transport",
        "smtp",
      ]);
      expect({ name, exit: r.exitCode, stderr: r.stderr }).toEqual({ name, exit: 0, stderr: "" });
      expect(r.stdout).toMatch(/^2 sent \(of 2\)/);
      const got = (await stored(`sheet ${name} `)).sort((a, b) => a.envelope.to[0]!.localeCompare(b.envelope.to[0]!));
      expect(got.map((m) => m.envelope.to)).toEqual([["anna@example.com"], ["bob@example.com"]]);
      expect((await body(got[0]!)).text).toBe("Hello Anna Müller: Gold €5\n");
    }
  });

  test('Excel\'s "Unicode Text" (.txt, UTF-16 with its byte order mark, tabs): read as written, not refused as not UTF-8', async () => {
    const rows = ["to\tfirst_name\tlast_name\tplan", ...people.map((p) => p.join("\t")), ""].join("\r\n");
    const input = tmp.file("unicode.txt", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(rows, "utf16le")]));
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "utf16 {{first_name}}",
      "--text-file",
      text(),
      "--transport",
      "smtp",
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const got = await stored("utf16 Anna");
    expect((await body(got[0]!)).text).toBe("Hello Anna Müller: Gold €5\n");
  });

  test('a "To" / "CC" header is the recipients, not a template variable (the CC was left out)', async () => {
    const input = tmp.file("caps.csv", excelUtf8(["To,CC,First Name", "anna@example.com,boss@example.com,Anna"]));
    const r = await batch(
      [input, "-f", "shop@example.com", "-s", "caps {{First Name}}", "--text-file", text(), "--transport", "smtp"],
      {},
    );
    expect(r.exitCode).toBe(65); // {{last_name}}, {{plan}}: no such columns
    const r2 = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "caps {{First Name}}",
      "--text-file",
      tmp.file("caps.txt", "Hi {{first_name}}\n"),
      "--transport",
      "smtp",
    ]);
    expect(r2.stderr).toBe("");
    expect(r2.exitCode).toBe(0);
    const [m] = await stored("caps ");
    expect(m!.envelope.to.sort()).toEqual(["anna@example.com", "boss@example.com"]);
  });

  test('Excel\'s plain "CSV" (windows-1252): refused before anything is sent, with the line, the byte and how to save it', async () => {
    const rows = ["to,first_name,last_name,plan", ...people.map((p) => p.join(","))].join("\r\n");
    const input = tmp.file("cp1252.csv", Buffer.from(rows, "latin1"));
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "cp1252 {{first_name}}",
      "--text-file",
      text(),
      "--json",
    ]);
    expect(r.exitCode).toBe(65);
    const err = JSON.parse(r.stderr.trim().split("\n").pop()!) as { error: { message: string; hint: string } };
    expect(err.error.message).toBe(
      'the batch input is not valid UTF-8 (line 2: the byte 0xFC after "anna@example.com,Anna,M")',
    );
    expect(err.error.hint).toMatch(/CSV UTF-8 \(Comma delimited\).*--encoding windows-1252/);
    expect(await stored("cp1252")).toEqual([]);
  });

  test('Excel\'s plain "CSV" with --encoding windows-1252: sent as written (ü, €); an unknown encoding is a usage error', async () => {
    const rows = ["to,first_name,last_name,plan", ...people.map((p) => p.join(","))].join("\r\n");
    const input = tmp.file("cp1252-ok.csv", Buffer.from(rows.replace("€", "\x80"), "latin1"));
    const r = await batch([
      input,
      "--encoding",
      "windows-1252",
      "-f",
      "shop@example.com",
      "-s",
      "enc {{first_name}}",
      "--text-file",
      text(),
      "--transport",
      "smtp",
    ]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect((await body((await stored("enc Anna"))[0]!)).text).toBe("Hello Anna Müller: Gold €5\n");
    const bad = await batch([
      input,
      "--encoding",
      "klingon",
      "-f",
      "shop@example.com",
      "-s",
      "enc",
      "--text-file",
      text(),
    ]);
    expect(bad.exitCode).toBe(64);
    expect(bad.stderr).toMatch(/^error: --encoding: no such encoding: klingon$/m);
  });

  test('an address column named "Email": each row is invalid with a hint naming the column "to"', async () => {
    const input = tmp.file("email.csv", excelUtf8(["Email Address,First Name", "anna@example.com,Anna"]));
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "email {{First Name}}",
      "--text-file",
      tmp.file("email.txt", "Hi\n"),
    ]);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/row 1 \(line 2\): missing to/);
    expect(r.stderr).toMatch(/The recipients' column must be named "to"; this row has: Email Address, First Name\./);
  });
});

describe("blank cells", () => {
  test("a template's placeholder over a blank cell makes that row invalid (not 'Dear ,'); a default in the placeholder fills it", async () => {
    const input = tmp.file(
      "blank.csv",
      excelUtf8(["to,first_name,company", "anna@example.com,Anna,ACME", "bob@example.com,,", "cem@example.com,Cem,"]),
    );
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "blank {{to}}",
      "--text-file",
      tmp.file("blank.txt", "Dear {{first_name}}, {{company|}}\n"),
      "--transport",
      "smtp",
    ]);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/row 2 \(line 3\): --text-file: no value for \{\{first_name\}\} \(empty\)/);
    expect(r.stderr).toMatch(/\{\{first_name\|text\}\}/);
    expect(r.stdout).toMatch(/^2 sent, 1 invalid \(of 3\)/);
    const got = await stored("blank ");
    expect(got.map((m) => m.envelope.to[0]).sort()).toEqual(["anna@example.com", "cem@example.com"]);
    const cem = await body(got.find((m) => m.envelope.to[0] === "cem@example.com")!);
    expect(cem.text).toBe("Dear Cem, \n");

    const md = tmp.file("blank.md", "Dear **{{first_name|customer}}**\n");
    const r2 = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "blank2 {{to}}",
      "--markdown-file",
      md,
      "--transport",
      "smtp",
      "--fresh",
    ]);
    expect(r2.stderr).toBe("");
    expect(r2.exitCode).toBe(0);
    const bob = await body((await stored("blank2 bob@example.com"))[0]!);
    expect(bob.html).toContain("Dear <strong>customer</strong>");
  });
});

describe("per-row attachments", () => {
  test("a relative path found beside the sheet but not from the current directory: the hint says where it is and how to run", async () => {
    tmp.file("invoice-anna.pdf", "%PDF-1.4 anna");
    const input = tmp.file(
      "att.csv",
      excelUtf8(["to,first_name,attachments", "anna@example.com,Anna,invoice-anna.pdf"]),
    );
    const args = (extra: string[]) => [
      input,
      "-f",
      "shop@example.com",
      "-s",
      "att {{first_name}}",
      "--text-file",
      tmp.file("att.txt", "Hi {{first_name}}\n"),
      "--transport",
      "smtp",
      ...extra,
    ];
    const r = await runInProcess(["batch", ...args([])], { env: t.env, timeoutMs: 30_000 });
    expect(r.exitCode).toBe(66);
    expect(r.stderr).toMatch(/row 1 \(line 2\): attachment not found: invoice-anna\.pdf/);
    expect(r.stderr).toContain(`${tmp.dir}/invoice-anna.pdf exists: run the command from ${tmp.dir}`);
    expect(await stored("att ")).toEqual([]);
    // From the sheet's directory the same command sends it.
    const ok = await runCli(["batch", ...args([])], { env: t.env, timeoutMs: 30_000, cwd: tmp.dir });
    expect(ok.stderr).toBe("");
    expect(ok.exitCode).toBe(0);
    expect((await stored("att "))[0]!.attachments.map((a) => a.filename)).toEqual(["invoice-anna.pdf"]);
  });
});

describe("progress off a terminal", () => {
  test("a rate-limit wait is said in the log (CI), not only on a terminal or under -q", async () => {
    const input = tmp.file(
      "wait.csv",
      ["to,first_name", "a@example.com,A", "b@example.com,B", "c@example.com,C", ""].join("\n"),
    );
    const r = await batch(
      [
        input,
        "-f",
        "shop@example.com",
        "-s",
        "wait {{first_name}}",
        "--text-file",
        tmp.file("wait.txt", "Hi {{first_name}}\n"),
        "-c",
        "1",
      ],
      {
        MAILSEND_RATE_LIMIT: "2",
        MAILSEND_RATE_WINDOW: "7",
        // No slot kept back for urgent mail: one wait for the third row, whatever the reserve's default.
        MAILSEND_RATE_RESERVE: "0",
        MAILSEND_STATE_DIR: join(tmp.dir, "wait-state"),
      },
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toMatch(/^3 sent \(of 3\)/);
    expect(r.stderr).toMatch(/^mailsend batch: rate limit for this key reached; waiting [5-7] s$/m);
    expect(r.stderr.match(/waiting/g)).toHaveLength(1);
  });

  test("the service's 429 and its Retry-After: the retry's wait is said too", async () => {
    const strict = overRest(await inProcessSandbox({ rateLimit: 2, rateWindowMs: 7_000 }, tmp));
    try {
      const input = tmp.file(
        "retry.csv",
        ["to,first_name", "a@example.com,A", "b@example.com,B", "c@example.com,C", ""].join("\n"),
      );
      const r = await runInProcess(
        [
          "batch",
          input,
          "-f",
          "shop@example.com",
          "-s",
          "retry {{first_name}}",
          "--text-file",
          tmp.file("retry.txt", "Hi {{first_name}}\n"),
          "-c",
          "1",
        ],
        {
          env: { ...strict.env, MAILSEND_RATE_LIMIT: "0", MAILSEND_RETRIES: "3" },
          timeoutMs: 30_000,
        },
      );
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toMatch(/^3 sent \(of 3\)/);
      expect(r.stderr).toMatch(/^mailsend batch: .*429.*; retry 1; waiting [5-7] s$/m);
    } finally {
      await strict.sb.close();
    }
  });
});

describe("template braces", () => {
  test("braces no placeholder fills (an editor's markup inside, a typo) are a warning before anything is sent, also with --check", async () => {
    const input = tmp.file("braces.csv", excelUtf8(["to,first_name", "anna@example.com,Anna", "bob@example.com,Bob"]));
    const html = tmp.file(
      "braces.html",
      '<p>Dear {{<span lang="EN-US">first_name</span>}},</p>\n<p>{{ first_name }</p>\n',
    );
    const r = await batch([
      input,
      "-f",
      "shop@example.com",
      "-s",
      "braces {{first_name}}",
      "--html-file",
      html,
      "--check",
    ]);
    expect(r.exitCode).toBe(0);
    const warnings = r.stderr.split("\n").filter((l) => l.startsWith("warning:"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("--html-file has braces that are no placeholder, sent as written to every recipient");
    expect(warnings[0]).toContain(String.raw`"<p>Dear {{<span lang=\"EN-US\">first_nam..."`);
    expect(warnings[0]).toContain("<p>{{ first_name }</p>");
  });
});

describe("fixing invalid rows", () => {
  test("a run that sent some rows and left others invalid says that editing the file to fix them would resend every row", async () => {
    const input = tmp.file(
      "fixme.csv",
      excelUtf8(["to,first_name", "anna@example.com,Anna", "bob@example.com,", "cem@example.com,Cem"]),
    );
    const args = [
      input,
      "-f",
      "shop@example.com",
      "-s",
      "fixme {{first_name}}",
      "--text-file",
      tmp.file("fixme.txt", "Hi {{first_name}}\n"),
    ];
    const r = await batch(args);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toContain(
      `warning: 1 invalid row was not sent. Editing ${input} to fix it makes it a new batch: running it again would send every row again, also the 2 already sent. Put the fixed rows (with the header) in a file of their own`,
    );
    // --json: a warning object before the summary.
    const j = await batch([...args, "--json"]);
    const lines = j.stderr
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.at(-2)).toEqual({
      warning: expect.stringMatching(/^1 invalid row was not sent\..*also the 2 already sent/),
    });
    expect(lines.at(-1)).toHaveProperty("summary");
    // A run with nothing invalid says nothing of it.
    const clean = await batch([tmp.file("clean.csv", "to,first_name\nann@example.com,Ann\n"), ...args.slice(1)]);
    expect(clean.stderr).toBe("");
  });
});

describe("the same file saved again", () => {
  test("a re-run after the file was saved again unchanged (a new mtime) skips what was sent, instead of sending every row again", async () => {
    const input = tmp.file("resaved.csv", excelUtf8(["to,first_name", "anna@example.com,Anna", "bob@example.com,Bob"]));
    const args = [
      input,
      "-f",
      "shop@example.com",
      "-s",
      "resaved {{first_name}}",
      "--text-file",
      tmp.file("resaved.txt", "Hi {{first_name}}\n"),
    ];
    expect((await batch(args)).exitCode).toBe(0);
    const later = new Date(Date.now() + 120_000);
    utimesSync(input, later, later);
    const again = await batch(args);
    expect(again.stderr).toBe("");
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toMatch(/^0 sent, 2 already sent \(of 2\)/);
    expect(await stored("resaved ")).toHaveLength(2);
  });
});
