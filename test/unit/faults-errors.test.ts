import { describe, expect, it } from "vitest";
import { mkdirSync, writeFileSync } from "node:fs";
import { toMailsendError } from "../../src/core/errors.js";

function errnoOf(fn: () => void): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error("did not throw");
}

describe("toMailsendError: a file system's refusal is never 'internal error' (70)", () => {
  it("a real ENOSPC from /dev/full is 73 with the errno in words", () => {
    const e = toMailsendError(errnoOf(() => writeFileSync("/dev/full", "x")));
    expect(e.code).toBe("local_write_failed");
    expect(e.exitCode).toBe(73);
    expect(e.message).toBe("cannot write a local file: no space left on device");
    expect(e.hint).toMatch(/free space/);
  });

  it("a directory that cannot be made under a file: not a local fault of space or permission, still reported as it is", () => {
    const e = toMailsendError(errnoOf(() => mkdirSync("/dev/null/x")));
    // ENOTDIR is not in the always-local list: it stays what it was (a path mistake is not guessed at).
    expect(e.exitCode).toBe(70);
  });

  it("an EACCES with a path is 73 and names the path", () => {
    const fake = Object.assign(new Error("EACCES: permission denied, open '/etc/x'"), {
      code: "EACCES",
      syscall: "open",
      path: "/etc/x",
    });
    const e = toMailsendError(fake);
    expect(e.exitCode).toBe(73);
    expect(e.message).toBe("cannot write the file /etc/x: permission denied");
  });

  it("EPERM without a path (process.kill) stays internal: it is not a file", () => {
    const fake = Object.assign(new Error("kill EPERM"), { code: "EPERM", syscall: "kill" });
    expect(toMailsendError(fake).exitCode).toBe(70);
  });
});
