/**
 * A message submitted on this machine (sendmail, sendmail -bs), completed with this machine's
 * settings: the aliases file (or why it cannot be read), the default sender, and who runs this.
 */
import { userInfo } from "node:os";
import type { Env } from "../core/env.js";
import { MailsendError, toMailsendError } from "../core/errors.js";
import { isLocalName, loadAliases, type AliasTable } from "./aliases.js";
import {
  mentionsThisMachine,
  prepareLocalSubmission,
  type LocalSubmission,
  type SubmissionInput,
} from "./submission.js";

/** The aliases file, or why it cannot be used: mail naming this machine then fails with that. */
export interface LocalAliases {
  aliases?: AliasTable;
  trouble?: MailsendError;
}

/**
 * The aliases file, or why it cannot be read or parsed. As the relay reads it (and as Postfix's
 * broken alias database stops only local delivery), a broken file stops only mail that names this
 * machine (a local name: root, name@localhost, name@<this host>); other mail (PHP's to a customer)
 * goes as written.
 */
export async function aliasesFor(env: Env): Promise<LocalAliases> {
  try {
    const aliases = await loadAliases(env);
    return aliases ? { aliases } : {};
  } catch (e) {
    return { trouble: toMailsendError(e) };
  }
}

/**
 * prepareLocalSubmission without the aliases a broken file kept from it: a setting it then misses (no sender:
 * the invoking user is mapped through that file) is the broken file's, said as such.
 */
function withAliasesTrouble<T>(trouble: MailsendError | undefined, fix: () => T): T {
  try {
    return fix();
  } catch (e) {
    if (trouble && e instanceof MailsendError && e.exitClass === "config") throw trouble;
    throw e;
  }
}

/** What prepareLocalSubmission needs of this machine's settings: the default sender, the aliases and who runs this. */
function senderSettings(
  env: Env,
  aliases: AliasTable | undefined,
): Pick<SubmissionInput, "defaultFrom" | "aliases" | "invokingUser"> {
  return {
    ...(env.MAILSEND_FROM ? { defaultFrom: env.MAILSEND_FROM } : {}),
    ...(aliases ? { aliases, invokingUser: invokingUser() } : {}),
  };
}

/** The name of the user running this (for the sender of a message that names none), or undefined. */
function invokingUser(): string | undefined {
  try {
    return userInfo().username || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The message completed for sending (local names mapped, a missing From, Date or Message-ID
 * added); a message that names this machine while the aliases file cannot be used fails with why.
 */
export function completeLocalMessage(
  raw: Buffer,
  opts: Omit<SubmissionInput, "defaultFrom" | "aliases" | "invokingUser">,
  { aliases, trouble }: LocalAliases,
  env: Env,
): LocalSubmission {
  const envelope = { from: opts.envelopeFrom ?? "", to: [...opts.recipients] };
  if (trouble && mentionsThisMachine(raw, envelope, (a) => isLocalName(a))) throw trouble;
  return withAliasesTrouble(trouble, () => prepareLocalSubmission(raw, { ...opts, ...senderSettings(env, aliases) }));
}
