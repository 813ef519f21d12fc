import { hostname } from "node:os";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { parseAliases } from "../../src/sendmail/aliases.js";
import {
  addMissingStamps,
  prepareLocalSubmission,
  headerMailbox,
  mapRelayedLocalNames,
  maxMessageSize,
  mentionsThisMachine,
  readSendmailInput,
  rewriteLocalNames,
  type SubmissionInput,
} from "../../src/sendmail/submission.js";

const aliases = parseAliases("root: ops@example.com\nteam: a@example.com, b@example.com\n", "aliases");
const base: SubmissionInput = {
  readRecipients: false,
  recipients: [],
  aliases,
  now: new Date(Date.UTC(2026, 10, 24, 12, 0, 0)),
};

function fix(text: string, over: Partial<SubmissionInput> = {}) {
  const r = prepareLocalSubmission(Buffer.from(text), { ...base, ...over });
  return { ...r, text: r.raw.toString("utf8") };
}

function header(text: string, name: string): string[] {
  const head = text.split(/\r?\n\r?\n/)[0]!;
  return head
    .replace(/\r?\n[ \t]/g, " ")
    .split(/\r?\n/)
    .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((l) => l.slice(name.length + 1).trim());
}

function err(f: () => unknown): MailsendError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    return e as MailsendError;
  }
  throw new Error("expected an error");
}

async function read(chunks: string[], ignoreDots: boolean, maxSize = 1 << 20): Promise<string> {
  const s = new PassThrough();
  const p = readSendmailInput(s, { ignoreDots, maxSize });
  for (const c of chunks) s.write(c);
  s.end();
  return (await p).toString();
}

describe("reading the message", () => {
  it("without -i a lone '.' line ends it, also split across chunks; with -i it is kept", async () => {
    expect(await read(["Subject: a\n\nline\n.\nafter\n"], false)).toBe("Subject: a\n\nline\n");
    expect(await read(["Subject: a\n\nline\n", ".", "\r\nafter"], false)).toBe("Subject: a\n\nline\n");
    expect(await read(["Subject: a\n\nline\n.\nafter\n"], true)).toBe("Subject: a\n\nline\n.\nafter\n");
    expect(await read(["Subject: a\n\n.. two dots\n.x\n"], false)).toBe("Subject: a\n\n.. two dots\n.x\n");
    expect(await read(["Subject: a\n\nlast\n."], false)).toBe("Subject: a\n\nlast\n");
    expect(await read([".\n"], false)).toBe("");
  });

  it("stops at the size limit (65)", async () => {
    const e = await read(["x".repeat(100)], true, 50).catch((x: unknown) => x as MailsendError);
    expect((e as MailsendError).exitCode).toBe(65);
    expect((e as MailsendError).code).toBe("too_large");
    expect(maxMessageSize({})).toBe(10 * 1024 * 1024 - 4096);
    expect(maxMessageSize({ MAILSEND_MAX_SIZE: "10M" })).toBe(10 * 1024 * 1024);
    expect(maxMessageSize({ MAILSEND_MAX_SIZE: "512k" })).toBe(512 * 1024);
    expect(err(() => maxMessageSize({ MAILSEND_MAX_SIZE: "lots" })).exitCode).toBe(78);
  });
});

