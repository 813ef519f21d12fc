/**
 * The sandbox's query language: each term, negation, quotes, durations and dates, and the errors
 * that list the known terms; then the links and text a message's parts give.
 */
import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { durationMs } from "../../src/core/duration.js";
import { readParts, textLinks } from "../../src/sandbox/content.js";
import { isClose, matches, parseQuery, type SearchableContent } from "../../src/sandbox/query.js";
import type { StoredMessage } from "../../src/sandbox/types.js";

const NOW = Date.parse("2026-11-28T12:00:00Z");

function msg(over: Partial<StoredMessage> = {}): StoredMessage {
  return {
    id: "0mx0gba4g000026eyw",
    receivedAt: "2026-11-28T11:55:00.000Z",
    channel: "rest",
    keyId: "key_1",
    envelope: { from: "bounce@app.example.com", to: ["alice@example.com", "hidden@example.com"] },
    from: "App <noreply@app.example.com>",
    to: ["Alice <alice@example.com>"],
    subject: "Reset your Password",
    size: 100,
    attachments: [{ filename: "Invoice-42.pdf", contentType: "application/pdf", size: 10 }],
    messageId: "x",
    ...over,
  };
}

const content: SearchableContent = {
  cc: ["Boss <boss@example.com>"],
  body: "Hello Alice,\nyour one-time   code is 123456.\n",
};
const ok = (q: string, m = msg(), c: SearchableContent | undefined = content) => matches(parseQuery(q, NOW), m, c);

describe("parseQuery: each term", () => {
  it("to: matches the To header and the envelope (a Bcc), case-insensitively, by part", () => {
    expect(ok("to:alice@example.com")).toBe(true);
    expect(ok("to:ALICE")).toBe(true);
    expect(ok("to:hidden@example.com")).toBe(true);
    expect(ok("to:bob@example.com")).toBe(false);
  });
  it("to: and from: find an envelope sent in A-labels by its Unicode form too", () => {
    const idn = msg({
      channel: "smtp",
      to: [],
      envelope: { from: "ops@xn--mnchen-3ya.example", to: ["user@xn--bcher-kva.example"] },
      envelopeUnicode: { from: "ops@münchen.example", to: ["user@bücher.example"] },
    });
    expect(ok("to:xn--bcher-kva", idn)).toBe(true);
    expect(ok("to:bücher.example", idn)).toBe(true);
    expect(ok("from:münchen", idn)).toBe(true);
    expect(ok("to:münchen", idn)).toBe(false);
  });
  it("from:, cc:, subject:, filename:", () => {
    expect(ok("from:noreply@app.example.com")).toBe(true);
    expect(ok("from:bounce@")).toBe(true);
    expect(ok("from:someone")).toBe(false);
    expect(ok("cc:boss")).toBe(true);
    expect(ok("cc:alice")).toBe(false);
    expect(ok("subject:password")).toBe(true);
    expect(ok("subject:invoice")).toBe(false);
    expect(ok("filename:invoice-42")).toBe(true);
    expect(ok("filename:.zip")).toBe(false);
  });
  it("has:attachment and is:rest / is:smtp", () => {
    expect(ok("has:attachment")).toBe(true);
    expect(ok("has:attachment", msg({ attachments: [] }))).toBe(false);
    expect(ok("is:rest")).toBe(true);
    expect(ok("is:smtp")).toBe(false);
    expect(ok("IS:SMTP", msg({ channel: "smtp" }))).toBe(true);
  });
  it("after:/before: with a duration back from now, or a date", () => {
    expect(ok("after:10m")).toBe(true);
    expect(ok("after:2m")).toBe(false);
    expect(ok("before:2m")).toBe(true);
    expect(ok("before:10m")).toBe(false);
    expect(ok("after:2026-11-28")).toBe(true);
    expect(ok("before:2026-11-28")).toBe(false);
    expect(ok("after:2026-11-28T11:56:00Z")).toBe(false);
    expect(parseQuery("after:1h", NOW).terms[0]).toMatchObject({ kind: "after", at: NOW - 3_600_000 });
  });
  it("bare words and quoted phrases search the subject and the body, spaces as one", () => {
    expect(ok("reset")).toBe(true);
    expect(ok("alice")).toBe(true);
    expect(ok('"one-time code is"')).toBe(true);
    expect(ok('"code is 654321"')).toBe(false);
    expect(ok('subject:"your password"')).toBe(true);
    expect(ok('subject:"password your"')).toBe(false);
  });
  it("ANDs its terms; an empty query matches everything", () => {
    expect(ok("to:alice subject:reset has:attachment 123456")).toBe(true);
    expect(ok("to:alice subject:invoice")).toBe(false);
    expect(ok("")).toBe(true);
    expect(ok("   ")).toBe(true);
  });
});

