/**
 * The built binary started as `sendmail` through a symlink, fed by the
 * programs that call sendmail on a real machine (cron's command line, s-nail,
 * bsd-mailx, git send-email, a PHP-style pipe from Python), against the
 * sandbox and against an SMTP server with STARTTLS and AUTH. Each option of
 * sendmail, and each kind of bad input: its exit code, and nothing queued.
 */
import { execa, type Options } from "execa";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, BIN, mailsendCommand } from "../helpers/cli.js";
import { parseEml, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { headerSection, startSmtpSink, type SmtpSink } from "../helpers/smtp-sink.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { bsdMailx, gitSendEmail, lacks, mailAddress, python3, sNail } from "../helpers/tools.js";

let t: TestSandbox;
let s: Scratch;
let sendmail: string;
let mailq: string;
let aliases: string;
let stateSeq = 0;

useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-sendmail-");
  mkdirSync(join(s.dir, "sbin"));
  sendmail = join(s.dir, "sbin", "sendmail");
  mailq = join(s.dir, "sbin", "mailq");
  symlinkSync(BIN, sendmail);
  symlinkSync(BIN, mailq);
  aliases = s.file(
    "aliases",
    "# this host\nroot: ops@example.com\npostmaster: root\nwww-data: web@example.com, root\n",
  );
});
afterAll(async () => {
  s?.remove();
});

/** A fresh state dir (its own outbox) for each run that needs one. */
function freshState(): string {
  const d = join(s.dir, `state-${++stateSeq}`);
  mkdirSync(d);
  return d;
}

function env(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const e: Record<string, string | undefined> = {
    ...baseEnv(),
    ...t.env,
    MAILSEND_ALIASES: aliases,
    MAILSEND_FROM: "Host <host@example.com>",
    // The at-once attempt is what these tests look at; the queued ones start their own runner.
    MAILSEND_QUEUE_AUTORUN: "0",
    ...extra,
  };
  return Object.fromEntries(Object.entries(e).filter((kv): kv is [string, string] => kv[1] !== undefined));
}

interface Run {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Run a program (the symlink itself, or a mail program) with the test environment. */
async function run(
  file: string,
  args: string[],
  input: string | Buffer | undefined,
  e: Record<string, string>,
  opts: Options = {},
): Promise<Run> {
  const r = await execa(file, args, {
    reject: false,
    extendEnv: false,
    env: e,
    cwd: s.dir,
    ...(input !== undefined ? { input } : { stdin: "ignore" as const }),
    timeout: 30_000,
    stripFinalNewline: false,
    encoding: "utf8",
    ...opts,
  } as Options);
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout ?? ""), stderr: String(r.stderr ?? "") };
}

const sm = (args: string[], input?: string | Buffer, extra: Record<string, string | undefined> = {}) =>
  run(sendmail, args, input, env(extra));

async function storedBySubject(subject: string) {
  const all = await t.sb.store.list({ limit: 100_000 });
  return all.filter((m) => m.subject === subject);
}

async function oneStored(subject: string) {
  const list = await storedBySubject(subject);
  expect(list.map((m) => m.subject)).toEqual([subject]);
  const m = list[0]!;
  const raw = (await t.sb.store.raw(m.id))!;
  return { m, raw, head: headerSection(raw), email: await parseEml(raw) };
}

function outboxFiles(stateDir: string): string[] {
  const q = join(stateDir, "outbox", "queue");
  return existsSync(q) ? readdirSync(q) : [];
}

