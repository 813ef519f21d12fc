import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { parseSendmailArgs } from "../../src/sendmail/args.js";

function usageError(argv: string[]): MailsendError {
  try {
    parseSendmailArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    expect((e as MailsendError).exitCode).toBe(64);
    return e as MailsendError;
  }
  throw new Error(`expected a usage error for ${argv.join(" ")}`);
}

describe("sendmail's command line", () => {
  it("cron: -FCronDaemon -i -B8BITMIME -oem user", () => {
    const a = parseSendmailArgs(["-FCronDaemon", "-i", "-B8BITMIME", "-oem", "root"]);
    expect(a).toMatchObject({
      mode: "deliver",
      fullName: "CronDaemon",
      ignoreDots: true,
      readRecipients: false,
      recipients: ["root"],
    });
    expect(a.ignored.join(" ")).toContain("-B 8BITMIME");
    expect(a.ignored).toContain("-oem");
  });

  it("PHP mail(): -t -i, and clustered -ti / -it", () => {
    for (const argv of [["-t", "-i"], ["-ti"], ["-it"]]) {
      expect(parseSendmailArgs(argv)).toMatchObject({ readRecipients: true, ignoreDots: true, recipients: [] });
    }
  });

  it("-oi is -i; other -o options are ignored", () => {
    expect(parseSendmailArgs(["-oi"]).ignoreDots).toBe(true);
    const a = parseSendmailArgs(["-odi", "-odb", "-oee", "a@example.com"]);
    expect(a.ignoreDots).toBe(false);
    expect(a.ignored).toEqual(["-odi", "-odb", "-oee"]);
  });

  it("-f and -r, attached or the next word; -F likewise", () => {
    expect(parseSendmailArgs(["-fcron@example.com"]).from).toBe("cron@example.com");
    expect(parseSendmailArgs(["-f", "cron@example.com", "x@example.com"])).toMatchObject({
      from: "cron@example.com",
      recipients: ["x@example.com"],
    });
    expect(parseSendmailArgs(["-r", "r@example.com"]).from).toBe("r@example.com");
    expect(parseSendmailArgs(["-F", "Cron Daemon"]).fullName).toBe("Cron Daemon");
    // A flag cluster ending in an option with a value: -tf addr.
    expect(parseSendmailArgs(["-tif", "a@example.com"])).toMatchObject({
      readRecipients: true,
      ignoreDots: true,
      from: "a@example.com",
    });
  });

  it("the null sender -f '<>' leaves the default sender", () => {
    const a = parseSendmailArgs(["-f", "<>", "a@example.com"]);
    expect(a.from).toBeUndefined();
    expect(a.ignored[0]).toContain("no sender");
  });

  it("s-nail: -i -f me -- recipients; after -- everything is a recipient", () => {
    expect(parseSendmailArgs(["-i", "-f", "me@example.com", "--", "u@example.com", "-weird"])).toMatchObject({
      from: "me@example.com",
      recipients: ["u@example.com", "-weird"],
    });
  });

  it("git send-email: -i then recipients; options may follow recipients", () => {
    expect(parseSendmailArgs(["-i", "root", "team@example.com", "-v"])).toMatchObject({
      ignoreDots: true,
      verbose: true,
      recipients: ["root", "team@example.com"],
    });
  });

  it("-bm delivers, -bp lists, -q flushes; mailq lists", () => {
    expect(parseSendmailArgs(["-bm", "a@example.com"]).mode).toBe("deliver");
    expect(parseSendmailArgs(["-bp"]).mode).toBe("list");
    expect(parseSendmailArgs(["-q"]).mode).toBe("flush");
    expect(parseSendmailArgs(["-q30m"]).mode).toBe("flush");
    expect(parseSendmailArgs([], "mailq").mode).toBe("list");
    // newaliases and -bi: nothing to rebuild; the aliases file is checked.
    expect(parseSendmailArgs(["-bi"]).mode).toBe("aliases");
    expect(parseSendmailArgs([], "newaliases").mode).toBe("aliases");
    expect(parseSendmailArgs(["-bs", "-i"]).mode).toBe("smtp");
    usageError(["-bp", "-q"]);
  });

  it("-N, -B, -R, -V and friends are accepted and named for -v", () => {
    const a = parseSendmailArgs(["-N", "never", "-R", "hdrs", "-V", "env1", "-m", "-n", "-U", "a@example.com"]);
    expect(a.recipients).toEqual(["a@example.com"]);
    expect(a.ignored.join("|")).toMatch(/-N never.*\|-R hdrs\|-V env1\|-m\|-n\|-U/);
  });

  it("sendmail 8.12's -Am and -Ac (its configuration file) are accepted and ignored; another -A is a usage error", () => {
    const a = parseSendmailArgs(["-Am", "-t", "-A", "c", "-i"]);
    expect(a).toMatchObject({ readRecipients: true, ignoreDots: true, recipients: [] });
    expect(a.ignored.join("|")).toMatch(/-Am .*\|-Ac /);
    expect(usageError(["-Ax"]).message).toBe("unknown option -Ax");
  });

  it("--queue and --profile (with = or a separate word)", () => {
    expect(parseSendmailArgs(["--queue", "always"]).queue).toBe("always");
    expect(parseSendmailArgs(["--queue=never", "--profile=work"])).toMatchObject({ queue: "never", profile: "work" });
    expect(usageError(["--queue", "later"]).message).toContain("always, auto or never");
  });

  it("an unknown option is a usage error naming it", () => {
    expect(usageError(["-x"]).message).toBe("unknown option -x");
    expect(usageError(["-tx"]).message).toContain("-x (in -tx)");
    expect(usageError(["--frobnicate"]).message).toContain("--frobnicate");
    expect(usageError(["-bd"]).message).toContain("-bd");
    expect(usageError(["-I"]).message).toContain("-I");
    // mail's -s is not sendmail's: a subject is a header of the message.
    expect(usageError(["-s", "Subject", "a@example.com"]).message).toContain("-s");
  });

  it("an option missing its value is a usage error", () => {
    expect(usageError(["-f"]).message).toContain("-f needs a value");
    expect(usageError(["--queue"]).message).toContain("--queue needs a value");
  });

  it("--help and --version", () => {
    expect(parseSendmailArgs(["-t", "--help"]).mode).toBe("help");
    expect(parseSendmailArgs(["--version"]).mode).toBe("version");
  });
});