describe("negation", () => {
  it("- negates any term", () => {
    expect(ok("-to:bob")).toBe(true);
    expect(ok("-to:alice")).toBe(false);
    expect(ok("-has:attachment")).toBe(false);
    expect(ok("-is:smtp")).toBe(true);
    expect(ok("-reset")).toBe(false);
    expect(ok('-"one-time code"')).toBe(false);
    expect(ok('-subject:"no such"')).toBe(true);
    expect(ok("-after:10m")).toBe(false);
  });
  it("a term that needs the parts is left open without them, so only the others rule out", () => {
    const q = parseQuery("to:alice -cc:boss 123456", NOW);
    expect(q.needsContent).toBe(true);
    expect(matches(q, msg())).toBe(true);
    expect(matches(q, msg(), content)).toBe(false);
    expect(matches(q, msg({ to: ["bob@example.com"], envelope: { from: "", to: [] } }))).toBe(false);
    expect(parseQuery("to:alice subject:x", NOW).needsContent).toBe(false);
  });
});

describe("errors", () => {
  function error(q: string): MailsendError {
    try {
      parseQuery(q, NOW);
    } catch (e) {
      return e as MailsendError;
    }
    throw new Error(`${q} parsed`);
  }
  it("an unknown term is a usage error that lists the known ones", () => {
    const e = error("to:alice size:large");
    expect(e).toBeInstanceOf(MailsendError);
    expect(e.code).toBe("usage");
    expect(e.message).toContain("unknown term size:");
    for (const t of [
      "to:",
      "from:",
      "cc:",
      "subject:",
      "has:attachment",
      "filename:",
      "after:",
      "before:",
      "is:rest",
      "is:smtp",
      '"QUOTED PHRASE"',
      "-TERM",
    ]) {
      expect(e.hint).toContain(t);
    }
  });
  it("a word with a colon must be quoted; quoted, it is searched", () => {
    expect(error("http://x").message).toContain("unknown term http:");
    expect(ok('"https://app"', msg(), { cc: [], body: "see https://app.example.com" })).toBe(true);
  });
  it("bad values, an empty value, an unclosed quote, a lone -", () => {
    expect(error("has:image").message).toContain("has:image is not known (has:attachment is)");
    expect(error("is:pigeon").message).toContain("is:rest and is:smtp");
    expect(error("after:yesterday").message).toContain("neither a date");
    expect(error("to: alice").message).toContain("to: needs a value");
    expect(error('subject:"reset').message).toContain("quote is not closed");
    expect(error("to:alice - reset").message).toContain("a - with no term");
  });
});

describe("isClose", () => {
  it("the same recipient, or the same subject", () => {
    const q = parseQuery("to:alice subject:invoice", NOW);
    expect(isClose(q, msg())).toBe(true);
    expect(isClose(q, msg({ to: ["bob@example.com"], envelope: { from: "", to: [] } }))).toBe(false);
    expect(isClose(q, msg({ to: ["bob@example.com"], envelope: { from: "", to: [] }, subject: "Your invoice" }))).toBe(
      true,
    );
    expect(isClose(parseQuery("reset", NOW), msg())).toBe(false);
  });
});

describe("durationMs", () => {
  it("reads ms, s, m, h, d, w and bare seconds; a required unit refuses a bare number", () => {
    expect(durationMs("500ms")).toBe(500);
    expect(durationMs("30s")).toBe(30_000);
    expect(durationMs("10m")).toBe(600_000);
    expect(durationMs("2h")).toBe(7_200_000);
    expect(durationMs("7")).toBe(7000);
    expect(durationMs("7", { unit: "required" })).toBeUndefined();
    expect(durationMs("soon")).toBeUndefined();
  });
});

describe("a message's parts", () => {
  const eml = (type: string, body: string) =>
    Buffer.from(
      `From: a@example.com\r\nTo: b@example.com\r\nCc: "Boss" <boss@example.com>\r\nSubject: s\r\nMIME-Version: 1.0\r\nContent-Type: ${type}\r\n\r\n${body}\r\n`,
    );

  it("links: the HTML's <a href>s (entities decoded, script links left out), then the URLs in its text", async () => {
    const p = await readParts(
      eml(
        "text/html; charset=utf-8",
        '<p><a href="https://app.example.com/reset?t=1&amp;u=2">Reset</a> <a href="javascript:alert(1)">x</a> <a href="#top">top</a> <a href="myapp://open">app</a></p><p>Or paste https://app.example.com/other.</p><script>var u="https://nope.example.com"</script>',
      ),
    );
    expect(p.links).toEqual(["https://app.example.com/reset?t=1&u=2", "myapp://open", "https://app.example.com/other"]);
    expect(p.cc).toEqual(["Boss <boss@example.com>"]);
    expect(p.htmlText).not.toContain("nope");
  });
  it("the text part decoded, its URLs without the sentence's punctuation", async () => {
    const p = await readParts(
      eml(
        "text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable",
        "Code: 123456 =E2=80=94 see (https://x.example.com/a_(b)) and https://y.example.com/c.",
      ),
    );
    expect(p.text).toContain("Code: 123456 \u2014 see");
    expect(p.html).toBeNull();
    expect(p.links).toEqual(["https://x.example.com/a_(b)", "https://y.example.com/c"]);
  });
  it("textLinks keeps a query string and cuts a closing bracket it did not open", () => {
    expect(textLinks("[https://a.example.com/x?y=1&z=2]")).toEqual(["https://a.example.com/x?y=1&z=2"]);
  });
});