// Several processes per test, on a machine that may be busy: more than the default 30 s.
describe("sendmail as real callers use it", { timeout: 90_000 }, () => {
  it("a program's own Message-ID is kept (SMTP, with REST configured too); one sendmail adds goes by REST", async () => {
    const html = "Content-Type: text/html; charset=utf-8\n\n<p>issue 5</p>\n";
    const own = await sm(
      ["-t", "-i"],
      `From: Gitea <gitea@example.com>\nTo: dev@example.com\nSubject: own msgid\nMessage-ID: <org/repo/issues/5@gitea.example.com>\n${html}`,
    );
    expect(own).toMatchObject({ exitCode: 0, stderr: "" });
    const a = await oneStored("own msgid");
    expect(a.m.channel).toBe("smtp");
    expect(a.head).toMatch(/^Message-ID: <org\/repo\/issues\/5@gitea\.example\.com>$/m);
    const added = await sm(
      ["-t", "-i"],
      `From: Gitea <gitea@example.com>\nTo: dev@example.com\nSubject: no msgid\n${html}`,
    );
    expect(added).toMatchObject({ exitCode: 0, stderr: "" });
    expect((await oneStored("no msgid")).m.channel).toBe("rest");
  });

  it("cron: -FCronDaemon -i -B8BITMIME -oem root, a From of root (Cron Daemon): silent, exit 0, mapped through the aliases", async () => {
    // What Debian's cron writes (with its X-Cron-Env lines), on the command line it uses.
    const msg =
      "From: root (Cron Daemon)\nTo: root\nSubject: Cron <root@web1> /usr/local/bin/backup\nMIME-Version: 1.0\n" +
      "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\nX-Cron-Env: <SHELL=/bin/sh>\nX-Cron-Env: <HOME=/root>\n\nbackup done: 3 files\n";
    const r = await sm(["-FCronDaemon", "-i", "-B8BITMIME", "-oem", "root"], msg);
    expect(r).toMatchObject({ exitCode: 0, stdout: "", stderr: "" });
    const { m, head } = await oneStored("Cron <root@web1> /usr/local/bin/backup");
    expect(m.envelope.to).toEqual(["ops@example.com"]);
    expect(m.envelope.from).toBe("ops@example.com");
    expect(head).toMatch(/^To: ops@example\.com$/m);
    expect(head).toMatch(/^From: ops@example\.com \(Cron Daemon\)$/m);
    expect(head).toMatch(/^Date: /m);
    expect(head).toMatch(/^Message-ID: </m);
  });

  it.skipIf(lacks(python3))(
    "PHP mail() style: a Python subprocess piping into sendmail -t -i; Bcc recipients get it, the Bcc header is gone",
    async () => {
      const script = `
import subprocess, sys
msg = "To: php-to@example.com\\r\\nCc: Carl <php-cc@example.com>\\r\\nBcc: php-bcc@example.com\\r\\nFrom: shop@example.com\\r\\nSubject: PHP order 17\\r\\n\\r\\nThank you.\\r\\n.\\r\\nThis line is still the body (-i).\\r\\n"
p = subprocess.run([sys.argv[1], "-t", "-i"], input=msg.encode(), capture_output=True)
sys.stdout.write("rc=%d err=%s" % (p.returncode, p.stderr.decode()))
`;
      const r = await run("python3", ["-c", script, sendmail], undefined, env());
      expect(r.stdout).toBe("rc=0 err=");
      const { m, raw, email } = await oneStored("PHP order 17");
      expect([...m.envelope.to].sort()).toEqual(["php-bcc@example.com", "php-cc@example.com", "php-to@example.com"]);
      expect(raw.toString()).not.toMatch(/php-bcc|^bcc:/im);
      expect(email.text).toContain("This line is still the body (-i).");
    },
  );

  it.skipIf(lacks(sNail))(
    "s-nail: mail -s ... -b ... root user@example.com (it passes -i -- recipients, and -r as -f)",
    async () => {
      const r = await run(
        "s-nail",
        [
          "-:/",
          "-S",
          `mta=${sendmail}`,
          "-r",
          "alerts@example.com",
          "-s",
          "s-nail alert",
          "-b",
          "snail-bcc@example.com",
          "root",
          "snail@example.com",
        ],
        "disk 91% full\n",
        env(),
      );
      expect(r.exitCode, r.stderr).toBe(0);
      const { m, head } = await oneStored("s-nail alert");
      expect([...m.envelope.to].sort()).toEqual(["ops@example.com", "snail-bcc@example.com", "snail@example.com"]);
      expect(m.envelope.from).toBe("alerts@example.com");
      expect(head).toMatch(/^To: ops@example\.com, snail@example\.com$/m);
      expect(head).not.toMatch(/snail-bcc/);
    },
  );

  it.skipIf(lacks(bsdMailx))(
    "bsd-mailx: mail -s subject root, with sendmail= in its rc file (it passes -i -t)",
    async () => {
      const rc = s.file("mailrc", `set sendmail=${sendmail}\n`);
      const r = await run("bsd-mailx", ["-s", "mailx report", "root"], "all good\n", env({ MAILRC: rc }));
      expect(r.exitCode, r.stderr).toBe(0);
      const { m, head } = await oneStored("mailx report");
      expect(m.envelope.to).toEqual(["ops@example.com"]);
      // mailx writes no From: the default sender goes in.
      expect(head).toMatch(/^From: Host <host@example\.com>$/m);
    },
  );

  it.skipIf(lacks(gitSendEmail, mailAddress))(
    "git send-email --sendmail-cmd=<the symlink>: a patch to root and a Cc",
    async () => {
      const repo = join(s.dir, "repo");
      const git = (args: string[]) =>
        run("git", ["-c", "user.name=Dev", "-c", "user.email=dev@example.com", ...args], undefined, env(), {
          cwd: repo,
        });
      mkdirSync(repo);
      expect((await git(["init", "-q"])).exitCode).toBe(0);
      writeFileSync(join(repo, "f.txt"), "x\n");
      await git(["add", "f.txt"]);
      expect((await git(["commit", "-q", "-m", "add f for sendmail"])).exitCode).toBe(0);
      expect((await git(["format-patch", "-1", "-o", "out"])).exitCode).toBe(0);
      const patch = join(repo, "out", readdirSync(join(repo, "out"))[0]!);
      const r = await git([
        "send-email",
        `--sendmail-cmd=${sendmail}`,
        "--to=root",
        "--cc=reviewer@example.com",
        "--from=Dev <dev@example.com>",
        "--confirm=never",
        "--suppress-cc=all",
        patch,
      ]);
      expect(r.exitCode, r.stderr + r.stdout).toBe(0);
      const { m, head } = await oneStored("[PATCH] add f for sendmail");
      expect([...m.envelope.to].sort()).toEqual(["ops@example.com", "reviewer@example.com"]);
      expect(head).toMatch(/^To: ops@example\.com$/m);
      // git's own Message-Id and Date are kept as they are.
      expect(head.match(/^Message-Id: /gim)).toHaveLength(1);
    },
  );
});

