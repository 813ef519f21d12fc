import { afterAll, describe, expect, it } from "vitest";
import type { MailsendError } from "../../src/core/errors.js";
import type { AlertFacts } from "../../src/run/mail.js";
import { loadRunTemplate, templateBody } from "../../src/run/template.js";
import { scratch } from "../helpers/tmp.js";

const dir = scratch("mailsend-run-template-");
afterAll(() => dir.remove());

let n = 0;
const load = (text: string) => loadRunTemplate(dir.file(`t${n++}.txt`, text));
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: MailsendError) => e.code,
  );

const facts: AlertFacts = {
  id: "nightly",
  named: true,
  command: "backup.sh",
  commandLine: "backup.sh --full",
  host: "db1",
  user: "backup",
  outcome: { status: 143, signal: "SIGTERM", timedOut: false, killed: false, startedAt: 0, endedAt: 90_000 },
  output: {
    tail: "disk full\n",
    tailLines: 1,
    kept: Buffer.from("disk full\n"),
    cutBytes: 0,
    totalBytes: 10,
    totalLines: 1,
  },
  timeoutMs: 0,
  quietForMs: 3_600_000,
};

describe("mailsend run --template", () => {
  it("refuses, before any run, what no run fills: an unknown name, a sometimes-missing fact without a default, stray braces", async () => {
    expect(await codeOf(load("{{exti}}"))).toBe("invalid_message");
    expect(await codeOf(load("{{signal}}"))).toBe("invalid_message");
    expect(await codeOf(load("{{ exit }"))).toBe("invalid_message");
    expect(await codeOf(load("{{signal|none}} {{CI URL|-}} {{Exit}}"))).toBe("ok");
    expect(await codeOf(load(" \n"))).toBe("empty_input");
    expect(await codeOf(loadRunTemplate(`${dir.dir}/absent.txt`))).toBe("file_not_found");
    expect(await codeOf(loadRunTemplate("-"))).toBe("usage");
  });

  it("fills the facts of the run and the failures a mail stands for", async () => {
    const t = await load(
      "{{status}} {{job}} on {{host}} as {{user}}: {{outcome}} (exit {{exit}}, {{signal|-}}) after {{duration}}; " +
        "{{failures}} since {{failures_since|?}}; {{branch|no branch}}\n{{output|}}",
    );
    const body = templateBody(t, facts, {
      kind: "failed",
      unmailed: 2,
      unmailedSince: 0,
      streak: 3,
      previous: "failed",
    });
    expect(body).toBe(
      "failed nightly on db1 as backup: killed by SIGTERM (exit 143, SIGTERM) after 90.0 s; 3 since 1970-01-01T00:00:00.000Z; no branch\ndisk full\n",
    );
    const { signal: _, ...exited } = facts.outcome;
    const ok = templateBody(
      t,
      { ...facts, outcome: { ...exited, status: 0, code: 0 } },
      {
        kind: "ok",
        unmailed: 0,
        streak: 0,
        previous: "ok",
      },
    );
    expect(ok).toContain("ok nightly on db1 as backup: exit 0 (exit 0, -)");
    expect(ok).toContain("0 since ?");
  });
});