describe("header fix-ups", () => {
  it("adds Date, Message-ID and From (from -f and -F) when missing", () => {
    const r = fix("Subject: hi\n\nbody\n", {
      envelopeFrom: "cron@example.com",
      fullName: "Cron Daemon",
      recipients: ["x@example.com"],
    });
    expect(header(r.text, "From")).toEqual(["Cron Daemon <cron@example.com>"]);
    expect(header(r.text, "Date")[0]).toMatch(/^\w{3}, \d\d \w{3} 2026 \d\d:\d\d:\d\d [+-]\d{4}$/);
    expect(header(r.text, "Message-ID")[0]).toMatch(/^<[\w.]+@example\.com>$/);
    expect(r.text.endsWith("\n\nbody\n")).toBe(true);
    expect(r.envelope).toEqual({ from: "cron@example.com", to: ["x@example.com"] });
  });

  it("keeps what the message has, byte for byte", () => {
    const msg =
      "From: A <a@example.com>\r\nDate: Mon, 1 Jan 2024 00:00:00 +0000\r\nMessage-ID: <m@x>\r\nSubject: =?UTF-8?Q?caf=C3=A9?=\r\n\r\nbody\r\n";
    const r = fix(msg, { recipients: ["x@example.com"] });
    expect(r.text).toBe(msg);
    expect(r.envelope.from).toBe("a@example.com");
  });

  it("the default sender (MAILSEND_FROM) when there is no From and no -f; -F names it", () => {
    expect(
      header(
        fix("Subject: s\n\nb\n", { defaultFrom: "Ops <ops@example.com>", recipients: ["x@example.com"] }).text,
        "From",
      ),
    ).toEqual(["Ops <ops@example.com>"]);
    expect(
      header(
        fix("Subject: s\n\nb\n", {
          defaultFrom: "ops@example.com",
          fullName: "CronDaemon",
          recipients: ["x@example.com"],
        }).text,
        "From",
      ),
    ).toEqual(["CronDaemon <ops@example.com>"]);
    const e = err(() => fix("Subject: s\n\nb\n", { recipients: ["x@example.com"] }));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toContain("MAILSEND_FROM");
  });

  it("-t: recipients from To, Cc and Bcc plus the arguments; Bcc removed from the message", () => {
    const r = fix(
      "From: a@example.com\nTo: t@example.com\nCc: C <c@example.com>\nBcc: hidden@example.com,\n  also@example.com\nSubject: s\n\nb\n",
      {
        readRecipients: true,
        recipients: ["arg@example.com", "t@example.com"],
      },
    );
    expect(r.envelope.to).toEqual([
      "arg@example.com",
      "t@example.com",
      "c@example.com",
      "hidden@example.com",
      "also@example.com",
    ]);
    // Not a bare /bcc/: the random Message-ID is hex and can contain "bcc" (it did, in CI).
    expect(r.text).not.toMatch(/^bcc:|hidden@|also@/im);
    expect(header(r.text, "Cc")).toEqual(["C <c@example.com>"]);
  });

  it("-t with Resent- recipients: those are the recipients, not To/Cc/Bcc; Resent-Bcc removed, with or without -t", () => {
    const msg =
      "From: a@example.com\nTo: orig@example.com\nBcc: old@example.com\nResent-From: f@example.com\nResent-To: new@example.com\nResent-Cc: root\nResent-Bcc: secret@example.com\nSubject: r\n\nx\n";
    const r = fix(msg, { readRecipients: true });
    expect(r.envelope.to).toEqual(["new@example.com", "ops@example.com", "secret@example.com"]);
    expect(header(r.text, "Resent-Cc")).toEqual(["ops@example.com"]);
    expect(r.text).not.toMatch(/secret|^resent-bcc|^bcc/im);
    expect(header(r.text, "To")).toEqual(["orig@example.com"]);
    const plain = fix(msg, { recipients: ["x@example.com"] });
    expect(plain.envelope.to).toEqual(["x@example.com"]);
    expect(plain.text).not.toMatch(/secret|^resent-bcc/im);
    // Only Resent-From (no Resent- recipient): To/Cc/Bcc as usual.
    expect(
      fix("From: a@example.com\nTo: t@example.com\nResent-From: f@example.com\n\nx\n", { readRecipients: true })
        .envelope.to,
    ).toEqual(["t@example.com"]);
  });

  it("without -t only the arguments are recipients; Bcc is still removed", () => {
    const r = fix("From: a@example.com\nTo: t@example.com\nBcc: hidden@example.com\n\nb\n", {
      recipients: ["x@example.com"],
    });
    expect(r.envelope.to).toEqual(["x@example.com"]);
    expect(r.text).not.toContain("hidden");
  });

  it("local names in To, Cc, From and the arguments are mapped through the aliases", () => {
    const r = fix(
      "From: root (Cron Daemon)\nTo: root, Team <team>\nCc: Root User <root@localhost>\nSubject: s\n\nb\n",
      { readRecipients: true, recipients: ["root"] },
    );
    expect(header(r.text, "From")).toEqual(["ops@example.com (Cron Daemon)"]);
    expect(header(r.text, "To")).toEqual(["ops@example.com, Team <a@example.com>, b@example.com"]);
    expect(header(r.text, "Cc")).toEqual(["Root User <ops@example.com>"]);
    expect(r.envelope).toEqual({ from: "ops@example.com", to: ["ops@example.com", "a@example.com", "b@example.com"] });
  });

  it("Reply-To and Sender with a local name become its alias when that is one address, else it is left out, rather than ending the run with 65", () => {
    const r = fix("From: root\nSender: root@localhost\nReply-To: Ops <root>\nTo: x@example.com\n\nb\n", {
      readRecipients: true,
    });
    expect(header(r.text, "Sender")).toEqual(["ops@example.com"]);
    expect(header(r.text, "Reply-To")).toEqual(["Ops <ops@example.com>"]);
    // team is two addresses, nobody none: left out, so replies go to From; the message still goes.
    const team = fix("From: a@example.com\nReply-To: team, Nobody <nobody@localhost>\nTo: x@example.com\n\nb\n", {
      readRecipients: true,
    });
    expect(header(team.text, "Reply-To")).toEqual([]);
    expect(team.envelope.to).toEqual(["x@example.com"]);
    expect(team.notes.join("\n")).toContain("Reply-To: left out team");
    expect(team.notes.join("\n")).toContain("Reply-To: left out nobody@localhost");
    // A bare word the aliases file does not list is not taken for a user there, even with default:
    // (an unquoted "Doe, John" is a malformed name, refused later as any is, not sent to the admin).
    const withDefault = parseAliases("root: ops@example.com\ndefault: admin@example.com\n", "aliases");
    const doe = fix("From: a@example.com\nReply-To: Doe, John <john@example.org>\nTo: x@example.com\n\nb\n", {
      readRecipients: true,
      aliases: withDefault,
    });
    expect(header(doe.text, "Reply-To")).toEqual(["Doe, John <john@example.org>"]);
    // No aliases file: left as written.
    const none = fix("From: a@example.com\nReply-To: root@localhost\nTo: x@example.com\n\nb\n", {
      readRecipients: true,
      aliases: undefined,
    });
    expect(header(none.text, "Reply-To")).toEqual(["root@localhost"]);
  });

  it("-f with a local name is mapped too", () => {
    const r = fix("Subject: s\n\nb\n", { envelopeFrom: "root", recipients: ["x@example.com"] });
    expect(r.envelope.from).toBe("ops@example.com");
    expect(header(r.text, "From")).toEqual(["ops@example.com"]);
  });

  it("a local sender whose alias is several addresses takes -f or the default sender", () => {
    const r = fix("From: team\n\nb\n", { recipients: ["x@example.com"], defaultFrom: "cron@example.com" });
    expect(header(r.text, "From")).toEqual(["cron@example.com"]);
  });

  it("an unmapped local name is an error naming the setting", () => {
    const e = err(() => fix("From: a@example.com\nTo: nobody\n\nb\n", { readRecipients: true }));
    expect(e.exitCode).toBe(78);
    expect(e.hint).toContain("MAILSEND_ALIASES");
    const none = err(() => fix("From: a@example.com\n\nb\n", { recipients: ["root"], aliases: undefined }));
    expect(none.message).toContain("no aliases file");
  });

  it("an empty group (undisclosed-recipients:;) is left out", () => {
    const r = fix("From: a@example.com\nTo: undisclosed-recipients:;\nBcc: b@example.com\n\nb\n", {
      readRecipients: true,
    });
    expect(header(r.text, "To")).toEqual([]);
    expect(r.envelope.to).toEqual(["b@example.com"]);
  });

  it("a group with members (To: Team: a, b;) stands for them: the header stays as written", () => {
    const r = fix("From: a@example.com\nTo: Team: b@example.com, Cee <c@example.com>;\n\nb\n", {
      readRecipients: true,
    });
    expect(header(r.text, "To")).toEqual(["Team: b@example.com, Cee <c@example.com>;"]);
    expect(r.envelope.to).toEqual(["b@example.com", "c@example.com"]);
  });

  it("cron's X-Cron-Env of mailsend's settings or a secret is left out (the key would be mailed); the others stay", () => {
    const r = fix(
      "From: root (Cron Daemon)\nTo: b@example.com\nX-Cron-Env: <SHELL=/bin/sh>\nX-Cron-Env: <MAILSEND_API_KEY=msk_live_Zq81>\nX-Cron-Env: <AWS_SECRET_ACCESS_KEY=abc>\nX-Cron-Env: <HOME=/root>\nX-Cron-Env: <DATABASE_URL=postgres://app:hunter2@db/x>\nX-Cron-Env: <SITE=https://example.com/a:b@c>\n\nhi\n",
      { readRecipients: true, defaultFrom: "ops@example.com", aliases: undefined },
    );
    expect(r.text).not.toContain("msk_live_Zq81");
    expect(r.text).not.toContain("AWS_SECRET");
    expect(header(r.text, "X-Cron-Env")).toEqual([
      "<SHELL=/bin/sh>",
      "<HOME=/root>",
      "<SITE=https://example.com/a:b@c>",
    ]);
    expect(r.text).not.toContain("hunter2");
    expect(r.notes.join("\n")).toContain("left out the one for MAILSEND_API_KEY");
    expect(r.notes.join("\n")).not.toContain("msk_live_Zq81");
  });

  it("root@<this machine's name> (GNU mailutils: -f root@vm, From: root <root@vm>) is mapped like root", () => {
    const short = hostname().split(".")[0]!;
    const r = fix(`From: root <root@${short}>\nTo: root@${short}\n\nb\n`, {
      readRecipients: true,
      envelopeFrom: `root@${short}`,
      aliases: parseAliases("root: ops@example.com\n", "a"),
    });
    expect(r.envelope).toEqual({ from: "ops@example.com", to: ["ops@example.com"] });
    expect(header(r.text, "From")).toEqual(["root <ops@example.com>"]);
  });

  it("no From, no -f, no MAILSEND_FROM: the user who ran sendmail, through the aliases file (atd's sendmail -i root)", () => {
    const aliases = parseAliases("root: ops@example.com\nwww-data: web@example.com, root\n", "a");
    const r = fix("Subject: at job\n\noutput\n", { recipients: ["root"], aliases, invokingUser: "root" });
    expect(header(r.text, "From")).toEqual(["ops@example.com"]);
    expect(r.envelope.from).toBe("ops@example.com");
    // Several addresses, or no entry: not one sender; no sender is configured (config_missing).
    expect(err(() => fix("Subject: x\n\nb\n", { recipients: ["root"], aliases, invokingUser: "www-data" })).code).toBe(
      "config_missing",
    );
    expect(
      err(() => fix("Subject: x\n\nb\n", { recipients: ["ops@example.com"], invokingUser: "root", aliases: undefined }))
        .code,
    ).toBe("config_missing");
  });

  it("a message without a header is all body", () => {
    const r = fix("just a line\nand another\n", { recipients: ["x@example.com"], defaultFrom: "a@example.com" });
    expect(r.text).toMatch(/^From: a@example.com\nDate: .*\nMessage-ID: .*\n\njust a line\nand another\n$/);
  });

  it("an mbox 'From ' line is dropped; CRLF messages get CRLF headers", () => {
    const r = fix("From someone Mon Jan  1 00:00:00 2024\r\nSubject: s\r\n\r\nb\r\n", {
      recipients: ["x@example.com"],
      defaultFrom: "a@example.com",
    });
    expect(r.text.startsWith("Subject: s\r\nFrom: a@example.com\r\nDate: ")).toBe(true);
    expect(r.text).not.toMatch(/[^\r]\n/);
  });

  it("bad input: empty (66), no recipients (64), bad address (65), binary without header (65)", () => {
    expect(err(() => fix("", { recipients: ["x@example.com"] })).exitCode).toBe(66);
    expect(err(() => fix("\n\n", { recipients: ["x@example.com"] })).exitCode).toBe(66);
    const none = err(() => fix("From: a@example.com\nSubject: s\n\nb\n", { readRecipients: true }));
    expect(none.exitCode).toBe(64);
    expect(none.message).toContain("no recipient addresses found in the message header");
    expect(err(() => fix("From: a@example.com\n\nb\n", {})).exitCode).toBe(64);
    expect(err(() => fix("From: a@example.com\nTo: a@@example.com\n\nb\n", { readRecipients: true })).exitCode).toBe(
      65,
    );
    expect(err(() => fix("From: a@example.com\n\nb\n", { recipients: ["not an address@"] })).exitCode).toBe(65);
    expect(
      err(() => fix("From: a@example.com\n\nb\n", { envelopeFrom: "bad@@x", recipients: ["x@example.com"] })).exitCode,
    ).toBe(65);
    const bin = err(() =>
      prepareLocalSubmission(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]), {
        ...base,
        recipients: ["x@example.com"],
      }),
    );
    expect(bin.exitCode).toBe(65);
    expect(bin.message).toContain("PNG");
  });
});