describe("options", { timeout: 90_000 }, () => {
  it("without -i a lone '.' ends the message; -oi and -i keep reading", async () => {
    await sm(["dot-1@example.com"], "Subject: dot ends\n\nbefore\n.\nafter\n");
    expect((await oneStored("dot ends")).email.text).not.toContain("after");
    await sm(["-oi", "dot-2@example.com"], "Subject: dot kept\n\nbefore\n.\nafter\n");
    expect((await oneStored("dot kept")).email.text).toContain("after");
  });

  it("-t (here with -bm, the default mode) takes To/Cc/Bcc plus the arguments; without -t only the arguments", async () => {
    const msg = (subj: string) =>
      `From: a@example.com\nTo: t1@example.com\nCc: c1@example.com\nBcc: b1@example.com\nSubject: ${subj}\n\nx\n`;
    expect((await sm(["-bm", "-t", "extra@example.com"], msg("with -t"))).exitCode).toBe(0);
    expect([...(await oneStored("with -t")).m.envelope.to].sort()).toEqual([
      "b1@example.com",
      "c1@example.com",
      "extra@example.com",
      "t1@example.com",
    ]);
    expect((await sm(["only@example.com"], msg("without -t"))).exitCode).toBe(0);
    const w = await oneStored("without -t");
    expect(w.m.envelope.to).toEqual(["only@example.com"]);
    expect(w.head).not.toMatch(/b1@example/);
  });

  it("-f sets the envelope sender and -F the From's name when the message has none", async () => {
    expect(
      (await sm(["-f", "robot@example.com", "-F", "Build Robot", "ff@example.com"], "Subject: with -f -F\n\nx\n"))
        .exitCode,
    ).toBe(0);
    const { m, head } = await oneStored("with -f -F");
    expect(m.envelope.from).toBe("robot@example.com");
    expect(head).toMatch(/^From: Build Robot <robot@example\.com>$/m);
    expect((await sm(["-rrr@example.com", "ff@example.com"], "Subject: with -r\n\nx\n")).exitCode).toBe(0);
    expect((await oneStored("with -r")).m.envelope.from).toBe("rr@example.com");
  });

  it("-v says what was done, names the ignored options and the -N note", async () => {
    const r = await sm(["-v", "-N", "never", "-odb", "www-data"], "Subject: verbose run\n\nx\n");
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("ignored -N never");
    expect(r.stderr).toContain("ignored -odb");
    expect(r.stderr).toContain("recipient www-data -> web@example.com, ops@example.com");
    expect(r.stderr).toContain("added Date:");
    expect(r.stderr).toMatch(/sent over (smtp|rest) to web@example\.com, ops@example\.com/);
    expect(r.stderr).not.toContain(t.key);
  });

  it("--queue always queues: exit 0, one line on stderr with the id; mailq and -bp list it; -q delivers it", async () => {
    const state = freshState();
    const e = { MAILSEND_STATE_DIR: state };
    const r = await sm(["--queue", "always", "queued@example.com"], "Subject: queued then flushed\n\nx\n", e);
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    const id = /queued as (\S+)/.exec(lines[0]!)?.[1];
    expect(id).toBeTruthy();
    expect(lines[0]).toContain("mailsend queue");
    expect(await storedBySubject("queued then flushed")).toHaveLength(0);

    const q1 = await run(mailq, [], undefined, env(e));
    expect(q1.exitCode, q1.stderr).toBe(0);
    expect(q1.stdout).toContain(id!);
    expect(q1.stdout).toContain("queued@example.com");
    // The summary in Postfix's words, which monitoring checks (check_mailq) parse.
    expect(q1.stdout).toMatch(/^-- \d+ Kbytes in 1 Request\.$/m);
    const q2 = await sm(["-bp"], undefined, e);
    expect(q2.stdout).toContain(id!);

    const flush = await sm(["-q"], undefined, e);
    expect(flush.exitCode, flush.stderr).toBe(0);
    expect(await storedBySubject("queued then flushed")).toHaveLength(1);
    expect(outboxFiles(state).filter((f) => f.endsWith(".msg"))).toEqual([]);
    expect((await sm(["-bp"], undefined, e)).stdout).toBe("Mail queue is empty\n");
  });

  it("MAILSEND_QUEUE=always does the same as --queue always; --queue never delivers at once", async () => {
    const state = freshState();
    const r = await sm(["q-env@example.com"], "Subject: queued by env\n\nx\n", {
      MAILSEND_STATE_DIR: state,
      MAILSEND_QUEUE: "always",
    });
    expect(r.stderr).toMatch(/queued as/);
    expect(outboxFiles(state).filter((f) => f.endsWith(".msg"))).toHaveLength(1);
    const n = await sm(["--queue=never", "q-never@example.com"], "Subject: never queued\n\nx\n", {
      MAILSEND_STATE_DIR: state,
      MAILSEND_QUEUE: "always",
    });
    expect(n).toMatchObject({ exitCode: 0, stderr: "" });
    expect(await storedBySubject("never queued")).toHaveLength(1);
  });

  it("mailsend sendmail (no symlink) behaves the same", async () => {
    const r = await run(
      ...mailsendCommand(["sendmail", "-ti"]),
      "From: a@example.com\nTo: root\nSubject: via subcommand\n\nx\n",
      env(),
    );
    expect(r).toMatchObject({ exitCode: 0, stderr: "" });
    expect((await oneStored("via subcommand")).m.envelope.to).toEqual(["ops@example.com"]);
  });

  it("--profile and the profile's aliases (relative to the config file)", async () => {
    const dir = join(s.dir, "cfg");
    mkdirSync(dir);
    writeFileSync(join(dir, "aliases"), "default: profile-default@example.com\n");
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ profiles: { box: { aliases: "aliases", from: "box@example.com" } } }),
    );
    const r = await sm(["--profile", "box", "somebody"], "Subject: profile aliases\n\nx\n", {
      MAILSEND_CONFIG: join(dir, "config.json"),
      MAILSEND_ALIASES: undefined,
      MAILSEND_FROM: undefined,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const { m, head } = await oneStored("profile aliases");
    expect(m.envelope.to).toEqual(["profile-default@example.com"]);
    expect(head).toMatch(/^From: box@example\.com$/m);
  });
});

