import { describe, expect, it } from "vitest";
import { decide, type JobState, type OnWhat } from "../../src/run/alert.js";
import { OutputKeeper } from "../../src/run/output.js";

const HOUR = 3_600_000;

/** The kinds of mail a sequence of outcomes (true: failed) sends, a minute apart. */
function mails(outcomes: boolean[], on: OnWhat, quietForMs = HOUR, gapMs = 60_000): string[] {
  let state: JobState | undefined;
  const sent: string[] = [];
  outcomes.forEach((failed, i) => {
    const d = decide(state, failed, on, quietForMs, 1_000_000 + i * gapMs);
    if (d.mail) sent.push(d.mail.kind);
    state = d.next;
  });
  return sent;
}

describe("the alert rule", () => {
  it("mails a failure once per quiet window", () => {
    expect(mails([true, true, true, true, true], "failure")).toEqual(["failed"]);
    expect(mails([true, true, true], "failure", HOUR, 2 * HOUR)).toEqual(["failed", "failed", "failed"]);
    expect(mails([false, false], "failure")).toEqual([]);
  });

  it("--on change: a failure, then one recovery; a first success is no news", () => {
    expect(mails([true, true, false, false], "change")).toEqual(["failed", "recovered"]);
    expect(mails([false, true, false], "change")).toEqual(["failed", "recovered"]);
    expect(mails([false], "change")).toEqual([]);
  });

  it("a flapping job does not mail more than once per window for its failures", () => {
    expect(mails([true, false, true, false, true, false], "change")).toEqual(["failed", "recovered"]);
  });

  it("a run that ended a moment before the last mail's (concurrent runs, another machine's clock) is quiet too", () => {
    const first = decide(undefined, true, "failure", HOUR, 10_000);
    expect(first.mail?.kind).toBe("failed");
    expect(decide(first.next, true, "failure", HOUR, 9_990).mail).toBeUndefined();
  });

  it("--on always mails successes too", () => {
    expect(mails([false, false, true, false], "always")).toEqual(["ok", "ok", "failed", "recovered"]);
  });

  it("the mail after a quiet spell counts the failures it stands for", () => {
    let state: JobState | undefined;
    for (let i = 0; i < 4; i++) state = decide(state, true, "failure", HOUR, 1_000 + i * 60_000).next;
    const d = decide(state, true, "failure", HOUR, 1_000 + 2 * HOUR);
    expect(d.mail).toMatchObject({
      kind: "failed",
      unmailed: 3,
      unmailedSince: 1_000 + 60_000,
      streak: 5,
      streakSince: 1_000,
    });
    expect(decide(undefined, true, "change", HOUR, 0).mail?.previous).toBe("unknown");
  });
});

describe("the output keeper", () => {
  it("keeps the end of a large output in bounded memory, cut at a line's start", () => {
    const keeper = new OutputKeeper(1000);
    for (let i = 1; i <= 10_000; i++) keeper.add(Buffer.from(`line ${i}\n`));
    const r = keeper.result(3, 64 * 1024);
    expect(r.tail).toBe("line 9998\nline 9999\nline 10000");
    expect(r.tailLines).toBe(3);
    expect(r.totalLines).toBe(10_000);
    expect(r.kept.length).toBeLessThanOrEqual(1000);
    expect(r.kept.toString().startsWith("line ")).toBe(true);
    expect(r.cutBytes + r.kept.length).toBe(r.totalBytes);
  });

  it("keeps less for the attachment than for the tail when told, nothing with 0", () => {
    const keeper = new OutputKeeper(64 * 1024);
    for (let i = 1; i <= 10_000; i++) keeper.add(Buffer.from(`line ${i}\n`));
    const small = keeper.result(2, 64 * 1024, 100);
    expect(small.tail).toBe("line 9999\nline 10000");
    expect(small.kept.length).toBeLessThanOrEqual(100);
    expect(small.kept.toString().endsWith("line 10000\n")).toBe(true);
    const none = keeper.result(2, 64 * 1024, 0);
    expect(none.tail).toBe("line 9999\nline 10000");
    expect(none.kept.length).toBe(0);
  });

  it("counts a last line without a newline, and shows all of a short output", () => {
    const keeper = new OutputKeeper(1000);
    keeper.add(Buffer.from("a\nb"));
    expect(keeper.result(50, 1000)).toMatchObject({ tail: "a\nb", tailLines: 2, totalLines: 2, cutBytes: 0 });
    expect(new OutputKeeper(10).result(5, 10)).toMatchObject({ tail: "", totalLines: 0, totalBytes: 0 });
  });
});