describe("addMissingStamps (the relay's intake)", () => {
  const now = new Date(Date.UTC(2026, 10, 24, 12, 0, 0));
  it("adds Date and Message-ID at the top when missing; the message itself stays byte for byte", () => {
    const raw = Buffer.from(
      "From: App <app@example.com>\r\nTo: dev@example.com\r\nSubject: hi\r\n\r\nbody \xe9\r\n",
      "latin1",
    );
    const r = addMissingStamps(raw, "bounce@apps.example.org", now);
    expect(r.added).toHaveLength(2);
    const text = r.raw.toString("latin1");
    expect(text).toMatch(
      /^Date: \w{3}, \d{2} Nov 2026 \d{2}:\d{2}:\d{2} [+-]\d{4}\r\nMessage-ID: <[^\s@]+@apps\.example\.org>\r\nFrom: App/,
    );
    expect(r.raw.subarray(r.raw.length - raw.length).equals(raw)).toBe(true);
  });

  it("adds only what is missing, in the message's own line ends; a message with both is the same buffer", () => {
    const lf = Buffer.from("Message-ID: <x@y>\nFrom: a@example.com\nSubject: s\n\nb\n");
    const r = addMissingStamps(lf, "", now);
    expect(r.raw.toString()).toMatch(/^Date: [^\r\n]+\nMessage-ID: <x@y>\n/);
    expect(r.added).toHaveLength(1);
    const both = Buffer.from(
      "From: a@example.com\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\nMessage-ID: <x@y>\r\n\r\nb",
    );
    expect(addMissingStamps(both, "a@example.com", now).raw).toBe(both);
    // No header at all: not a message to stamp (validation refuses it).
    const none = Buffer.from("just text");
    expect(addMissingStamps(none, "a@example.com", now).raw).toBe(none);
  });
});