describe("bad input: its exit code, a clear message, nothing queued", { timeout: 90_000 }, () => {
  const cases: Array<[string, string[], string | Buffer, number, RegExp, Record<string, string>?]> = [
    ["an unknown option", ["-x", "a@example.com"], "Subject: s\n\nx\n", 64, /unknown option -x/],
    ["an empty message", ["a@example.com"], "", 66, /empty/],
    [
      "no recipient with -t",
      ["-t"],
      "From: a@example.com\nSubject: s\n\nx\n",
      64,
      /no recipient addresses found in the message header/,
    ],
    ["no recipient at all", [], "Subject: s\n\nx\n", 64, /no recipients/],
    ["an address that does not parse", ["-t"], "To: a@@example.com\nSubject: s\n\nx\n", 65, /a@@example\.com/],
    ["a bad recipient argument", ["a b@example.com"], "Subject: s\n\nx\n", 65, /recipient/],
    [
      "a message over the size limit",
      ["a@example.com"],
      `Subject: s\n\n${"x".repeat(4096)}\n`,
      65,
      /larger than the limit of 1\.0 KiB/,
      { MAILSEND_MAX_SIZE: "1k" },
    ],
    [
      "more recipients than the service takes in one message",
      ["-t"],
      `To: ${Array.from({ length: 101 }, (_, i) => `r${i}@example.com`).join(", ")}\nSubject: s\n\nx\n`,
      65,
      /101 recipients: the service takes at most 100 per message; nothing was queued/,
    ],
    [
      "binary garbage without a header",
      ["a@example.com"],
      Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0, 0]),
      65,
      /executable/,
    ],
    [
      "an unmapped local name",
      ["nobody-here"],
      "Subject: s\n\nx\n",
      78,
      /nobody-here.*default:/,
      { MAILSEND_ALIASES: "" },
    ],
  ];
  it.each(cases)("%s", async (_name, args, input, code, message, extra) => {
    const state = freshState();
    const e: Record<string, string> = { MAILSEND_STATE_DIR: state, MAILSEND_QUEUE: "always", ...(extra ?? {}) };
    if (extra?.MAILSEND_ALIASES === "") e.MAILSEND_ALIASES = s.file("aliases-nodefault", "root: ops@example.com\n");
    const r = await sm(args, input, e);
    expect(r.exitCode, r.stderr).toBe(code);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
    expect(outboxFiles(state)).toEqual([]);
  });

  it("a local name and no aliases file: 78 naming MAILSEND_ALIASES", async () => {
    const r = await sm(["root"], "Subject: s\n\nx\n", { MAILSEND_ALIASES: undefined });
    expect(r.exitCode).toBe(78);
    expect(r.stderr).toContain("MAILSEND_ALIASES");
  });
});

