/**
 * The MailsendError a promise rejects with (or a function throws), for
 * asserting on its code, exit class and hint. Fails the test when there is
 * no failure, or when what was thrown is not a MailsendError.
 */
import { expect } from "vitest";
import { MailsendError } from "../../src/core/errors.js";

export async function failure(p: Promise<unknown>): Promise<MailsendError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    return e as MailsendError;
  }
  throw new Error("expected a failure");
}

export function failureOf(f: () => unknown): MailsendError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    return e as MailsendError;
  }
  throw new Error("expected a failure");
}