describe("addMissingStamps: what Postfix's cleanup adds for local clients", () => {
  const now = new Date(Date.UTC(2026, 10, 24, 12, 0, 0));
  it("a message without From gets the envelope sender's (Python's smtplib example); the null sender gives none", () => {
    const raw = Buffer.from("Subject: Hi there\n\nThis message is sent from Python.");
    expect(addMissingStamps(raw, "my@example.com", now).raw.toString()).toMatch(
      /^From: my@example\.com\nDate: [^\n]+\nMessage-ID: <[^>]+@example\.com>\nSubject: Hi there\n\nThis message/,
    );
    expect(addMissingStamps(raw, "", now).raw.toString()).not.toMatch(/^From:/m);
  });

  it("an SMTPUTF8 sender's address goes into the added From as UTF-8", () => {
    const r = addMissingStamps(Buffer.from("Subject: utf8\r\n\r\nbody\r\n"), "jöran@example.com", now);
    expect(r.raw.toString("utf8")).toMatch(/^From: jöran@example\.com\r\n/);
  });

  it("a message that is only a header gets the blank line that ends it", () => {
    const r = addMissingStamps(
      Buffer.from(
        "From: a@example.com\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\nMessage-ID: <x@y>\r\nSubject: ping\r\n",
      ),
      "a@example.com",
      now,
    );
    expect(r.raw.toString()).toBe(
      "From: a@example.com\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\nMessage-ID: <x@y>\r\nSubject: ping\r\n\r\n",
    );
    const noEnd = addMissingStamps(
      Buffer.from("From: a@example.com\nDate: x\nMessage-ID: <x@y>\nSubject: ping"),
      "a@example.com",
      now,
    );
    expect(noEnd.raw.toString()).toBe("From: a@example.com\nDate: x\nMessage-ID: <x@y>\nSubject: ping\n\n");
  });
});