describe("against an SMTP server with STARTTLS and AUTH", { timeout: 90_000 }, () => {
  const KEY = "msk_test_sendmail_smtp_Zr4Kq9";
  let sink: SmtpSink;
  beforeAll(async () => {
    sink = await startSmtpSink({ mode: "starttls", tls: await s.tls(), key: KEY });
  });
  afterAll(async () => {
    await sink?.close();
  });

  it("cron's message goes over SMTP: envelope, mapped headers, no Bcc, TLS and AUTH used", async () => {
    const tls = await s.tls();
    const e = env({
      MAILSEND_BASE_URL: undefined,
      MAILSEND_API_KEY_FILE: undefined,
      MAILSEND_API_KEY: KEY,
      MAILSEND_TRANSPORT: "smtp",
      MAILSEND_SMTP_HOST: "127.0.0.1",
      MAILSEND_SMTP_PORT: String(sink.port),
      MAILSEND_SMTP_TLS: "starttls",
      NODE_EXTRA_CA_CERTS: tls.caPath,
    });
    const r = await run(
      sendmail,
      ["-FCronDaemon", "-i", "-oem", "-t"],
      "From: root (Cron Daemon)\nTo: root\nBcc: audit@example.com\nSubject: over smtp\n\nx\n",
      e,
    );
    expect(r).toMatchObject({ exitCode: 0, stderr: "" });
    expect(sink.messages).toHaveLength(1);
    const got = sink.messages[0]!;
    expect(got.secure).toBe(true);
    expect(got.user).toBe("mailsend");
    expect(got.mailFrom).toBe("ops@example.com");
    expect([...got.rcptTo].sort()).toEqual(["audit@example.com", "ops@example.com"]);
    const head = headerSection(got.raw);
    expect(head).toMatch(/^To: ops@example\.com$/m);
    expect(head).not.toMatch(/audit@/);
    expect(head).toMatch(/^X-Idempotency-Key: /m);
  });
});

