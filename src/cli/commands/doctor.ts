import type { CertificateInfo } from "../../doctor/tls-info.js";
import type { CheckName, CheckResult, DoctorFlags } from "../../doctor/checks.js";
import { colorsFor, styledTerminal, type CliIO } from "../io.js";
import { toMailsendError } from "../../core/errors.js";
import { redactForPrint } from "../../core/redact.js";
import { annotation, inGitHubActions } from "../github.js";
import { reportError } from "../report.js";

const LABELS: Record<CheckName, string> = {
  "config.profile": "profile",
  "config.key": "API key",
  "config.transport": "transport",
  "config.rest": "REST config",
  "config.smtp": "SMTP config",
  ratelimit: "rate limit",
  outbox: "outbox",
  "rest.connect": "REST connect",
  "rest.key": "REST key",
  "smtp.connect": "SMTP TLS",
  "smtp.auth": "SMTP AUTH",
};
const WIDTH = Math.max(...Object.values(LABELS).map((l) => l.length));

function certificateJson(c: CertificateInfo): Record<string, unknown> {
  return {
    subject: c.subject,
    issuer: c.issuer,
    ...(c.altNames ? { alt_names: c.altNames } : {}),
    valid_from: c.validFrom,
    valid_to: c.validTo,
    days_left: c.daysLeft,
    ...(c.protocol ? { protocol: c.protocol } : {}),
    trusted: c.trusted,
    ...(c.trustError ? { trust_error: c.trustError } : {}),
  };
}

export function checkJson(r: CheckResult): Record<string, unknown> {
  return {
    name: r.name,
    ok: r.ok,
    ...(r.skipped ? { skipped: true } : {}),
    detail: redactForPrint(r.detail),
    ...(r.hint ? { hint: redactForPrint(r.hint) } : {}),
    ...(r.exit !== undefined ? { exit: r.exit, code: r.code } : {}),
    ...(r.certificate ? { certificate: certificateJson(r.certificate) } : {}),
  };
}

/**
 * One line per check. On a terminal: ✓ ✗ – in colour; otherwise (CI logs,
 * NO_COLOR, pipes) the words ok / FAIL / skip, which grep and read the same.
 */
function lineWriter(io: CliIO) {
  const c = colorsFor(io.stdout, io.env);
  const fancy = styledTerminal(io.stdout, io.env);
  const mark = (r: CheckResult) =>
    r.skipped ? (fancy ? c.dim("–") : "skip") : r.ok ? (fancy ? c.green("✓") : "ok  ") : fancy ? c.red("✗") : "FAIL";
  const indent = " ".repeat((fancy ? 2 : 5) + WIDTH + 2);
  return (r: CheckResult) => {
    const label = LABELS[r.name].padEnd(WIDTH);
    const shown = redactForPrint(r.detail);
    const detail = r.ok ? shown : `${shown} ${c.dim(`(exit ${r.exit})`)}`;
    io.stdout.write(`${mark(r)} ${r.skipped ? c.dim(label) : c.bold(label)}  ${r.skipped ? c.dim(detail) : detail}\n`);
    const hint = r.hint ? redactForPrint(r.hint) : undefined;
    if (hint) io.stdout.write(`${indent}${r.ok ? c.dim(`-> ${hint}`) : c.yellow(`-> ${hint}`)}\n`);
  };
}

export async function runDoctorCommand(opts: Record<string, unknown>, io: CliIO): Promise<number> {
  const flags = opts as DoctorFlags & { json?: boolean };
  const json = flags.json ?? false;
  try {
    const { runDoctor } = await import("../../doctor/checks.js");
    const print = json ? undefined : lineWriter(io);
    const report = await runDoctor(flags, { env: io.env, stdin: io.stdin, ...(print ? { onCheck: print } : {}) });
    if (json) {
      io.stdout.write(`${JSON.stringify({ ok: report.ok, checks: report.checks.map(checkJson) })}\n`);
    } else {
      const c = colorsFor(io.stdout, io.env);
      const failed = report.checks.filter((r) => !r.ok);
      const skipped = report.checks.filter((r) => r.skipped).length;
      const skippedNote = skipped ? ` (${skipped} skipped)` : "";
      io.stdout.write(
        report.firstFailure
          ? `\n${c.red(`${failed.length} of ${report.checks.length} checks failed`)}${skippedNote}; exit ${report.firstFailure.exit} from the first: ${LABELS[report.firstFailure.name]}\n`
          : `\n${c.green("all checks passed")}${skippedNote}\n`,
      );
    }
    const first = report.firstFailure;
    if (!first?.error) return 0;
    // The first failure sets the exit code. Under --json it is also the {"error":...} object
    // on stderr, as for any command; in human mode its line and hint above said it once already
    // (in GitHub Actions it still becomes an annotation, for the run's summary page).
    if (json) return reportError(first.error, io, { json });
    const err = toMailsendError(first.error);
    if (inGitHubActions(io.env))
      io.stderr.write(
        annotation("error", redactForPrint(err.message), err.hint ? redactForPrint(err.hint) : undefined),
      );
    return err.exitCode;
  } catch (e) {
    return reportError(e, io, { json });
  }
}
