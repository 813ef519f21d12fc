import { describe, expect, it } from "vitest";
import {
  EXIT,
  exitCodeFor,
  localFileError,
  MailsendError,
  toMailsendError,
  type ErrorCode,
} from "../../src/core/errors.js";

// The sysexits table, restated here on purpose: a change to the table must be a deliberate one.
const TABLE: Record<ErrorCode, number> = {
  usage: 64,
  invalid_address: 65,
  invalid_header: 65,
  invalid_message: 65,
  invalid_json: 65,
  invalid_eml: 65,
  rejected: 65,
  too_large: 65,
  recipients_refused: 67,
  file_not_found: 66,
  file_unreadable: 66,
  empty_input: 66,
  connection_failed: 69,
  service_error: 69,
  internal: 70,
  local_write_failed: 73,
  local_io_failed: 74,
  rate_limited: 75,
  temporary_failure: 75,
  timeout: 75,
  protocol_error: 76,
  outcome_unknown: 76,
  auth_failed: 77,
  key_revoked: 77,
  config_missing: 78,
  config_invalid: 78,
  tls_mismatch: 78,
  tls_untrusted: 78,
};

describe("error code -> exit code", () => {
  it("uses the sysexits values", () => {
    expect(EXIT).toEqual({
      ok: 0,
      usage: 64,
      dataerr: 65,
      noinput: 66,
      nouser: 67,
      unavailable: 69,
      software: 70,
      cantcreat: 73,
      ioerr: 74,
      tempfail: 75,
      protocol: 76,
      noperm: 77,
      config: 78,
    });
  });

  it.each(Object.entries(TABLE) as Array<[ErrorCode, number]>)("%s -> %i", (code, exit) => {
    expect(exitCodeFor(code)).toBe(exit);
    expect(new MailsendError(code, "x").exitCode).toBe(exit);
  });

  it("has no code the table above does not know", () => {
    // exitCodeFor of an unknown code would be undefined; every known one is covered above.
    for (const code of Object.keys(TABLE) as ErrorCode[]) expect(exitCodeFor(code)).toBeTypeOf("number");
    expect(Object.values(TABLE).every((n) => Object.values(EXIT).includes(n as never))).toBe(true);
  });
});

describe("MailsendError", () => {
  it("carries hint, status, retryAfter and mayHaveBeenSent", () => {
    const e = new MailsendError("rate_limited", "slow down", { hint: "wait", status: 429, retryAfter: 7 });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe("MailsendError");
    expect(e.message).toBe("slow down");
    expect(e.hint).toBe("wait");
    expect(e.status).toBe(429);
    expect(e.retryAfter).toBe(7);
    expect(e.mayHaveBeenSent).toBe(false);
    expect(e.exitClass).toBe("tempfail");
  });

  it("toJSON is the --json error shape, without empty fields", () => {
    expect(new MailsendError("usage", "missing --to").toJSON()).toEqual({
      code: "usage",
      message: "missing --to",
      exit: 64,
    });
    expect(new MailsendError("auth_failed", "no", { hint: "check the key", status: 401 }).toJSON()).toEqual({
      code: "auth_failed",
      message: "no",
      exit: 77,
      hint: "check the key",
      status: 401,
    });
  });

  it("keeps the cause", () => {
    const cause = new Error("boom");
    expect(new MailsendError("internal", "x", { cause }).cause).toBe(cause);
  });
});

describe("toMailsendError", () => {
  it("passes a MailsendError through", () => {
    const e = new MailsendError("timeout", "slow");
    expect(toMailsendError(e)).toBe(e);
  });

  it("turns anything else into an internal error (exit 70) with a report hint", () => {
    const e = toMailsendError(new TypeError("x is undefined"));
    expect(e.code).toBe("internal");
    expect(e.exitCode).toBe(70);
    expect(e.message).toContain("x is undefined");
    expect(e.hint).toMatch(/bug/);
    expect(toMailsendError("a string").message).toContain("a string");
  });
});

describe("localFileError", () => {
  it("names the path and the errno in words, 73 for a write and 74 for a read or sync", () => {
    const full = Object.assign(new Error("ENOSPC: no space"), { code: "ENOSPC" });
    const w = localFileError(full, "/var/x/journal", "write", "journal");
    expect(w.code).toBe("local_write_failed");
    expect(w.exitCode).toBe(73);
    expect(w.message).toBe("cannot write the journal /var/x/journal: no space left on device");
    expect(w.hint).toMatch(/Free space/);
    const r = localFileError(Object.assign(new Error("EIO"), { code: "EIO" }), "/x", "sync");
    expect(r.exitCode).toBe(74);
    expect(r.message).toContain("input/output error");
    expect(localFileError(Object.assign(new Error("ro"), { code: "EROFS" }), "/x", "write").hint).toMatch(/read-only/);
  });
});
