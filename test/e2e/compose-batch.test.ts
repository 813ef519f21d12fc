/**
 * `mailsend batch` with an HTML template that shows local images:
 * every row's message carries them inline with the same cids and a text
 * part, each image file is read once for all rows, and over REST each row
 * fails with the reason instead of losing its images.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInProcess } from "../helpers/cli.js";
import { inProcessSandbox, overRest, parseEml, type TestSandbox } from "../helpers/sandbox.js";

let t: TestSandbox;
let dir: string;

const png = (fill: number) =>
  Buffer.concat([Buffer.from("89504e470d0a1a0a0000000d49484452", "hex"), Buffer.alloc(4000, fill)]);
const FIRST = png(1);

beforeAll(async () => {
  t = overRest(await inProcessSandbox());
  dir = join(t.scratch.dir, "tpl");
  mkdirSync(join(dir, "img"), { recursive: true });
  writeFileSync(join(dir, "img", "logo.png"), FIRST);
  writeFileSync(
    join(dir, "mail.html"),
    '<h1>Hello {{first}}</h1><p><img src="img/logo.png" alt="logo"> Your plan: {{plan}}</p>',
  );
  writeFileSync(
    join(dir, "rows.csv"),
    "to,first,plan\r\nann@example.com,Ann,gold\r\nbob@example.com,Bob,silver\r\ncat@example.com,Cat,bronze\r\n",
  );
});

afterAll(async () => {
  await t?.stop();
  t?.scratch.remove();
});

const jsonLines = (s: string) =>
  s
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

async function until(f: () => Promise<boolean>, ms: number) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("timed out");
}

describe("batch with an HTML template that shows local images", () => {
  it("over SMTP: each row's message has the image inline (read once for all rows) and a text part", async () => {
    const stored = async () => (await t.sb.store.list()).filter((m) => m.subject.startsWith("plan "));
    t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 300 };
    try {
      const running = runInProcess(
        [
          "batch",
          join(dir, "rows.csv"),
          "--transport",
          "smtp",
          "-f",
          "ci@example.com",
          "-s",
          "plan {{first}}",
          "--html-file",
          join(dir, "mail.html"),
          "--concurrency",
          "1",
          "--json",
        ],
        { env: t.env, timeoutMs: 30_000 },
      );
      // Read once: the file changes after the first message is stored, and no later message sees it.
      await until(async () => (await stored()).length >= 1, 15_000);
      writeFileSync(join(dir, "img", "logo.png"), png(2));
      const r = await running;
      expect(r.exitCode, r.stderr).toBe(0);
      expect(jsonLines(r.stdout).map((x) => x.status)).toEqual(["sent", "sent", "sent"]);
    } finally {
      t.sb.faults.config = { ...t.sb.faults.config, latencyMs: 0 };
      writeFileSync(join(dir, "img", "logo.png"), FIRST);
    }
    const got = await stored();
    expect(got).toHaveLength(3);
    const cids = new Set<string>();
    for (const m of got) {
      const email = await parseEml((await t.sb.store.raw(m.id))!);
      const inline = email.attachments.filter((a) => a.related);
      expect(inline).toHaveLength(1);
      expect(Buffer.from(inline[0]!.content as ArrayBuffer).equals(FIRST)).toBe(true);
      const cid = inline[0]!.contentId!.replace(/^<|>$/g, "");
      expect(email.html).toContain(`<img src="cid:${cid}" alt="logo">`);
      cids.add(cid);
      expect(email.text).toMatch(/Hello (Ann|Bob|Cat)\n/);
      expect(email.text).toContain("logo Your plan:");
    }
    expect(cids.size).toBe(1);
  });

  it("over REST: each row fails with the reason (inline images need SMTP), nothing is sent", async () => {
    const before = t.sb.store.count;
    const r = await runInProcess(
      [
        "batch",
        join(dir, "rows.csv"),
        "-f",
        "ci@example.com",
        "-s",
        "rest {{first}}",
        "--html-file",
        join(dir, "mail.html"),
        "--fresh",
        "--json",
      ],
      { env: t.env, timeoutMs: 30_000 },
    );
    // A batch reports bad rows as bad message data (65), each with its reason.
    expect(r.exitCode).toBe(65);
    const items = jsonLines(r.stdout);
    expect(items).toHaveLength(3);
    for (const item of items) {
      expect(item.status).toBe("invalid");
      expect(JSON.stringify(item)).toContain("--no-embed");
    }
    expect(t.sb.store.count).toBe(before);

    const ok = await runInProcess(
      [
        "batch",
        join(dir, "rows.csv"),
        "-f",
        "ci@example.com",
        "-s",
        "kept {{first}}",
        "--html-file",
        join(dir, "mail.html"),
        "--no-embed",
        "--fresh",
        "--json",
      ],
      { env: t.env, timeoutMs: 30_000 },
    );
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(t.sb.store.count).toBe(before + 3);
  });
});
