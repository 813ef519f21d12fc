/**
 * `mailsend batch` with CSV files as spreadsheets save them: Excel's "CSV UTF-8" (a BOM, CRLF),
 * header names written for people ("First Name", "Prénom"), and what a user sees when a file is
 * not what mailsend reads. The built binary against an in-process sandbox; each test has its own
 * subject prefix.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { StoredMessage } from "../../src/sandbox/types.js";
import { runCli } from "../helpers/cli.js";
import { inProcessSandbox, parseEml, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

let t: TestSandbox;
let tmp: Scratch;
beforeAll(async () => {
  tmp = scratch("mailsend-batch-sheet-");
  t = await inProcessSandbox({ rateLimit: 1_000_000 });
});
afterAll(async () => {
  await t?.stop();
  t?.scratch.remove();
  tmp?.remove();
});

const batch = (args: string[], env: Record<string, string | undefined> = {}) => runCli(["batch", ...args], { env: { ...t.env, ...env }, timeoutMs: 30_000 });

async function stored(prefix: string): Promise<StoredMessage[]> {
  return (await t.sb.store.list()).filter((m) => m.subject.startsWith(prefix)).reverse();
}

async function body(m: StoredMessage): Promise<{ text?: string | undefined; html?: string | undefined }> {
  const e = await parseEml((await t.sb.store.raw(m.id))!);
  return { text: e.text, html: e.html };
}

/** Excel's "CSV UTF-8 (Comma delimited)": a byte order mark, CRLF line ends. */
const excelUtf8 = (lines: string[]) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(lines.map((l) => `${l}\r\n`).join(""))]);

describe("spreadsheet column names", () => {
  test("placeholders name accented columns and columns with spaces; none reaches the inbox as written", async () => {
    const input = tmp.file("names.csv", excelUtf8(["to,Prénom,First Name,Straße", "anna@example.com,Anaïs,Ann,Hauptstraße 1", "bob@example.com,Börje,Bob,Ringweg 2"]));
    const md = tmp.file("names.md", "Bonjour **{{Prénom}}** ({{first_name}}), {{Straße}}\n");
    const r = await batch([input, "-f", "shop@example.com", "-s", "names {{Prénom}}", "--markdown-file", md, "--transport", "smtp"]);
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
    const r = await batch([input, "-f", "shop@example.com", "-s", "nocol {{Prénom}}", "--html-file", tmp.file("nocol.html", "<p>{{Nom}}</p>")]);
    expect(r.exitCode).toBe(65);
    expect(r.stderr).toMatch(/--subject: no value for \{\{Prénom\}\}/);
    expect(r.stderr).toMatch(/This row's variables: Nom/);
    expect(await stored("nocol")).toEqual([]);
  });
});
