/**
 * How often composing parses the HTML: parsing a large coverage page is costly in CPU,
 * so a message is not parsed again for what an earlier parse already found.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";

let parses = 0;
vi.mock("htmlparser2", async (original) => {
  const m = await original<typeof import("htmlparser2")>();
  class CountingParser extends m.Parser {
    constructor(...args: ConstructorParameters<typeof m.Parser>) {
      super(...args);
      parses++;
    }
  }
  return { ...m, Parser: CountingParser };
});

const { composeHtml } = await import("../../src/compose/index.js");

const dir = mkdtempSync(join(tmpdir(), "mailsend-parses-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("composeHtml", () => {
  it("checks the cid: references it made without parsing the HTML again", async () => {
    mkdirSync(join(dir, "img"), { recursive: true });
    writeFileSync(
      join(dir, "img", "a.png"),
      Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.alloc(32, 1)]),
    );
    parses = 0;
    const c = await composeHtml('<p><img src="img/a.png"><img src="cid:missing"></p>', {
      baseDir: dir,
      embed: true,
      inline: [],
      inlineCss: false,
    });
    expect(c.images).toHaveLength(1);
    // The cid: no part has is still found.
    expect(c.warnings).toEqual([
      "the HTML refers to cid:missing, which no part of this message has: it shows as a broken image (--inline <file>#missing adds the part)",
    ]);
    expect(parses).toBe(1);
  });
});