describe('errors said to sendmail\'s callers (e.in("sendmail"))', () => {
  it("names the variables they can set, never send's flags", () => {
    const e = new MailsendError("connection_failed", "cannot reach smtp.example.com:587", {
      hint: (s) =>
        `Check ${s.pair("smtpHost", "smtpPort", true)}, or use ${s.value("transport", "rest")} for an HTTP address; raise ${s.flag("timeout")}. Check ${s.either("baseUrl")}.`,
      mayHaveBeenSent: false,
    });
    expect(e.hint).toBe(
      "Check --smtp-host / --smtp-port (MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT), or use --transport rest for an HTTP address; raise --timeout. Check --base-url / MAILSEND_BASE_URL.",
    );
    const said = e.in("sendmail");
    expect(said.hint).toBe(
      "Check MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT, or use MAILSEND_TRANSPORT=rest for an HTTP address; raise MAILSEND_TIMEOUT. Check MAILSEND_BASE_URL.",
    );
    expect(said.code).toBe("connection_failed");
    expect(said.exitCode).toBe(69);
    expect(
      new MailsendError("timeout", (s) => `Check ${s.pair("smtpHost", "smtpPort")}: this may not be it`).in("sendmail")
        .message,
    ).toBe("Check MAILSEND_SMTP_HOST / MAILSEND_SMTP_PORT: this may not be it");
    // A flag sendmail has, or words that only look like one, stay.
    const same = new MailsendError("usage", "-t and -f are sendmail's", { hint: "see --help" });
    expect(same.in("sendmail")).toBe(same);
  });
});
