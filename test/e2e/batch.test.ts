/**
 * `mailsend batch`, the built binary against an in-process sandbox: JSON
 * lines over REST, a JSON array over SMTP, CSV with templates, per-item
 * results, bad rows, --check, --fail-fast, and what a second run of the same
 * command does. Every test uses its own subject prefix, so they share one
 * sandbox without seeing each other's mail.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import type { StoredMessage } from "../../src/sandbox/types.js";
import { defaultJournal, runInProcess, type CliResult } from "../helpers/cli.js";
import { overRest, parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { until } from "../helpers/until.js";

let t: TestSandbox;
let tmp: Scratch;
useSandbox((sb) => (t = overRest(sb)), { rateLimit: 1_000_000 });
beforeAll(async () => {
  tmp = scratch("mailsend-batch-");
});
afterAll(async () => {
  tmp?.remove();
});
afterEach(() => {
  t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0, failRate: 0, dropRate: 0 };
});

interface Result {
  index: number;
  line: number;
  recipients: string[];
  status: "sent" | "failed" | "invalid" | "skipped" | "unknown";
  message_id?: string;
  idempotency_key?: string;
  attempts?: number;
  error?: { code: string; message: string; exit: number; class: string };
}

const batch = (args: string[], env: Record<string, string | undefined> = {}, input?: string) =>
  runInProcess(["batch", ...args], {
    env: { ...t.env, ...env },
    timeoutMs: 30_000,
    ...(input !== undefined ? { input } : {}),
  });

function jsonLines(text: string): Result[] {
  return text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Result);
}

/** The `{"summary":...}` line --json writes on stderr. */
function summaryOf(r: CliResult): Record<string, unknown> {
  const line = r.stderr
    .split("\n")
    .reverse()
    .find((l) => l.startsWith('{"summary"'));
  if (!line) throw new Error(`no summary on stderr: ${r.stderr}`);
  return (JSON.parse(line) as { summary: Record<string, unknown> }).summary;
}

async function stored(prefix: string): Promise<StoredMessage[]> {
  return (await t.sb.store.list()).filter((m) => m.subject.startsWith(prefix)).reverse();
}

const byIndex = (rs: Result[]) => [...rs].sort((a, b) => a.index - b.index);

const jsonl = (rows: unknown[]) => `${rows.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join("\n")}\n`;

