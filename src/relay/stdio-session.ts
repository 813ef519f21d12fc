/**
 * `sendmail -bs`: the messages of one SMTP session on stdin/stdout, each as a message piped to
 * sendmail would be (local names, a missing From or Date, the quick send or the outbox), its
 * recipients the session's RCPT TO. What is refused is said to the program in the session
 * (554 or 451), as an MTA's sendmail -bs does.
 */
import { hostname } from "node:os";
import { parseMailbox1 } from "../core/address.js";
import type { Env } from "../core/env.js";
import type { Envelope, QueueMode } from "../core/envelope.js";
import { MailsendError } from "../core/errors.js";
import { submit } from "../outbox/submit.js";
import { isLocalName } from "../sendmail/aliases.js";
import { aliasesFor, completeLocalMessage, type LocalAliases } from "../sendmail/local.js";
import { relayLocal } from "../sendmail/submission.js";
import { serveStdio, type StdioOptions } from "./stdio.js";

export interface SessionOptions extends Pick<StdioOptions, "input" | "output" | "maxSize"> {
  env: Env;
  mode: QueueMode;
  profile: string | undefined;
  /** What was done with each message (-v). */
  note: ((line: string) => void) | undefined;
  /** A signal's: a message being sent at once stays queued, is answered as such, and the session ends. */
  stop: AbortSignal;
  /** From sessionAliases. */
  local: LocalAliases;
}

/**
 * The aliases for the session. Mail to local names waits while the file is broken (451, a fault
 * here, as the relay answers); as a configuration error it would be 550 at RCPT, and the program
 * would drop the message.
 */
export async function sessionAliases(env: Env): Promise<LocalAliases> {
  const { aliases, trouble: broken } = await aliasesFor(env);
  const trouble =
    broken &&
    new MailsendError("temporary_failure", `local names cannot be mapped now: ${broken.message}`, {
      cause: broken,
      ...(broken.hint ? { hint: broken.hint } : {}),
    });
  return { ...(aliases ? { aliases } : {}), ...(trouble ? { trouble } : {}) };
}

/** One message of the session: completed as sendmail's, then sent at once or queued; the reply's words. */
function messageTaker(opts: SessionOptions): StdioOptions["take"] {
  const { env, mode, profile, note, local } = opts;
  return async (raw: Buffer, envelope: Envelope) => {
    const fixed = completeLocalMessage(
      raw,
      {
        ...(envelope.from ? { envelopeFrom: envelope.from } : {}),
        readRecipients: false,
        recipients: envelope.to,
      },
      local,
      env,
    );
    for (const n of fixed.notes) note?.(n);
    const result = await submit(fixed.raw, fixed.envelope, {
      mode,
      env,
      source: "sendmail",
      stampedMessageId: fixed.stampedMessageId,
      signal: opts.stop,
      ...(profile ? { profile } : {}),
      ...(note ? { trace: note } : {}),
    });
    if (result.status === "queued") {
      note?.(`queued as ${result.id} (${result.reason.replace(/\s+/g, " ")})`);
      return `queued as ${result.id}`;
    }
    note?.(
      `sent over ${result.result.transport} to ${fixed.envelope.to.join(", ")} (message id ${result.result.messageId})`,
    );
    return `sent as ${result.result.messageId}`;
  };
}

export async function serveSendmailSession(opts: SessionOptions): Promise<void> {
  const { aliases, trouble } = opts.local;
  const { note } = opts;
  await serveStdio({
    input: opts.input,
    output: opts.output,
    name: hostname() || "localhost",
    maxSize: opts.maxSize,
    stop: opts.stop,
    // A recipient that is not valid (`u@intranet`) is refused at its RCPT (553), not the whole message
    // at DATA; local names are mapped with the message.
    checkRecipient(address) {
      if (trouble && isLocalName(address)) throw trouble;
      if (!relayLocal(address, aliases)) parseMailbox1(address, "recipient");
    },
    take: messageTaker(opts),
    ...(note ? { onRefused: (reply: string) => note(`refused: ${reply}`) } : {}),
  });
}
