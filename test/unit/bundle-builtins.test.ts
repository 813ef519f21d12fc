import { describe, expect, it } from "vitest";

// The build's rewrite of built-in imports (scripts/bundle-builtins.mjs), run on code of the shapes
// esbuild writes and then evaluated with a require() that records what it loads.
const script = new URL("../../scripts/bundle-builtins.mjs", import.meta.url).href;
const { requireBuiltins } = (await import(script)) as { requireBuiltins: (code: string, file: string) => string };

function run(code: string, body: string): { loaded: string[]; result: unknown } {
  const out = requireBuiltins(code, "chunk.js");
  const loaded: string[] = [];
  const req = (id: string) => {
    loaded.push(id);
    return process.getBuiltinModule(id);
  };
  const result = new Function("require", `${out}\nreturn (${body});`)(req);
  return { loaded, result };
}

describe("bundle-builtins: built-ins by require(), network modules on first use", () => {
  it("keeps every line where it was (the source maps stay right)", () => {
    const code = ['import http from "node:http";', 'import { isIP, connect as netConnect } from "node:net";', 'import { readFile } from "node:fs/promises";', "x();"].join("\n");
    expect(requireBuiltins(code, "chunk.js").split("\n")).toHaveLength(4);
  });

  it("a network module bound whole loads on the first property read, not before", () => {
    const code = 'import http from "node:http";\nimport * as net2 from "node:net";';
    expect(run(code, "1").loaded).toEqual([]);
    const { loaded, result } = run(code, "[typeof http.request, net2.isIP('::1')]");
    expect(result).toEqual(["function", 6]);
    expect(loaded).toContain("node:http");
    expect(loaded).toContain("node:net");
  });

  it("a listed plain function of a network module loads it on the first call", () => {
    const code = 'import { isIP, connect as netConnect } from "node:net";\nimport { randomUUID } from "node:crypto";';
    expect(run(code, "typeof netConnect").loaded).toEqual([]);
    const { loaded, result } = run(code, "[isIP('127.0.0.1'), isIP('x'), randomUUID().length]");
    expect(result).toEqual([4, 0, 36]);
    expect(new Set(loaded)).toEqual(new Set(["node:net", "node:crypto"]));
  });

  it("a class, or any name not listed, is bound at once as before (instanceof and extends keep working)", () => {
    const code = 'import { Socket, isIP } from "node:net";';
    const { loaded, result } = run(code, "[Socket === process.getBuiltinModule('node:net').Socket, isIP('::1')]");
    expect(result).toEqual([true, 6]);
    expect(loaded[0]).toBe("node:net");
    expect(requireBuiltins(code, "chunk.js")).toBe('const { Socket, isIP } = require("node:net");');
  });

  it("other built-ins are required with the chunk", () => {
    const code = 'import { readFile } from "node:fs/promises";\nimport path from "node:path";';
    expect(run(code, "1").loaded).toEqual(["node:fs/promises", "node:path"]);
  });
});
