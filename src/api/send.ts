/**
 * send(): one message, with the CLI's validation, transports, shared
 * rate-limit budget and retry policy, and none of its process-wide effects:
 * no output, no exit, no signal handlers, no environment unless given.
 */
import { MailsendError } from "../core/errors.js";
import { deliver } from "../limits/deliver.js";
import { createTransport } from "../transports/index.js";
import { messageOf } from "./message.js";
import { abortableSleep, aborted, openBudget, resolveConnection } from "./options.js";
import type { MessageInput, SendOptions, SendResult } from "./types.js";

/** Anything that is not a MailsendError is a bug of ours: code "internal", exit 70. */
export function asMailsendError(e: unknown): MailsendError {
  if (e instanceof MailsendError) return e;
  return new MailsendError("internal", `internal error: ${e instanceof Error ? e.message : String(e)}`, {
    cause: e,
    hint: "This is a bug in mailsend; please report it.",
  });
}

/**
 * Send one message. Resolves to the SendResult; rejects with a MailsendError
 * whose `code`, `exitClass` and `exitCode` are what the CLI would report.
 */
export async function send(message: MessageInput, options: SendOptions = {}): Promise<SendResult> {
  try {
    const signal = options.signal;
    if (signal?.aborted) throw aborted(signal);
    const config = await resolveConnection(options, { needKey: true });
    const msg = await messageOf(message, config.transport, options.idempotencyKey);
    const budget = openBudget(options, config.apiKey);
    try {
      const transport = await createTransport(config);
      try {
        return await deliver(transport, msg, {
          ...budget.options,
          sleep: abortableSleep,
          ...(signal ? { signal } : {}),
          ...(options.onWait ? { onWait: options.onWait } : {}),
          ...(options.trace ? { trace: options.trace } : {}),
        });
      } finally {
        await transport.close();
      }
    } finally {
      await budget.close();
    }
  } catch (e) {
    throw asMailsendError(e);
  }
}