describe("delivery", () => {
  test("JSON lines over REST: each row delivered once; --results and --json carry one line per item", async () => {
    const logo = randomBytes(1500);
    const rows = [
      { from: "ci@example.com", to: "ann@example.com", subject: "jsonl 0", html: "<p>zero</p>" },
      {
        from: "CI Bot <ci@example.com>",
        to: ["bob@example.com", "Cat <cat@example.com>"],
        subject: "jsonl 1",
        text: "one <raw>",
        reply_to: "help@example.com",
      },
      {
        from: "ci@example.com",
        name: "Release Bot",
        to: "dan@example.com",
        subject: "jsonl 2",
        html: "<p>two</p>",
        headers: { "X-Campaign": "q3" },
      },
      {
        from: "ci@example.com",
        to: "eve@example.com",
        subject: "jsonl 3",
        html: "<p>three</p>",
        attachments: [{ content: logo.toString("base64"), filename: "logo.png" }],
      },
    ];
    const input = tmp.file("rest.jsonl", jsonl(rows));
    const results = join(tmp.dir, "rest-results.jsonl");
    const r = await batch([input, "--results", results, "--json"]);
    expect(r.exitCode, r.stderr).toBe(0);

    const out = jsonLines(r.stdout);
    expect(out).toHaveLength(4);
    expect(jsonLines(readFileSync(results, "utf8"))).toEqual(out);
    const got = await stored("jsonl ");
    expect(got.map((m) => m.subject).sort()).toEqual(["jsonl 0", "jsonl 1", "jsonl 2", "jsonl 3"]);
    for (const res of byIndex(out)) {
      expect(res.status).toBe("sent");
      const m = got.find((s) => s.subject === `jsonl ${res.index}`)!;
      expect(res.message_id).toBe(m.messageId);
      expect(res.line).toBe(res.index + 1);
      expect(res.idempotency_key).toBe(m.idempotencyKey);
      expect(m.channel).toBe("rest");
    }
    // One batch, one id: the keys are <batch>-<index>.
    const keys = byIndex(out).map((x) => x.idempotency_key!);
    const batchId = keys[0]!.replace(/-0$/, "");
    expect(keys).toEqual([0, 1, 2, 3].map((i) => `${batchId}-${i}`));
    expect(byIndex(out).map((x) => x.recipients)).toEqual([
      ["ann@example.com"],
      ["bob@example.com", "cat@example.com"],
      ["dan@example.com"],
      ["eve@example.com"],
    ]);

    const s = summaryOf(r);
    expect(s).toMatchObject({
      total: 4,
      sent: 4,
      failed: 0,
      invalid: 0,
      skipped: 0,
      unknown: 0,
      exitCode: 0,
      check: false,
    });
    // In the state dir, named after the input: not beside --results (a rerun that changes --results must find it).
    expect(s.journal).toBe(defaultJournal(input));
    expect(existsSync(`${results}.journal`)).toBe(false);

    const eml = async (subject: string) =>
      parseEml((await t.sb.store.raw(got.find((m) => m.subject === subject)!.id))!);
    const one = await eml("jsonl 1");
    expect(one.from).toMatchObject({ name: "CI Bot", address: "ci@example.com" });
    expect(one.replyTo?.[0]?.address).toBe("help@example.com");
    // REST has only html: the text is escaped and wrapped.
    expect(one.html).toContain("one &lt;raw&gt;");
    const two = await eml("jsonl 2");
    expect(two.from).toMatchObject({ name: "Release Bot", address: "ci@example.com" });
    expect(two.headers.find((h) => h.key === "x-campaign")?.value).toBe("q3");
    const three = await eml("jsonl 3");
    expect(three.attachments).toHaveLength(1);
    expect(three.attachments[0]!.filename).toBe("logo.png");
    expect(Buffer.from(three.attachments[0]!.content as ArrayBuffer).equals(logo)).toBe(true);
  });

  test("a JSON array over SMTP (STARTTLS): envelope with cc and bcc, X-Idempotency-Key, message ids", async () => {
    const rows = [
      { from: "ops@example.com", to: "ann@example.com", cc: "carol@example.com", subject: "array 0", text: "zero" },
      {
        from: "ops@example.com",
        to: ["bob@example.com"],
        bcc: ["hidden@example.com"],
        subject: "array 1",
        html: "<p>one</p>",
        text: "one",
      },
      {
        from: "ops@example.com",
        to: "dan@example.com",
        subject: "array 2",
        text: "two",
        idempotency_key: "own-key-array-2",
        headers: { "Message-ID": "<own-id-array-2@example.com>" },
      },
    ];
    // Pretty-printed, as a person or jq writes it.
    const input = tmp.file("smtp.json", JSON.stringify(rows, null, 2));
    const before = t.sb.stats.toJSON();
    const r = await batch([input, "--transport", "smtp", "--json", "--concurrency", "2"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(t.sb.env.MAILSEND_SMTP_TLS).toBe("starttls");
    const out = byIndex(jsonLines(r.stdout));
    expect(out.map((x) => x.status)).toEqual(["sent", "sent", "sent"]);
    expect(out.map((x) => x.recipients)).toEqual([
      ["ann@example.com", "carol@example.com"],
      ["bob@example.com", "hidden@example.com"],
      ["dan@example.com"],
    ]);
    const after = t.sb.stats.toJSON();
    expect(after.smtp.accepted - before.smtp.accepted).toBe(3);
    expect(after.rest.accepted - before.rest.accepted).toBe(0);

    const got = await stored("array ");
    expect(got).toHaveLength(3);
    for (const m of got) expect(m.channel).toBe("smtp");
    const m1 = got.find((m) => m.subject === "array 1")!;
    expect(m1.envelope.to.sort()).toEqual(["bob@example.com", "hidden@example.com"]);
    const e1 = await parseEml((await t.sb.store.raw(m1.id))!);
    expect(e1.headers.some((h) => h.key === "bcc")).toBe(false);
    expect(e1.text?.trim()).toBe("one");
    expect(e1.html).toContain("<p>one</p>");
    expect(out[1]!.message_id).toBe(m1.messageId);
    expect(m1.idempotencyKey).toBe(out[1]!.idempotency_key);
    // A row's own idempotency_key wins over the batch's.
    expect(got.find((m) => m.subject === "array 2")!.idempotencyKey).toBe("own-key-array-2");
    // A row's own Message-ID header is kept, and is the id reported.
    expect(got.find((m) => m.subject === "array 2")!.messageId).toBe("<own-id-array-2@example.com>");
    expect(out[2]!.message_id).toBe("<own-id-array-2@example.com>");
    expect(got.find((m) => m.subject === "array 0")!.envelope.to.sort()).toEqual([
      "ann@example.com",
      "carol@example.com",
    ]);
  });

  test("--transport auto and MAILSEND_TRANSPORT=auto: each row goes as send would send it (REST, else SMTP for cc, a text part)", async () => {
    const rows = (prefix: string) => [
      { from: "auto@example.com", to: "ann@example.com", subject: `${prefix} 0`, html: "<p>zero</p>" },
      {
        from: "auto@example.com",
        to: "bob@example.com",
        cc: "carol@example.com",
        subject: `${prefix} 1`,
        html: "<p>one</p>",
      },
      { from: "auto@example.com", to: "dan@example.com", subject: `${prefix} 2`, text: "two" },
    ];
    const channels = async (prefix: string) =>
      Object.fromEntries((await stored(`${prefix} `)).map((m) => [m.subject, m.channel]));
    const expected = (prefix: string) => ({
      [`${prefix} 0`]: "rest",
      [`${prefix} 1`]: "smtp",
      [`${prefix} 2`]: "smtp",
    });

    const flag = await batch([tmp.file("auto-flag.jsonl", jsonl(rows("auto flag"))), "--transport", "auto", "--json"]);
    expect(flag.exitCode, flag.stderr).toBe(0);
    expect(byIndex(jsonLines(flag.stdout)).map((x) => x.status)).toEqual(["sent", "sent", "sent"]);
    expect(await channels("auto flag")).toEqual(expected("auto flag"));
    // Over SMTP an HTML-only row gets its text part, as with --transport smtp.
    const one = await parseEml((await t.sb.store.raw((await stored("auto flag 1"))[0]!.id))!);
    expect(one.text?.trim()).toBe("one");

    const env = await batch([tmp.file("auto-env.jsonl", jsonl(rows("auto env"))), "--json"], {
      MAILSEND_TRANSPORT: "auto",
    });
    expect(env.exitCode, env.stderr).toBe(0);
    expect(await channels("auto env")).toEqual(expected("auto env"));

    // Only REST configured: as send, a row REST would not carry whole is invalid (with the reason), the other goes by REST.
    const restOnly = await batch(
      [tmp.file("auto-rest.jsonl", jsonl(rows("auto rest"))), "--transport", "auto", "--json"],
      { MAILSEND_SMTP_HOST: undefined },
    );
    const out = byIndex(jsonLines(restOnly.stdout));
    expect(out.map((x) => x.status)).toEqual(["sent", "invalid", "invalid"]);
    expect(out[1]!.error?.message).toMatch(/needs SMTP \(cc: the REST send request cannot carry it\)/);
    expect(out[2]!.error?.message).toMatch(/needs SMTP \(a text-only body: /);
    expect(await channels("auto rest")).toEqual({ "auto rest 0": "rest" });
  });

  test("CSV with templates: subject and text filled raw, HTML escaped; --attach read once, byte for byte in every message", async () => {
    const pdf = randomBytes(40_000);
    const attach = tmp.file("terms.pdf", pdf);
    const html = tmp.file("merge.html", "<p>Dear {{first}},</p><p>Your note: {{note}}</p><p>Plan {{ plan }}</p>");
    const text = tmp.file("merge.txt", "Dear {{first}},\nYour note: {{note}}\nPlan {{plan}}\n");
    const csv =
      "to,first,note,plan,header:X-Plan\r\n" +
      'ann@example.com,Ann,"<b>bold</b> & ""quoted""",gold,gold\r\n' +
      'bob@example.com,Bob,"two\nlines, with a comma",silver,silver\r\n' +
      "cat@example.com,Cat,Tom & Jerry,bronze,bronze\r\n";
    const input = tmp.file("merge.csv", csv);
    // Slow answers, one at a time: the file is overwritten (same size) after the first
    // message is stored. Read once means every message still carries the first bytes.
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 300 };
    const running = batch([
      input,
      "--transport",
      "smtp",
      "-f",
      "Billing <billing@example.com>",
      "-s",
      "merge {{first}} <{{plan}}>",
      "--html-file",
      html,
      "--text-file",
      text,
      "-a",
      `${attach}#Terms & Conditions.pdf`,
      "--concurrency",
      "1",
      "--json",
    ]);
    await until(async () => (await stored("merge ")).length >= 1, 15_000);
    writeFileSync(attach, randomBytes(pdf.length));
    const r = await running;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((x) => x.status)).toEqual(["sent", "sent", "sent"]);

    const got = await stored("merge ");
    expect(got.map((m) => m.subject).sort()).toEqual(["merge Ann <gold>", "merge Bob <silver>", "merge Cat <bronze>"]);
    const eml = async (subject: string) =>
      parseEml((await t.sb.store.raw(got.find((m) => m.subject === subject)!.id))!);
    const ann = await eml("merge Ann <gold>");
    expect(ann.html).toContain("<p>Your note: &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;</p>");
    expect(ann.text).toContain('Your note: <b>bold</b> & "quoted"');
    expect(ann.from).toMatchObject({ name: "Billing", address: "billing@example.com" });
    expect(ann.headers.find((h) => h.key === "x-plan")?.value).toBe("gold");
    const bob = await eml("merge Bob <silver>");
    expect(bob.text).toContain("Your note: two\nlines, with a comma\nPlan silver");
    const cat = await eml("merge Cat <bronze>");
    expect(cat.html).toContain("Tom &amp; Jerry");
    expect(cat.text).toContain("Tom & Jerry");
    for (const e of [ann, bob, cat]) {
      expect(e.attachments).toHaveLength(1);
      expect(e.attachments[0]!.filename).toBe("Terms & Conditions.pdf");
      expect(Buffer.from(e.attachments[0]!.content as ArrayBuffer).equals(pdf)).toBe(true);
    }
  });

  test("--concurrency 32: many sends in flight at once, and no warning on stderr", async () => {
    const input = tmp.file(
      "wide.jsonl",
      jsonl(Array.from({ length: 48 }, (_, i) => ({ to: `w${i}@example.com`, subject: `wide ${i}`, text: "x" }))),
    );
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 200 };
    const r = await batch([input, "-f", "wide@example.com", "--concurrency", "32", "--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).filter((x) => x.status === "sent")).toHaveLength(48);
    expect(r.stderr.split("\n").filter((l) => l && !l.startsWith('{"summary"'))).toEqual([]);
    expect(await stored("wide ")).toHaveLength(48);
  });

  test("stdin: a JSON lines pipeline is sent, and the same pipeline again sends nothing", async () => {
    const input = jsonl(
      [1, 2, 3].map((i) => ({ to: `p${i}@example.com`, subject: `stdin ${i}`, text: "from a pipe" })),
    );
    const r = await batch(["-", "-f", "pipe@example.com", "--json"], {}, input);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((x) => x.status)).toEqual(["sent", "sent", "sent"]);
    expect(await stored("stdin ")).toHaveLength(3);
    const again = await batch(["-", "-f", "pipe@example.com", "--json"], {}, input);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(jsonLines(again.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    expect(await stored("stdin ")).toHaveLength(3);
  });

  test("--api-key-stdin: the key piped on stdin, the rows from a file", async () => {
    const input = tmp.file(
      "keyed.jsonl",
      jsonl([1, 2].map((i) => ({ to: `k${i}@example.com`, subject: `keyed ${i}`, text: "x" }))),
    );
    const key = readFileSync(t.env.MAILSEND_API_KEY_FILE!, "utf8");
    const r = await batch(
      [input, "-f", "key@example.com", "--api-key-stdin", "--json"],
      { MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: undefined },
      key,
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((x) => x.status)).toEqual(["sent", "sent"]);
    expect(await stored("keyed ")).toHaveLength(2);
    // Without the pipe there is no key: the batch says so, and sends nothing.
    const none = await batch(
      [input, "-f", "key@example.com", "--api-key-stdin", "--fresh"],
      { MAILSEND_API_KEY_FILE: undefined, MAILSEND_API_KEY: undefined },
      "",
    );
    expect(none.exitCode).not.toBe(0);
    expect(await stored("keyed ")).toHaveLength(2);
  });
});

describe("bad rows", () => {
  const rows = (p: string) => [
    { to: "ok1@example.com", subject: `${p} ok 1`, first: "A" },
    { to: "not-an-address", subject: `${p} bad address`, first: "B" },
    { to: "ok2@example.com", subject: `${p} ok 2`, first: "C" },
    { to: "ok3@example.com", subject: `${p} no first` },
    '{"to": "ok4@example.com", "subject": broken',
    { to: "ok5@example.com", subject: `${p} ok 5`, first: "E" },
  ];
  const flags = (input: string) => [
    input,
    "-f",
    "rows@example.com",
    "--html-file",
    tmp.file("rows.html", "<p>Hi {{first}}</p>"),
  ];

  test("are listed before anything is sent; the rest are delivered; exit 65 and a summary line", async () => {
    const input = tmp.file("bad-rows.jsonl", jsonl(rows("badrows")));
    const results = join(tmp.dir, "bad-rows-results.jsonl");
    const r = await batch([...flags(input), "--results", results, "--json"]);
    expect(r.exitCode, r.stderr).toBe(65);
    const out = jsonLines(r.stdout);
    // Pass 1 reports every bad row; only then does pass 2 send.
    expect(out.map((x) => x.status)).toEqual(["invalid", "invalid", "invalid", "sent", "sent", "sent"]);
    const invalid = out.slice(0, 3);
    expect(invalid.map((x) => [x.index, x.line, x.error!.exit, x.error!.class])).toEqual([
      [1, 2, 65, "dataerr"],
      [3, 4, 65, "dataerr"],
      [4, 5, 65, "dataerr"],
    ]);
    expect(invalid[0]!.error!.message).toMatch(/row 2 \(line 2\).*not-an-address/);
    expect(invalid[0]!.recipients).toEqual(["not-an-address"]);
    expect(invalid[1]!.error!.message).toMatch(/row 4 \(line 4\).*\{\{first\}\}/);
    expect(invalid[2]!.error!.code).toBe("invalid_json");
    expect(invalid[2]!.error!.message).toMatch(/row 5 \(line 5\).*not valid JSON/);
    expect(jsonLines(readFileSync(results, "utf8"))).toEqual(out);
    expect((await stored("badrows ")).map((m) => m.subject).sort()).toEqual([
      "badrows ok 1",
      "badrows ok 2",
      "badrows ok 5",
    ]);
    expect(summaryOf(r)).toMatchObject({ total: 6, sent: 3, invalid: 3, exitCode: 65 });
  });

  test("human output: each bad row on stderr, the summary line on stdout", async () => {
    const input = tmp.file("bad-rows-human.jsonl", jsonl(rows("human")));
    const r = await batch(flags(input));
    expect(r.exitCode, r.stderr).toBe(65);
    expect(r.stdout).toMatch(/^3 sent, 3 invalid \(of 6\) in \d+\.\d s\n$/);
    expect(r.stderr).toMatch(/invalid: row 2 \(line 2\): .*not-an-address/);
    expect(r.stderr).toMatch(/invalid: row 4 \(line 4\): .*no value for \{\{first\}\}/);
    expect(r.stderr).toMatch(/invalid: row 5 \(line 5\): not valid JSON/);
    expect(await stored("human ")).toHaveLength(3);
  });

  test("--check sends nothing: 65 with a bad row, 0 when every row is good (and needs no key)", async () => {
    const bad = tmp.file("check-bad.jsonl", jsonl(rows("check")));
    const before = t.sb.stats.toJSON();
    const r = await batch([...flags(bad), "--check"]);
    expect(r.exitCode, r.stderr).toBe(65);
    expect(r.stdout).toBe("3 valid, 3 invalid (of 6); nothing sent (--check)\n");
    expect(r.stderr).toMatch(/invalid: row 2 \(line 2\)/);

    const good = tmp.file(
      "check-good.csv",
      "to,subject,first\na@example.com,check good 1,A\nb@example.com,check good 2,B\n",
    );
    const ok = await batch([...flags(good), "--check", "--json"], { MAILSEND_API_KEY_FILE: undefined });
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(ok.stdout).toBe("");
    expect(summaryOf(ok)).toMatchObject({ total: 2, invalid: 0, sent: 0, check: true, journal: null });
    expect(t.sb.stats.toJSON()).toEqual(before);
    expect(await stored("check")).toHaveLength(0);
  });

  test("a row repeating another row's idempotency_key is bad (the service would drop it as a repeat); the rest are sent", async () => {
    const input = tmp.file(
      "repeated-keys.jsonl",
      jsonl([
        { to: "k1@example.com", subject: "repkey 1", text: "x", idempotency_key: "same-key-1" },
        { to: "k2@example.com", subject: "repkey 2", text: "x", idempotency_key: "other-key" },
        { to: "k3@example.com", subject: "repkey 3", text: "x", idempotency_key: "same-key-1" },
        { to: "k4@example.com", subject: "repkey 4", text: "x" },
      ]),
    );
    const check = await batch([input, "-f", "rows@example.com", "--check", "--json"]);
    expect(check.exitCode, check.stderr).toBe(65);
    const bad = jsonLines(check.stdout);
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatchObject({ index: 2, status: "invalid", error: { code: "invalid_message", exit: 65 } });
    expect(bad[0]!.error!.message).toMatch(/row 3 \(line 3\): idempotency_key "same-key-1" is also row 1's/);

    const r = await batch([input, "-f", "rows@example.com", "--json"]);
    expect(r.exitCode, r.stderr).toBe(65);
    const out = jsonLines(r.stdout);
    expect(out[0]).toMatchObject({ index: 2, status: "invalid" });
    expect(
      out
        .slice(1)
        .map((x) => [x.index, x.status])
        .sort(),
    ).toEqual([
      [0, "sent"],
      [1, "sent"],
      [3, "sent"],
    ]);
    expect((await stored("repkey ")).map((m) => m.subject).sort()).toEqual(["repkey 1", "repkey 2", "repkey 4"]);
  });

  test("--fail-fast sends nothing when a row is bad", async () => {
    const input = tmp.file("failfast.jsonl", jsonl(rows("failfast")));
    const before = t.sb.stats.toJSON();
    const r = await batch([...flags(input), "--fail-fast", "--json"]);
    expect(r.exitCode, r.stderr).toBe(65);
    expect(jsonLines(r.stdout).map((x) => x.status)).toEqual(["invalid", "invalid", "invalid"]);
    expect(t.sb.stats.toJSON()).toEqual(before);
    expect(await stored("failfast")).toHaveLength(0);
  });

  test("--fail-fast stops at the first failed send", async () => {
    const input = tmp.file(
      "failfast-send.jsonl",
      jsonl([1, 2, 3, 4, 5].map((i) => ({ to: `f${i}@example.com`, subject: `ffsend ${i}`, text: "x" }))),
    );
    t.sb.faults.config = { ...t.sb.faults.config, failRate: 1, failStatus: 400 };
    const r = await batch([input, "-f", "ff@example.com", "--fail-fast", "--concurrency", "1", "--json"]);
    expect(r.exitCode, r.stderr).toBe(65);
    const out = jsonLines(r.stdout);
    expect(out.map((x) => x.status)).toEqual(["failed"]);
    expect(out[0]!.error).toMatchObject({ code: "invalid_message", exit: 65, class: "dataerr" });
    expect(summaryOf(r)).toMatchObject({ total: 5, sent: 0, failed: 1 });
  });
});

describe("running the same command again", () => {
  test("a completed batch sends nothing the second time: exit 0, every item skipped with its message id", async () => {
    const input = tmp.file(
      "again.jsonl",
      jsonl([0, 1, 2, 3].map((i) => ({ to: `a${i}@example.com`, subject: `again ${i}`, text: "x" }))),
    );
    const results = join(tmp.dir, "again-results.jsonl");
    const first = await batch([input, "-f", "again@example.com", "--results", results, "--json"]);
    expect(first.exitCode, first.stderr).toBe(0);
    const sent = byIndex(jsonLines(first.stdout));
    const before = t.sb.stats.toJSON();

    const second = await batch([input, "-f", "again@example.com", "--results", results]);
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/^0 sent, 4 already sent \(of 4\)/);
    expect(t.sb.stats.toJSON()).toEqual(before);
    // The results file describes this run: one line per item.
    const again = byIndex(jsonLines(readFileSync(results, "utf8")));
    expect(again.map((x) => x.status)).toEqual(["skipped", "skipped", "skipped", "skipped"]);
    expect(again.map((x) => x.message_id)).toEqual(sent.map((x) => x.message_id));
    expect(again.map((x) => x.idempotency_key)).toEqual(sent.map((x) => x.idempotency_key));
    expect(await stored("again ")).toHaveLength(4);
  });

  test("a changed input with an unfinished journal is refused; --fresh starts over", async () => {
    const rows = [0, 1, 2].map((i) => ({ to: `c${i}@example.com`, subject: `changed ${i}`, text: "x" }));
    const input = tmp.file("changed.jsonl", jsonl(rows));
    // Unfinished: the service is down for the first run.
    t.sb.faults.config = { ...t.sb.faults.config, failRate: 1, failStatus: 503 };
    const down = await batch([input, "-f", "ch@example.com", "--json"]);
    expect(down.exitCode, down.stderr).toBe(69);
    expect(jsonLines(down.stdout).map((x) => x.status)).toEqual(["failed", "failed", "failed"]);
    expect(jsonLines(down.stdout)[0]!.error).toMatchObject({ code: "service_error", exit: 69, class: "unavailable" });
    t.sb.faults.config = { ...t.sb.faults.config, failRate: 0 };

    writeFileSync(input, jsonl([...rows, { to: "c3@example.com", subject: "changed 3", text: "x" }]));
    const refused = await batch([input, "-f", "ch@example.com"]);
    expect(refused.exitCode).toBe(64);
    expect(refused.stderr).toMatch(/belongs to a different input, and some of its items are unfinished/);
    expect(refused.stderr).toMatch(/--fresh/);
    expect(await stored("changed ")).toHaveLength(0);

    const fresh = await batch([input, "-f", "ch@example.com", "--fresh", "--json"]);
    expect(fresh.exitCode, fresh.stderr).toBe(0);
    expect(jsonLines(fresh.stdout).map((x) => x.status)).toEqual(["sent", "sent", "sent", "sent"]);
    expect((await stored("changed ")).map((m) => m.subject).sort()).toEqual([
      "changed 0",
      "changed 1",
      "changed 2",
      "changed 3",
    ]);
    const journal = summaryOf(fresh).journal as string;
    // The old journal is kept beside the new one, not erased.
    expect(existsSync(journal)).toBe(true);
    expect(
      readdirSync(dirname(journal)).filter((f) => f.startsWith(`${basename(journal)}.`) && f.endsWith(".old")),
    ).toHaveLength(1);
  });

  test("an unfinished run is finished by the same command: only what failed is sent, with the same keys", async () => {
    const input = tmp.file(
      "retry.jsonl",
      jsonl([0, 1, 2, 3, 4, 5].map((i) => ({ to: `r${i}@example.com`, subject: `retry ${i}`, text: "x" }))),
    );
    const results = join(tmp.dir, "retry-results.jsonl");
    t.sb.faults.config = { ...t.sb.faults.config, failRate: 0.5, failStatus: 503 };
    const first = await batch([input, "-f", "retry@example.com", "--results", results, "--json"]);
    t.sb.faults.config = { ...t.sb.faults.config, failRate: 0 };
    const firstOut = byIndex(jsonLines(first.stdout));
    const failed = firstOut.filter((x) => x.status === "failed").map((x) => x.index);
    expect(first.exitCode).toBe(failed.length ? 69 : 0);
    expect(summaryOf(first).journal).toBe(defaultJournal(input));

    const second = await batch([input, "-f", "retry@example.com", "--results", results, "--json"]);
    expect(second.exitCode, second.stderr).toBe(0);
    const secondOut = byIndex(jsonLines(second.stdout));
    expect(secondOut.filter((x) => x.status === "sent").map((x) => x.index)).toEqual(failed);
    expect(secondOut.filter((x) => x.status === "skipped").length).toBe(6 - failed.length);
    expect(secondOut.map((x) => x.idempotency_key)).toEqual(firstOut.map((x) => x.idempotency_key));
    const got = await stored("retry ");
    expect(got.map((m) => m.subject).sort()).toEqual([0, 1, 2, 3, 4, 5].map((i) => `retry ${i}`));
  });
});

describe("the journal does not move with --results or --journal", () => {
  const rowsOf = (prefix: string) =>
    jsonl(
      [0, 1, 2].map((i) => ({ from: "j@example.com", to: `j${i}@example.com`, subject: `${prefix} ${i}`, text: "x" })),
    );

  test("adding or changing --results on a rerun skips what was sent (the journal is the input's, in the state dir)", async () => {
    const input = tmp.file("moved-results.jsonl", rowsOf("moved results"));
    const first = await batch([input, "--json"]);
    expect(first.exitCode, first.stderr).toBe(0);
    const withResults = await batch([input, "--results", join(tmp.dir, "moved-a.jsonl"), "--json"]);
    expect(withResults.exitCode, withResults.stderr).toBe(0);
    expect(jsonLines(withResults.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    const other = await batch([input, "--results", join(tmp.dir, "moved-b.jsonl"), "--json"]);
    expect(jsonLines(other.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    expect(summaryOf(other).journal).toBe(defaultJournal(input));
    expect(await stored("moved results ")).toHaveLength(3);
  });

  test("an older version's <results>.journal is continued when --results names it", async () => {
    const input = tmp.file("legacy.jsonl", rowsOf("legacy journal"));
    const results = join(tmp.dir, "legacy-results.jsonl");
    // What an older mailsend made with --results: the journal beside the results file.
    const old = await batch([input, "--journal", `${results}.journal`, "--json"]);
    expect(old.exitCode, old.stderr).toBe(0);
    const again = await batch([input, "--results", results, "--json"]);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(summaryOf(again).journal).toBe(`${results}.journal`);
    expect(jsonLines(again.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    expect(await stored("legacy journal ")).toHaveLength(3);
  });

  test("an existing journal of ANOTHER input is no way around the guard: --journal naming it, or an old <results>.journal of another input", async () => {
    const input = tmp.file("guard-x.jsonl", rowsOf("guard x"));
    const other = tmp.file("guard-y.jsonl", rowsOf("guard y"));
    const shared = join(tmp.dir, "guard-shared.journal");
    expect((await batch([other, "--journal", shared, "-q"])).exitCode).toBe(0);
    expect((await batch([input, "-q"])).exitCode).toBe(0);
    expect(await stored("guard x ")).toHaveLength(3);
    // --journal names a journal that exists, of the other input: this input's sends are elsewhere.
    const viaJournal = await batch([input, "--journal", shared]);
    expect(viaJournal.exitCode, viaJournal.stderr).toBe(64);
    expect(viaJournal.stderr).toContain(`--journal ${defaultJournal(input)} to continue it`);
    // --results R where R.journal exists but is the other input's: the default journal is used, which skips.
    const results = join(tmp.dir, "guard-shared");
    expect((await batch([other, "--journal", `${results}.journal`, "--fresh", "-q"])).exitCode).toBe(0);
    const viaResults = await batch([input, "--results", results, "--json"]);
    expect(viaResults.exitCode, viaResults.stderr).toBe(0);
    expect(summaryOf(viaResults).journal).toBe(defaultJournal(input));
    expect(jsonLines(viaResults.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    expect(await stored("guard x ")).toHaveLength(3);
  });

  test("a new --journal while another journal of the same input records sends is refused (64), also by --check; --fresh sends again", async () => {
    const input = tmp.file("new-journal.jsonl", rowsOf("new journal"));
    const first = await batch([input, "-q"]);
    expect(first.exitCode, first.stderr).toBe(0);
    const fresh = join(tmp.dir, "elsewhere.journal");
    const refused = await batch([input, "--journal", fresh]);
    expect(refused.exitCode).toBe(64);
    expect(refused.stderr).toContain(`the journal ${defaultJournal(input)} records 3 items of this input as sent`);
    expect(refused.stderr).toContain(`--journal ${defaultJournal(input)} to continue it`);
    expect(refused.stderr).toContain("--fresh to send everything again");
    expect(existsSync(fresh)).toBe(false);
    const checked = await batch([input, "--journal", fresh, "--check"]);
    expect(checked.exitCode).toBe(64);
    expect(checked.stderr).toContain(`--journal ${defaultJournal(input)} to continue it`);
    expect(await stored("new journal ")).toHaveLength(3);

    // --fresh sends again; the journal last used (batches/<hash>.last) is then the one a new journal is refused for.
    const forced = await batch([input, "--journal", fresh, "--fresh", "-q"]);
    expect(forced.exitCode, forced.stderr).toBe(0);
    expect(await stored("new journal ")).toHaveLength(6);
    const continued = await batch([input, "--journal", fresh, "--json"]);
    expect(jsonLines(continued.stdout).map((x) => x.status)).toEqual(["skipped", "skipped", "skipped"]);
    const third = join(tmp.dir, "third.journal");
    const again = await batch([input, "--journal", third]);
    expect(again.exitCode).toBe(64);
    expect(again.stderr).toContain(`--journal ${fresh} to continue it`);
    expect(await stored("new journal ")).toHaveLength(6);
  });
});

describe("what a first run trips over", () => {
  const warnings = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("warning: "));
  const jsonWarnings = (stderr: string) =>
    stderr
      .split("\n")
      .filter((l) => l.startsWith('{"warning"'))
      .map((l) => (JSON.parse(l) as { warning: string }).warning);

  test("a name column used as {{name}}: one warning before sending (also with --check, also with --json); it is the From name", async () => {
    const html = tmp.file("renewal.html", "<p>Dear {{name}}, your {{plan}} plan renews soon.</p>");
    const input = tmp.file(
      "renewal.csv",
      "to,name,plan\nalice@example.com,Alice,gold\nbob@example.com,Bob,silver\ncat@example.com,Cat,bronze\n",
    );
    const args = [input, "-f", "Billing <billing@example.com>", "-s", "fieldname {{plan}}", "--html-file", html];

    const check = await batch([...args, "--check"]);
    expect(check.exitCode, check.stderr).toBe(0);
    const w = warnings(check.stderr);
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(
      /column "name" is the send request's field name: .*sender's display name.*\{\{name\}\} in --html-file.*Rename the column \(e\.g\. to first_name\)/,
    );
    const checkJson = await batch([...args, "--check", "--json"]);
    expect(checkJson.exitCode, checkJson.stderr).toBe(0);
    expect(jsonWarnings(checkJson.stderr)).toEqual([w[0]!.replace(/^warning: /, "")]);

    const r = await batch([...args, "--json"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(jsonWarnings(r.stderr)).toHaveLength(1);
    // The warning is true: the column became the From display name.
    const got = await stored("fieldname ");
    const alice = await parseEml((await t.sb.store.raw(got.find((m) => m.subject === "fieldname gold")!.id))!);
    expect(alice.from).toMatchObject({ name: "Alice", address: "billing@example.com" });

    // The README's way: a template-only column gets no warning and leaves the From name alone.
    const fixedHtml = tmp.file("renewal-fixed.html", "<p>Dear {{first_name}}, your {{plan}} plan renews soon.</p>");
    const fixed = tmp.file("renewal-fixed.csv", "to,first_name,plan\nalice@example.com,Alice,gold\n");
    const ok = await batch([
      fixed,
      "-f",
      "Billing <billing@example.com>",
      "-s",
      "firstname {{plan}}",
      "--html-file",
      fixedHtml,
    ]);
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(ok.stderr).toBe("");
    const m = (await stored("firstname "))[0]!;
    const eml = await parseEml((await t.sb.store.raw(m.id))!);
    expect(eml.from).toMatchObject({ name: "Billing", address: "billing@example.com" });
    expect(eml.html).toContain("Dear Alice,");
  });

  test("an edited input after a finished run: a notice on stderr that every row goes out again, and where the old journal is", async () => {
    const rows = [0, 1].map((i) => ({ to: `e${i}@example.com`, subject: `edited ${i}`, text: "x" }));
    const input = tmp.file("edited.jsonl", jsonl(rows));
    const first = await batch([input, "-f", "ed@example.com"]);
    expect(first.exitCode, first.stderr).toBe(0);
    expect(first.stderr).toBe("");

    writeFileSync(input, jsonl([...rows, { to: "e2@example.com", subject: "edited 2", text: "x" }]));
    const check = await batch([input, "-f", "ed@example.com", "--check"]);
    expect(check.exitCode, check.stderr).toBe(0);
    expect(warnings(check.stderr)).toHaveLength(1);
    expect(check.stderr).toMatch(
      /^warning: the input differs from the last run's \(finished at \d{4}-\d\d-\d\dT[\d:]+Z, 2 sent\), so sending it would start a new batch: every row of it would be sent/m,
    );

    const again = await batch([input, "-f", "ed@example.com", "--json"]);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(jsonLines(again.stdout).map((x) => x.status)).toEqual(["sent", "sent", "sent"]);
    const notice = jsonWarnings(again.stderr);
    expect(notice).toHaveLength(1);
    expect(notice[0]).toMatch(
      /^the input differs from the last run's \(finished at [^,]+Z, 2 sent\), so this is a new batch: every row of it is sent, also any the last run sent; the old journal is kept at (.+\.old)$/,
    );
    const kept = /kept at (.+\.old)$/.exec(notice[0]!)![1]!;
    expect(existsSync(kept)).toBe(true);
    expect(basename(kept).startsWith(basename(summaryOf(again).journal as string))).toBe(true);
    expect(await stored("edited ")).toHaveLength(5);

    // Run again unchanged: resumed, nothing sent, nothing to say.
    const same = await batch([input, "-f", "ed@example.com"]);
    expect(same.exitCode, same.stderr).toBe(0);
    expect(same.stderr).toBe("");
    expect(same.stdout).toMatch(/^0 sent, 3 already sent/);
  });

  test("off a terminal: no progress line at the start nor with --check; periodic lines only after the first interval", async () => {
    const input = tmp.file(
      "progress.jsonl",
      jsonl([0, 1, 2].map((i) => ({ to: `g${i}@example.com`, subject: `progress ${i}`, text: "x" }))),
    );
    const check = await batch([input, "-f", "pg@example.com", "--check"]);
    expect(check.exitCode, check.stderr).toBe(0);
    expect(check.stderr).toBe("");
    const quick = await batch([input, "-f", "pg@example.com"]);
    expect(quick.exitCode, quick.stderr).toBe(0);
    // Three quick sends finish within the first 5 s interval: nothing on stderr. (A machine
    // slow enough to pass 5 s may print one periodic line, never a line at the start.)
    expect(quick.stderr.split("\n").filter(Boolean).length).toBeLessThanOrEqual(1);
    expect(quick.stderr).toMatch(/^(|mailsend batch: sent \d+, failed 0, left \d+.*\n)$/);

    // Slow sends, one at a time: the run lasts well past the 5 s interval.
    const slow = tmp.file(
      "progress-slow.jsonl",
      jsonl([0, 1, 2, 3, 4, 5].map((i) => ({ to: `s${i}@example.com`, subject: `slowprogress ${i}`, text: "x" }))),
    );
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 1200 };
    const r = await batch([slow, "-f", "pg@example.com", "--concurrency", "1"]);
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = r.stderr.split("\n").filter(Boolean);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    for (const l of lines) expect(l).toMatch(/^mailsend batch: sent [1-9]\d*, failed 0, left \d+/);
  });

  test("a CSV display name with an unquoted comma: the hint says the comma separates recipients and how to quote it in CSV", async () => {
    const input = tmp.file(
      "comma.csv",
      'to,subject,text\n"Doe, Jane <jane@example.com>",comma 0,x\n"""Roe, Al"" <al@example.com>",comma 1,x\n',
    );
    const results = join(tmp.dir, "comma-results.jsonl");
    const r = await batch([input, "-f", "cm@example.com", "--results", results]);
    expect(r.exitCode, r.stderr).toBe(65);
    expect(r.stderr).toContain(
      'invalid: row 1 (line 2): to: missing @ in "Doe, Jane <jane@example.com>"\nhint: The comma separates recipients',
    );
    expect(r.stderr).toContain('as in "Doe, Jane" <jane@example.com>.');
    expect(r.stderr).toContain(
      'In a CSV cell the quotes are doubled and the cell quoted: """Doe, Jane"" <jane@example.com>".',
    );
    const bad = jsonLines(readFileSync(results, "utf8")).find((x) => x.index === 0)!;
    expect((bad.error as { hint?: string }).hint).toMatch(/comma separates recipients/);
    expect((await stored("comma ")).map((m) => m.subject)).toEqual(["comma 1"]);
  });

  test("--results: a skipped row names the same parsed addresses as the run that sent it", async () => {
    const input = tmp.file(
      "recips.csv",
      'to,subject,text\n"""Doe, Jane"" <jane@example.com>",recips 0,x\n"Ann <ann@example.com>, bob@example.com",recips 1,x\n',
    );
    const results = join(tmp.dir, "recips-results.jsonl");
    const first = await batch([input, "-f", "rc@example.com", "--results", results]);
    expect(first.exitCode, first.stderr).toBe(0);
    const sent = byIndex(jsonLines(readFileSync(results, "utf8")));
    expect(sent.map((x) => x.recipients)).toEqual([["jane@example.com"], ["ann@example.com", "bob@example.com"]]);
    const second = await batch([input, "-f", "rc@example.com", "--results", results]);
    expect(second.exitCode, second.stderr).toBe(0);
    const skipped = byIndex(jsonLines(readFileSync(results, "utf8")));
    expect(skipped.map((x) => x.status)).toEqual(["skipped", "skipped"]);
    expect(skipped.map((x) => x.recipients)).toEqual(sent.map((x) => x.recipients));
  });
});

describe("usage", () => {
  test("send's --dry-run / -n on batch: a usage error whose hint names --check", async () => {
    const input = tmp.file("dry.csv", "to\na@example.com\n");
    const r = await batch([input, "--dry-run", "-f", "a@example.com", "-s", "dry"]);
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(
      /^error: unknown option '--dry-run'\nhint: batch's dry run is --check: it validates every row and sends nothing\n/,
    );
    const j = await batch([input, "-n", "--json"]);
    expect(j.exitCode).toBe(64);
    expect(JSON.parse(j.stderr.trim())).toEqual({
      error: {
        code: "usage",
        message: "unknown option '-n'",
        exit: 64,
        hint: "batch's dry run is --check: it validates every row and sends nothing",
      },
    });
    expect((await batch([input, "--bogus"])).stderr).not.toMatch(/hint/);
  });
});
