/**
 * `mailsend run --template FILE`: the alert's body (text) as its readers want it, its
 * `{{placeholders}}` filled from the run's facts by the message template engine. Read and checked
 * before the job runs: a typo found only when the alert is due would cost the alert.
 */
import { readFile } from "node:fs/promises";
import { MailsendError } from "../core/errors.js";
import { fileError, shownPath, utf8 } from "../core/read.js";
import { looseName, PLACEHOLDER_SOURCE, render, strayBraces } from "../message/template.js";
import type { AlertMail } from "./alert.js";
import { duration, statusWords, type AlertFacts } from "./mail.js";

/** Facts every run has. */
const ALWAYS = [
  "command",
  "job",
  "host",
  "user",
  "started",
  "ended",
  "duration",
  "exit",
  "outcome",
  "status",
  "failures",
] as const;
/** Facts a run may lack (no signal, no output, not in CI): their placeholders need a default, {{signal|none}}. */
const SOMETIMES = ["signal", "output", "failures_since", "ci", "ci_url", "commit", "branch"] as const;

type Fact = (typeof ALWAYS)[number] | (typeof SOMETIMES)[number];

export interface RunTemplate {
  /** The flag and file, for messages. */
  label: string;
  text: string;
}

/** Reads --template's file and checks its placeholders: 66 unreadable or empty, 65 a placeholder no run fills. */
export async function loadRunTemplate(path: string): Promise<RunTemplate> {
  if (path === "-")
    throw new MailsendError("usage", "--template - is not read from stdin: the job's stdin is its own", {
      hint: "Give the template as a file: --template /etc/mailsend/alert.txt",
    });
  const label = `--template ${shownPath(path)}`;
  let text: string;
  try {
    text = utf8(await readFile(path), label);
  } catch (e) {
    throw e instanceof MailsendError ? e : fileError(e, path, "--template file");
  }
  if (!text.trim()) throw new MailsendError("empty_input", `${label} is empty`);
  checkPlaceholders(text, label);
  return { label, text };
}

function checkPlaceholders(text: string, label: string): void {
  const always = new Set<string>(ALWAYS.map(looseName));
  const sometimes = new Set<string>(SOMETIMES.map(looseName));
  const unknown = new Set<string>();
  const needDefault = new Set<string>();
  for (const m of text.matchAll(new RegExp(PLACEHOLDER_SOURCE, "gu"))) {
    const name = looseName(m[1]!);
    if (!always.has(name) && !sometimes.has(name)) unknown.add(`{{${m[1]}}}`);
    else if (sometimes.has(name) && m[2] === undefined) needDefault.add(m[1]!);
  }
  const known = `The placeholders: ${[...ALWAYS, ...SOMETIMES].join(", ")}.`;
  if (unknown.size > 0)
    throw new MailsendError("invalid_message", `${label}: unknown placeholder ${[...unknown].join(", ")}`, {
      hint: known,
    });
  if (needDefault.size > 0) {
    const first = [...needDefault][0];
    throw new MailsendError(
      "invalid_message",
      `${label}: a run may have no ${[...needDefault].join(", ")}; give ${needDefault.size === 1 ? "it" : "each"} a default`,
      { hint: `{{${first}|text}}, or {{${first}|}} for nothing: ${SOMETIMES.join(", ")} are not there in every run.` },
    );
  }
  const stray = strayBraces(text);
  if (stray.length > 0)
    throw new MailsendError(
      "invalid_message",
      `${label} has braces that are no placeholder: ${stray.map((x) => JSON.stringify(x)).join(", ")}`,
      { hint: `A placeholder is {{name}} or {{name|default}}. ${known}` },
    );
}

/** The body of this run's mail from the template. */
export function templateBody(t: RunTemplate, f: AlertFacts, mail: AlertMail): string {
  return render(t.text, templateVars(f, mail), "text", t.label);
}

function templateVars(f: AlertFacts, mail: AlertMail): Record<Fact, string | number | undefined> {
  const o = f.outcome;
  const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
  // The failures this mail stands for: this one and those kept quiet, or the streak a recovery ends.
  const failures = mail.kind === "failed" ? mail.unmailed + 1 : mail.kind === "recovered" ? mail.streak : 0;
  const since =
    mail.kind === "failed"
      ? mail.unmailed > 0
        ? mail.unmailedSince
        : o.startedAt
      : mail.kind === "recovered"
        ? mail.streakSince
        : undefined;
  return {
    command: f.commandLine,
    job: f.id,
    host: f.host,
    // A user without a name (no passwd entry in a container) is still someone.
    user: f.user ?? (process.getuid ? `uid ${process.getuid()}` : undefined),
    started: iso(o.startedAt),
    ended: iso(o.endedAt),
    duration: duration(o.endedAt - o.startedAt),
    exit: o.status,
    outcome: statusWords(o, f.timeoutMs),
    status: mail.kind,
    failures,
    signal: o.signal,
    output: f.output.tail,
    failures_since: iso(since),
    ci: f.ci?.system,
    ci_url: f.ci?.url,
    commit: f.ci?.commit,
    branch: f.ci?.branch,
  };
}
