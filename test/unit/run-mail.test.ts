import { describe, expect, it } from "vitest";
import { ciRun } from "../../src/run/ci.js";
import { alertMessage, alertSubject, statusWords, type AlertFacts } from "../../src/run/mail.js";
import { OutputKeeper } from "../../src/run/output.js";

function facts(over: Partial<AlertFacts> = {}): AlertFacts {
  const keeper = new OutputKeeper(1024);
  keeper.add(Buffer.from("step 1\nstep 2 <failed>\n"));
  return {
    id: "/usr/local/bin/backup.sh --full",
    named: false,
    command: "/usr/local/bin/backup.sh",
    commandLine: "/usr/local/bin/backup.sh --full",
    host: "db1",
    user: "backup",
    outcome: {
      status: 3,
      code: 3,
      timedOut: false,
      killed: false,
      startedAt: Date.UTC(2026, 10, 28, 3, 0, 0),
      endedAt: Date.UTC(2026, 10, 28, 3, 0, 42),
    },
    output: keeper.result(50, 1024),
    timeoutMs: 0,
    quietForMs: 3_600_000,
    ...over,
  };
}

describe("the alert mail", () => {
  it("says in its subject what happened to which job on which host", () => {
    const mail = { kind: "failed" as const, unmailed: 0, streak: 1, previous: "ok" as const };
    expect(alertSubject(facts(), mail)).toBe("[db1] backup.sh failed (exit 3)");
    expect(alertSubject(facts({ named: true, id: "nightly" }), { ...mail, kind: "recovered" })).toBe(
      "[db1] nightly recovered",
    );
    const timedOut = facts({
      timeoutMs: 1_800_000,
      outcome: {
        ...facts().outcome,
        status: 137,
        code: undefined as never,
        signal: "SIGKILL",
        timedOut: true,
        killed: true,
      },
    });
    expect(statusWords(timedOut.outcome, timedOut.timeoutMs)).toBe("timed out after 30m, killed");
    expect(statusWords({ ...facts().outcome, status: 143, signal: "SIGTERM" }, 0)).toBe("killed by SIGTERM");
  });

  it("has the facts, the output escaped in a monospace block, and the CI run", () => {
    const ci = ciRun({
      GITHUB_ACTIONS: "true",
      GITHUB_SERVER_URL: "https://github.com",
      GITHUB_REPOSITORY: "acme/app",
      GITHUB_RUN_ID: "42",
      GITHUB_SHA: "abc123",
      GITHUB_REF_NAME: "main",
    });
    expect(ci).toEqual({
      system: "GitHub Actions",
      url: "https://github.com/acme/app/actions/runs/42",
      commit: "abc123",
      branch: "main",
    });
    const m = alertMessage(
      facts({ ci: ci! }),
      {
        kind: "failed",
        unmailed: 2,
        unmailedSince: Date.UTC(2026, 10, 28, 1, 0, 0),
        streak: 3,
        streakSince: Date.UTC(2026, 10, 28, 1, 0, 0),
        previous: "failed",
      },
      { from: { address: "cron@example.com" }, to: [{ address: "ops@example.com" }], idempotencyKey: "k" },
    );
    expect(m.html).toContain(
      '<pre style="font-family: monospace; white-space: pre-wrap">step 1\nstep 2 &lt;failed&gt;</pre>',
    );
    expect(m.html).toContain("<td>backup</td>");
    expect(m.html).toContain("<td>42.0 s</td>");
    expect(m.html).toContain("https://github.com/acme/app/actions/runs/42");
    expect(m.html).toContain("This mail stands for 3 failures since 2026-11-28T01:00:00.000Z");
    expect(m.attachments).toEqual([]);
    expect(m.headers).toContainEqual(["Auto-Submitted", "auto-generated"]);
    expect(
      ciRun({
        GITLAB_CI: "true",
        CI_JOB_URL: "https://gitlab.example.com/j/1",
        CI_COMMIT_SHA: "def",
        CI_COMMIT_REF_NAME: "dev",
      }),
    ).toMatchObject({ system: "GitLab CI", branch: "dev" });
    expect(ciRun({})).toBeUndefined();
  });
});
