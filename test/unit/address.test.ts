import { describe, expect, it } from "vitest";
import {
  commaSplitNameFix,
  formatAddressList,
  formatMailbox,
  parseAddressList,
  parseAddressValues,
  parseBareAddress,
  parseMailbox1,
  type Mailbox,
} from "../../src/core/address.js";
import { MailsendError } from "../../src/core/errors.js";

function rejects(input: string): MailsendError {
  try {
    parseAddressList(input, "--to");
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    const err = e as MailsendError;
    expect(err.code).toBe("invalid_address");
    expect(err.exitCode).toBe(65);
    expect(err.message).toContain("--to");
    return err;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

describe("parseAddressList: what it accepts", () => {
  it.each<[string, Mailbox[]]>([
    ["a@example.com", [{ address: "a@example.com" }]],
    ["  a@example.com  ", [{ address: "a@example.com" }]],
    ["A <a@example.com>", [{ name: "A", address: "a@example.com" }]],
    ["John Q Public <jqp@example.com>", [{ name: "John Q Public", address: "jqp@example.com" }]],
    ["<a@example.com>", [{ address: "a@example.com" }]],
    ["a@example.com, b@example.org", [{ address: "a@example.com" }, { address: "b@example.org" }]],
    ["a@example.com,b@example.org", [{ address: "a@example.com" }, { address: "b@example.org" }]],
    // A comma or a quote inside a quoted display name is part of the name.
    ['"Doe, John" <john@example.com>', [{ name: "Doe, John", address: "john@example.com" }]],
    [
      '"Doe, John" <john@example.com>, "Roe, Jane" <jane@example.com>',
      [
        { name: "Doe, John", address: "john@example.com" },
        { name: "Roe, Jane", address: "jane@example.com" },
      ],
    ],
    ['"Say \\"hi\\"" <hi@example.com>', [{ name: 'Say "hi"', address: "hi@example.com" }]],
    ['"back\\\\slash" <b@example.com>', [{ name: "back\\slash", address: "b@example.com" }]],
    ['"a <b@x.com>" <c@example.com>', [{ name: "a <b@x.com>", address: "c@example.com" }]],
    // Comments are dropped, nested ones too.
    ["a@example.com (work)", [{ address: "a@example.com" }]],
    ["John (the (real) one) <j@example.com>", [{ name: "John", address: "j@example.com" }]],
    ["(lead) a@example.com, b@example.com (tail)", [{ address: "a@example.com" }, { address: "b@example.com" }]],
    // Quoted local parts are kept quoted: that is the address.
    ['"john doe"@example.com', [{ address: '"john doe"@example.com' }]],
    ['Name <"a,b"@example.com>', [{ name: "Name", address: '"a,b"@example.com' }]],
    ["first.last+tag@sub.example.co.uk", [{ address: "first.last+tag@sub.example.co.uk" }]],
    ["a@[192.0.2.1]", [{ address: "a@[192.0.2.1]" }]],
    // Non-ASCII (RFC 6532) in names and addresses.
    ["Jürgen Müller <jm@example.de>", [{ name: "Jürgen Müller", address: "jm@example.de" }]],
    ["用户@例子.广告", [{ address: "用户@例子.广告" }]],
    // obs-phrase: a dot in an unquoted display name.
    ["J. Doe <jd@example.com>", [{ name: "J. Doe", address: "jd@example.com" }]],
  ])("%s", (input, expected) => {
    expect(parseAddressList(input)).toEqual(expected);
  });
});

describe("parseAddressList: groups (RFC 5322 3.4) stand for their members", () => {
  it.each([
    ["team: a@x.com, b@y.com;", ["a@x.com", "b@y.com"]],
    ['"The Team": Ann <a@x.com>, b@y.com ;', ["a@x.com", "b@y.com"]],
    ["undisclosed-recipients:;", []],
    ["undisclosed-recipients: ;, c@z.com", ["c@z.com"]],
    ["c@z.com, team: a@x.com;, d@z.com", ["c@z.com", "a@x.com", "d@z.com"]],
  ])("%s", (input, expected) => {
    expect(parseAddressList(input).map((m) => m.address)).toEqual(expected);
  });

  it("a single mailbox (From, the REST request's to) is never a group", () => {
    expect(() => parseMailbox1("team: a@x.com;", "--from")).toThrow(/group .* is not allowed here/);
    expect(() => parseAddressList("team: a@x.com;", "to", false)).toThrow(/group .* is not allowed here/);
  });
});

describe("parseAddressList: what it rejects", () => {
  it.each([
    ["an addr-spec followed by an angle address", "a@x.com <b@y.com>"],
    ["two addresses without a comma", "a@x.com b@y.com"],
    ["unquoted comma in a display name", "Doe, John <john@example.com>"],
    ["a group without its ending ;", "team: a@x.com, b@y.com"],
    ["a group inside a group", "all: team: a@x.com;;"],
    ["text after a group's ;", "team: a@x.com; b@y.com"],
    ["an empty member in a group", "team: a@x.com, ;"],
    ["a colon inside angles (a source route)", "<@relay.example:a@x.com>"],
    ["CR LF (header injection)", "a@example.com\r\nBcc: evil@example.com"],
    ["a bare LF", "a@example.com\nb@example.com"],
    ["a bare CR", "Name\r <a@example.com>"],
    ["NUL", "a@example.com\u0000"],
    ["CR LF inside a quoted name", '"Evil\r\nBcc: x@y.com" <a@example.com>'],
    ["missing @", "example.com"],
    ["two @", "a@b@example.com"],
    ["empty local part", "@example.com"],
    ["empty domain", "a@"],
    ["unqualified domain", "a@localhost"],
    ["double dot in domain", "a@example..com"],
    ["leading dot in local part", ".a@example.com"],
    ["trailing dot in local part", "a.@example.com"],
    ["label starting with a hyphen", "a@-example.com"],
    ["empty string", ""],
    ["only spaces", "   "],
    ["leading comma", ",a@example.com"],
    ["trailing comma", "a@example.com,"],
    ["two commas", "a@example.com,,b@example.com"],
    ["unclosed angle", "Name <a@example.com"],
    ["text after >", "Name <a@example.com> tail"],
    ["unmatched >", "a@example.com>"],
    ["nested angles", "A <<a@example.com>>"],
    ["unclosed quote", '"Name <a@example.com>'],
    ["unclosed comment", "a@example.com (comment"],
    ["a list inside angles", "<a@x.com, b@y.com>"],
    ["a semicolon separator", "a@x.com; b@y.com"],
    ["a local part over 64 octets", `${"a".repeat(65)}@example.com`],
    ["a malformed domain literal", "a@[not-an-ip]"],
  ])("%s", (_why, input) => {
    rejects(input);
  });

  it("names the field and the reason", () => {
    const err = rejects("a@x.com <b@y.com>");
    expect(err.hint).toMatch(/user@example\.com/);
  });

  it("a display name cut in two by its comma: the hint says the comma separates recipients and shows the quoted form", () => {
    const err = rejects("Doe, Jane <jane@example.com>");
    expect(err.message).toBe('--to: missing @ in "Doe, Jane <jane@example.com>"');
    expect(err.hint).toMatch(/comma separates recipients/);
    expect(err.hint).toContain('"Doe, Jane" <jane@example.com>');
    // Further along a list, with a quote in the name: escaped in the suggestion.
    const later = rejects('a@example.com, "O\\"Neil", J. Roe <jr@example.com>');
    expect(later.hint).toContain('"O\\"Neil, J. Roe" <jr@example.com>');
    expect(commaSplitNameFix("Doe, Jane <jane@example.com>")).toBe('"Doe, Jane" <jane@example.com>');
  });

  it.each([
    ["a bare word", "example.com"],
    ["a word and a bare address", "team, a@example.com"],
    ["an addr-spec before an angle address", "a@x.com, <b@y.com> c"],
  ])("no comma hint for %s", (_why, input) => {
    expect(rejects(input).hint).not.toMatch(/comma separates/);
    expect(commaSplitNameFix(input)).toBeUndefined();
  });
});

describe("single mailboxes", () => {
  it("parseMailbox1 takes exactly one", () => {
    expect(parseMailbox1("A <a@example.com>", "--from")).toEqual({ name: "A", address: "a@example.com" });
    expect(() => parseMailbox1("a@example.com, b@example.com", "--from")).toThrow(/expected one address, found 2/);
  });

  it("parseBareAddress refuses a display name", () => {
    expect(parseBareAddress("a@example.com", "from")).toBe("a@example.com");
    expect(() => parseBareAddress("A <a@example.com>", "from")).toThrow(/bare address/);
    expect(() => parseBareAddress("<a@example.com>", "from")).toThrow(/bare address/);
  });

  it("parseAddressValues flattens repeated flags, each possibly a list", () => {
    expect(parseAddressValues(["a@example.com, B <b@example.com>", '"C, D" <c@example.com>'], "--to")).toEqual([
      { address: "a@example.com" },
      { name: "B", address: "b@example.com" },
      { name: "C, D", address: "c@example.com" },
    ]);
  });
});

describe("formatMailbox", () => {
  it.each<[Mailbox, string]>([
    [{ address: "a@example.com" }, "a@example.com"],
    [{ name: "Alice", address: "a@example.com" }, "Alice <a@example.com>"],
    [{ name: "Alice Smith", address: "a@example.com" }, "Alice Smith <a@example.com>"],
    [{ name: "Doe, John", address: "j@example.com" }, '"Doe, John" <j@example.com>'],
    [{ name: 'Say "hi"', address: "h@example.com" }, '"Say \\"hi\\"" <h@example.com>'],
    [{ name: "J. Doe", address: "jd@example.com" }, '"J. Doe" <jd@example.com>'],
    [{ name: "a <b>", address: "c@example.com" }, '"a <b>" <c@example.com>'],
    [{ name: "Jürgen", address: "j@example.de" }, "Jürgen <j@example.de>"],
  ])("%j -> %s", (m, text) => {
    expect(formatMailbox(m)).toBe(text);
  });

  it.each<Mailbox>([
    { address: "a@example.com" },
    { name: "Doe, John", address: "j@example.com" },
    { name: 'Say "hi" \\ bye', address: "h@example.com" },
    { name: "  spaced  out  ", address: "s@example.com" },
    { name: "(not a comment)", address: "p@example.com" },
    { name: "semi;colon: here", address: "g@example.com" },
    { name: "J. R. R. Tolkien", address: "jrr@example.com" },
    { name: "Ünïcödé, Ltd.", address: "u@example.com" },
    { name: "x@y.com", address: "real@example.com" },
    { name: "Quoted", address: '"odd local"@example.com' },
  ])("round trip %j", (m) => {
    expect(parseAddressList(formatMailbox(m))).toEqual([m]);
  });

  it("round trips a whole list", () => {
    const list: Mailbox[] = [
      { name: "Doe, John", address: "j@example.com" },
      { address: "b@example.com" },
      { name: 'The "Boss"', address: "boss@example.com" },
    ];
    expect(formatAddressList(list)).toBe(
      '"Doe, John" <j@example.com>, b@example.com, "The \\"Boss\\"" <boss@example.com>',
    );
    expect(parseAddressList(formatAddressList(list))).toEqual(list);
  });
});

describe("parseAddressList: empty elements (RFC 5322 4.4, obs-addr-list)", () => {
  const addrs = (input: string, mode: "skip" | "trailing") =>
    parseAddressList(input, "To", true, mode).map((m) => m.address);
  it("a message's header (skip): empty elements anywhere are read past", () => {
    expect(addrs("Alice <alice@example.com>,", "skip")).toEqual(["alice@example.com"]);
    expect(addrs("a@x.com, , b@x.com", "skip")).toEqual(["a@x.com", "b@x.com"]);
    expect(addrs(", a@x.com,,", "skip")).toEqual(["a@x.com"]);
    expect(addrs("team: a@x.com, ;, b@x.com", "skip")).toEqual(["a@x.com", "b@x.com"]);
    expect(addrs("undisclosed-recipients:;", "skip")).toEqual([]);
  });
  it("a flag (trailing): only trailing commas; an empty element before another stays an error", () => {
    expect(addrs("a@x.com,", "trailing")).toEqual(["a@x.com"]);
    expect(addrs("a@x.com, b@x.com, ,", "trailing")).toEqual(["a@x.com", "b@x.com"]);
    expect(() => addrs("a@x.com, , b@x.com", "trailing")).toThrow(/empty element between commas/);
    expect(() => addrs(", a@x.com", "trailing")).toThrow(/list starts with a comma/);
  });
  it("a list with no address at all is refused in both", () => {
    for (const mode of ["skip", "trailing"] as const) {
      expect(() => addrs(",", mode)).toThrow(/no address/);
      expect(() => addrs(" , ,", mode)).toThrow(/no address/);
    }
  });
  it("refused by default", () => {
    expect(() => parseAddressList("a@x.com,", "To")).toThrow(/empty element between commas/);
  });
});
