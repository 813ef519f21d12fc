import { describe, expect, it } from "vitest";
import { colorsFor } from "../../src/cli/io.js";

const tty = { isTTY: true } as never;
const pipe = { isTTY: false } as never;

describe("colorsFor: colour only where it is wanted", () => {
  it("styles text on a terminal with the 16-colour codes", () => {
    const c = colorsFor(tty, {});
    expect(c.red("x")).toBe("\u001b[31mx\u001b[39m");
    expect(c.green("x")).toBe("\u001b[32mx\u001b[39m");
    expect(c.yellow("x")).toBe("\u001b[33mx\u001b[39m");
    expect(c.bold("x")).toBe("\u001b[1mx\u001b[22m");
    expect(c.dim("x")).toBe("\u001b[2mx\u001b[22m");
  });

  it("a nested style does not end the outer one early", () => {
    const c = colorsFor(tty, {});
    expect(c.bold(`a${c.dim("b")}c`)).toBe("\u001b[1ma\u001b[2mb\u001b[22m\u001b[1mc\u001b[22m");
  });

  it("leaves text as it is off a terminal, with NO_COLOR, or with TERM=dumb", () => {
    for (const [stream, env] of [
      [pipe, {}],
      [tty, { NO_COLOR: "1" }],
      [tty, { TERM: "dumb" }],
    ] as const) {
      const c = colorsFor(stream, env);
      expect([c.red("x"), c.bold("x"), c.dim("x"), c.green("x"), c.yellow("x")]).toEqual(["x", "x", "x", "x", "x"]);
    }
  });

  it("an empty NO_COLOR is as if unset (no-color.org: present and not an empty string)", () => {
    expect(colorsFor(tty, { NO_COLOR: "" }).red("x")).toBe("\u001b[31mx\u001b[39m");
  });

  it("FORCE_COLOR turns it on off a terminal, unless it is 0 or NO_COLOR is set", () => {
    expect(colorsFor(pipe, { FORCE_COLOR: "1" }).red("x")).toBe("\u001b[31mx\u001b[39m");
    expect(colorsFor(pipe, { FORCE_COLOR: "0" }).red("x")).toBe("x");
    expect(colorsFor(pipe, { FORCE_COLOR: "1", NO_COLOR: "1" }).red("x")).toBe("x");
  });
});