describe("rewriteLocalNames", () => {
  const map = (n: string) => [`${n.split("@")[0]}@example.com`];
  it("leaves real addresses, quoted names and comments alone", () => {
    const v = '"Doe, Jane" <jane@example.com>, bob@example.com (Bob)';
    expect(rewriteLocalNames(v, map)).toEqual({ value: v, changed: false, droppedGroups: [], dropped: [] });
  });
  it("maps bare names, names in angle brackets and @localhost", () => {
    expect(rewriteLocalNames("root, Admin <admin>, x@localhost", map).value).toBe(
      "root@example.com, Admin <admin@example.com>, x@example.com",
    );
  });
});

describe("mapRelayedLocalNames (the relay's local names)", () => {
  it("maps recipients and the sender at localhost through the aliases, and the same names in From and To; the rest byte for byte", () => {
    const raw = Buffer.from(
      "From: Cron Daemon <root@localhost>\r\nTo: root@localhost, dev@example.com\r\nSubject: x\r\nX-Other: root@localhost\r\n\r\nbody root@localhost\r\n",
    );
    const r = mapRelayedLocalNames(
      raw,
      { from: "root@localhost", to: ["root@localhost", "team@localhost", "dev@example.com"] },
      { aliases, defaultFrom: "app@example.com" },
    );
    expect(r.envelope).toEqual({
      from: "ops@example.com",
      to: ["ops@example.com", "a@example.com", "b@example.com", "dev@example.com"],
    });
    const text = r.raw.toString("utf8");
    expect(header(text, "From")).toEqual(["Cron Daemon <ops@example.com>"]);
    expect(header(text, "To")).toEqual(["ops@example.com, dev@example.com"]);
    // Only the address fields change: another header and the body keep the name.
    expect(header(text, "X-Other")).toEqual(["root@localhost"]);
    expect(text.endsWith("\r\n\r\nbody root@localhost\r\n")).toBe(true);
    expect(r.notes.join("\n")).toContain("recipient <team@localhost> is <a@example.com>, <b@example.com>");
  });

  it("a local sender with several targets is the configured sender", () => {
    const raw = Buffer.from("From: team@localhost\nTo: dev@example.com\n\nb\n");
    const r = mapRelayedLocalNames(
      raw,
      { from: "team@localhost", to: ["dev@example.com"] },
      { aliases, defaultFrom: "App <app@example.com>" },
    );
    expect(r.envelope.from).toBe("app@example.com");
    expect(header(r.raw.toString("utf8"), "From")).toEqual(["app@example.com"]);
  });

  it("Reply-To and Sender at localhost are mapped too, and make the relay read the aliases", () => {
    const raw = Buffer.from(
      "From: app@example.com\nSender: root@localhost\nReply-To: team@localhost\nTo: dev@example.com\n\nb\n",
    );
    const envelope = { from: "app@example.com", to: ["dev@example.com"] };
    expect(mentionsThisMachine(raw, envelope)).toBe(true);
    const r = mapRelayedLocalNames(raw, envelope, { aliases });
    const text = r.raw.toString("utf8");
    expect(header(text, "Sender")).toEqual(["ops@example.com"]);
    // team is two addresses: left out, a reply goes to From.
    expect(header(text, "Reply-To")).toEqual([]);
    expect(r.envelope).toEqual(envelope);
  });

  it("a message without local names comes back as it was (the same bytes), groups and all", () => {
    const raw = Buffer.from("From: a@example.com\r\nTo: undisclosed-recipients:;\r\nSubject: x\r\n\r\nb\r\n");
    const envelope = { from: "a@example.com", to: ["b@example.com"] };
    const r = mapRelayedLocalNames(raw, envelope, { aliases });
    expect(r.raw).toBe(raw);
    expect(r.envelope).toEqual(envelope);
    expect(r.notes).toEqual([]);
  });

  it("a long rewritten list is folded after commas (no line over 78 characters); a Latin-1 name beside a local name keeps its bytes", () => {
    const many = Array.from({ length: 40 }, (_, i) => `u${i}@localhost`);
    const table = parseAliases(`default: someone.with.a.long.name@example.com\n`, "a");
    const raw = Buffer.concat([
      Buffer.from(`From: a@example.com\r\nTo: ${many.join(",\r\n ")}\r\nCc: Z`, "latin1"),
      Buffer.from([0xeb]),
      Buffer.from(" <root@localhost>\r\nSubject: x\r\n\r\nb\r\n", "latin1"),
    ]);
    const r = mapRelayedLocalNames(
      raw,
      { from: "a@example.com", to: many },
      { aliases: parseAliases("root: ops@example.com\ndefault: someone.with.a.long.name@example.com\n", "a") },
    );
    expect(table.entries.size).toBe(1);
    const head = r.raw.toString("latin1").split("\r\n\r\n")[0]!;
    for (const line of head.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
    expect(header(r.raw.toString("latin1"), "To")[0]!.split(", ")).toHaveLength(1);
    expect(
      r.raw.includes(
        Buffer.concat([Buffer.from("Cc: Z", "latin1"), Buffer.from([0xeb]), Buffer.from(" <ops@example.com>")]),
      ),
    ).toBe(true);
    expect(r.envelope.to).toEqual(["someone.with.a.long.name@example.com"]);
  });

  it("groups beside a mapped local name stay as written, a member repeated in two groups too (sendmail -t)", () => {
    const r = fix(
      "From: app@example.org\nTo: root, one: a@example.org, b@example.org;, two: c@example.org, b@example.org;\nSubject: s\n\nb\n",
      { readRecipients: true },
    );
    expect(header(r.text, "To")).toEqual([
      "ops@example.com, one: a@example.org, b@example.org;, two: c@example.org, b@example.org;",
    ]);
    expect(r.envelope.to).toEqual(["ops@example.com", "a@example.org", "b@example.org", "c@example.org"]);
  });

  it("mentionsThisMachine: only mail with an address at this machine needs the aliases file", () => {
    expect(
      mentionsThisMachine(Buffer.from('To: "Team"\n\nx\n'), { from: "a@example.com", to: ["b@example.com"] }),
    ).toBe(false);
    const plain = Buffer.from("From: a@example.com\nTo: b@example.com, Team: c@example.org;\n\nx\n");
    expect(mentionsThisMachine(plain, { from: "a@example.com", to: ["b@example.com"] })).toBe(false);
    expect(mentionsThisMachine(plain, { from: "", to: ["root@localhost"] })).toBe(true);
    expect(
      mentionsThisMachine(Buffer.from("From: Cron <root@localhost>\nTo: b@example.com\n\nx\n"), {
        from: "a@example.com",
        to: ["b@example.com"],
      }),
    ).toBe(true);
    expect(
      mentionsThisMachine(Buffer.from(`To: root@${hostname().split(".")[0]}\n\nx\n`), {
        from: "a@example.com",
        to: ["b@example.com"],
      }),
    ).toBe(true);
  });

  it("a local recipient nothing maps is refused, naming the aliases setting", () => {
    const e = err(() =>
      mapRelayedLocalNames(
        Buffer.from("To: root@localhost\n\nb\n"),
        { from: "a@example.com", to: ["root@localhost"] },
        {},
      ),
    );
    expect(e.code).toBe("config_missing");
    expect(e.message).toContain('"root@localhost" is a local name');
    expect(e.hint).toContain("MAILSEND_ALIASES");
  });
});

describe("wireSize", () => {
  it("counts a bare LF as CRLF, a CRLF once", async () => {
    const { wireSize, checkWireSize } = await import("../../src/core/size.js");
    expect(wireSize(Buffer.from("a\nb\r\nc\n"))).toBe(9);
    expect(wireSize(Buffer.from("\n\n"))).toBe(4);
    expect(wireSize(Buffer.from("abc"))).toBe(3);
    expect(() => checkWireSize(Buffer.from("x\n".repeat(10)), 25)).toThrow(/larger than the limit/);
    expect(() => checkWireSize(Buffer.from("x\n".repeat(10)), 30)).not.toThrow();
  });
});

describe("-F: the From's name as a header carries it", () => {
  it("a name that is not ASCII is RFC 2047 encoded; one with specials is quoted; a line end cannot start a header", () => {
    const from = (fullName: string) =>
      header(
        fix("Subject: s\n\nb\n", { envelopeFrom: "ops@example.com", fullName, recipients: ["x@example.com"] }).text,
        "From",
      )[0];
    expect(from("Jürgen")).toBe("=?UTF-8?B?SsO8cmdlbg==?= <ops@example.com>");
    expect(from("Ops, Nightly")).toBe('"Ops, Nightly" <ops@example.com>');
    expect(from("Build Robot")).toBe("Build Robot <ops@example.com>");
    expect(from("a\nBcc: x@example.com")).toBe('"a Bcc: x@example.com" <ops@example.com>');
    expect(
      fix("Subject: s\n\nb\n", { envelopeFrom: "ops@example.com", fullName: "Jürgen", recipients: ["x@example.com"] })
        .text,
    ).not.toMatch(/[^\x00-\x7f]/);
  });
  it("a long name is split into encoded words of whole characters, each under 76 characters", () => {
    const v = headerMailbox({ name: "Jürgen ".repeat(20).trim(), address: "a@example.com" }, "\n");
    const words = v.split("\n ").map((w) => w.replace(/ <a@example\.com>$/, ""));
    expect(words.length).toBeGreaterThan(1);
    for (const w of words) expect(w.length).toBeLessThan(76);
    const decoded = words
      .map((w) => Buffer.from(/^=\?UTF-8\?B\?(.*)\?=$/.exec(w)![1]!, "base64").toString("utf8"))
      .join("");
    expect(decoded).toBe("Jürgen ".repeat(20).trim());
  });
  it("every line of the From header, as written, is within RFC 2047's 76 characters (a long address goes on its own line)", () => {
    for (const [name, address] of [
      ["Jürgen ".repeat(20).trim(), "a@example.com"],
      ["Jürgen", "a-rather-long-local-part.for-the-nightly-build@builds.example-company.com"],
      ["ü".repeat(19), "ops@example.com"],
    ] as const) {
      const text = fix("Subject: s\n\nb\n", {
        envelopeFrom: address,
        fullName: name,
        recipients: ["x@example.com"],
      }).text;
      const head = text.slice(0, text.search(/\r?\n\r?\n/));
      const from = head.split(/\r?\n(?=\S)/).find((h) => h.startsWith("From:"))!;
      for (const line of from.split(/\r?\n/)) expect(line.length, line).toBeLessThanOrEqual(76);
      expect(from.replace(/\r?\n /g, " ")).toContain(`<${address}>`);
    }
  });
});
