/**
 * parseAddressList takes a bare ASCII address (what most batch rows hold) without tokenizing it.
 * That shortcut must give exactly what the whole grammar gives: the same mailbox, or a refusal.
 * A leading space sends the same text the whole way (the grammar drops it), so each input is
 * compared with itself behind a space; random inputs are drawn from the characters that matter.
 */
import { expect, test } from "vitest";
import { parseAddressList, parseMailbox1, type Mailbox } from "../../src/core/address.js";

function outcome(input: string): Mailbox[] | "refused" {
  try {
    return parseAddressList(input, "to");
  } catch {
    return "refused";
  }
}

const cases = [
  "a@example.com",
  "first.last+tag@sub.example.co.uk",
  "x!#$%&'*+-/=?^_`{|}~@example.com",
  "a@b.c",
  "a@a-b.example",
  "a@-ab.example",
  "a@ab-.example",
  "a@example",
  "a..b@example.com",
  ".a@example.com",
  "a.@example.com",
  "a@example..com",
  "a@example.com.",
  "a@@example.com",
  "a@exa_mple.com",
  "a@123.456",
  `${"l".repeat(64)}@example.com`,
  `${"l".repeat(65)}@example.com`,
  `a@${"d".repeat(63)}.com`,
  `a@${"d".repeat(64)}.com`,
  `a@${Array.from({ length: 5 }, () => "d".repeat(60)).join(".")}.com`,
  `${"l".repeat(60)}@${Array.from({ length: 3 }, () => "d".repeat(60)).join(".")}.com`,
];

test.each(cases)("%s: the same as through the whole grammar", (input) => {
  expect(outcome(input)).toEqual(outcome(` ${input}`));
});

test("random addresses: the same as through the whole grammar", () => {
  // A small deterministic generator: the same inputs every run. Mostly address-shaped text
  // (atoms, dots, an @, labels), with a random character put in now and then.
  let seed = 12345;
  const next = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed % n);
  const atom = (chars: string) => Array.from({ length: 1 + next(6) }, () => chars[next(chars.length)]).join("");
  const odd = '._-+@!#~ "<>()[],;:\u00e9';
  let accepted = 0;
  for (let n = 0; n < 5000; n++) {
    const local = Array.from({ length: 1 + next(3) }, () => atom("abz09+_-'")).join(".");
    const domain = Array.from({ length: 1 + next(3) }, () => atom("abz09-")).join(".");
    let s = `${local}@${domain}`;
    if (next(3) === 0) {
      const at = next(s.length + 1);
      s = s.slice(0, at) + odd[next(odd.length)] + s.slice(at);
    }
    const got = outcome(s);
    expect(got, s).toEqual(outcome(` ${s}`));
    if (got !== "refused") accepted++;
  }
  // The generator reaches accepted addresses too, not only refusals.
  expect(accepted).toBeGreaterThan(250);
});

test("parseMailbox1 keeps the last few it parsed: the same mailbox again, a copy each time; a bad one fails each time, naming its own field", () => {
  const a = parseMailbox1("Bench <bench@example.com>", "--from");
  const b = parseMailbox1("Bench <bench@example.com>", "from");
  expect(b).toEqual({ name: "Bench", address: "bench@example.com" });
  expect(b).toEqual(a);
  expect(b).not.toBe(a);
  (b as { name?: string }).name = "changed";
  expect(parseMailbox1("Bench <bench@example.com>", "from").name).toBe("Bench");
  expect(() => parseMailbox1("Bench <bench@>", "--from")).toThrow(/--from/);
  expect(() => parseMailbox1("Bench <bench@>", "reply_to")).toThrow(/reply_to/);
  // More than it keeps: the first is parsed again, the same.
  for (let i = 0; i < 40; i++) parseMailbox1(`N${i} <n${i}@example.com>`, "from");
  expect(parseMailbox1("Bench <bench@example.com>", "from")).toEqual({ name: "Bench", address: "bench@example.com" });
});