describe("deliver now, else queue (the default, --queue auto)", { timeout: 90_000 }, () => {
  let tight: TestSandbox;
  useSandbox((sb) => (tight = sb), { rateLimit: 1, rateWindowMs: 60_000 });
  beforeAll(async () => {
    // One message per minute: the second finds the budget used up.
  });

  it("the budget used up: the message is queued, exit 0, one line on stderr; the first one went out silently", async () => {
    const state = freshState();
    const e = { ...tight.env, MAILSEND_STATE_DIR: state, MAILSEND_RATE_LIMIT: "1", MAILSEND_RATE_WINDOW: "60" };
    const first = await sm(["auto-1@example.com"], "Subject: auto first\n\nx\n", e);
    expect(first).toMatchObject({ exitCode: 0, stderr: "" });
    const second = await sm(["auto-2@example.com"], "Subject: auto second\n\nx\n", e);
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stderr.trim().split("\n")).toHaveLength(1);
    expect(second.stderr).toMatch(/^mailsend: queued as \S+ .*see it with: mailsend queue\n$/);
    expect(outboxFiles(state).filter((f) => f.endsWith(".msg"))).toHaveLength(1);
    const stored = (await tight.sb.store.list({ limit: 100 })).map((m) => m.subject);
    expect(stored).toEqual(["auto first"]);
    expect(tight.sb.stats.toJSON().smtp.rateLimited + tight.sb.stats.toJSON().rest.rateLimited).toBe(0);
  });

  it("a permanent refusal (a wrong key) is never queued: 77 at once", async () => {
    const state = freshState();
    const r = await sm(["refused@example.com"], "Subject: wrong key\n\nx\n", {
      MAILSEND_STATE_DIR: state,
      MAILSEND_API_KEY_FILE: undefined,
      MAILSEND_API_KEY: "msk_wrong_key_0000000000",
    });
    expect(r.exitCode, r.stderr).toBe(77);
    expect(r.stderr).not.toContain("msk_wrong_key");
    expect(outboxFiles(state).filter((f) => f.endsWith(".msg"))).toEqual([]);
  });

  it("no key: 78, and a hint for sendmail's callers (a key file or a profile's api_key_file), not one to pipe the key", async () => {
    const state = freshState();
    const r = await sm(["nokey@example.com"], "Subject: no key\n\nx\n", {
      MAILSEND_STATE_DIR: state,
      MAILSEND_API_KEY_FILE: undefined,
      MAILSEND_API_KEY: undefined,
    });
    expect(r.exitCode, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/^error: no API key$/m);
    expect(r.stderr).toMatch(
      /^hint: sendmail's stdin is the message, .*MAILSEND_API_KEY_FILE.*mailsend config set api_key_file <path>/m,
    );
    expect(r.stderr).not.toMatch(/pipe it/);
    expect(outboxFiles(state).filter((f) => f.endsWith(".msg"))).toEqual([]);
  });
});
