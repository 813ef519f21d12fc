/**
 * send(): one message, with the CLI's validation, transports, shared
 * rate-limit budget and retry policy, and none of its process-wide effects:
 * no output, no exit, no signal handlers, no environment unless given.
 */
import { MailsendError, toMailsendError } from "../core/errors.js";
import type { Transport } from "../core/transport.js";
import { abortableSleep, deliver } from "../limits/deliver.js";
import { createTransport } from "../transports/index.js";
import { messageOf } from "./message.js";
import { aborted, abortedWaits, openBudget, resolveConnection } from "./options.js";
import type { MessageInput, SendOptions, SendResult } from "./types.js";

/**
 * Anything that is not a MailsendError is a bug of ours: code "internal", exit 70.
 * A MailsendError leaves the API in its terms (baseUrl, not --base-url): it says its settings as options.
 */
export function asMailsendError(e: unknown): MailsendError {
  if (e instanceof MailsendError) return e.in("api");
  // A disk that refused (full, read-only, permission) is the machine's fault, 73/74, as in the CLI.
  const local = toMailsendError(e);
  if (local.code !== "internal") return local.in("api");
  return new MailsendError("internal", `internal error: ${e instanceof Error ? e.message : String(e)}`, {
    cause: e,
    hint: "This is a bug in mailsend; please report it.",
  });
}

const inDoubt = (e: MailsendError) => e.mayHaveBeenSent || e.code === "outcome_unknown";

/**
 * The transport with its attempts noted, so that the error reported is the
 * message's state: an abort while waiting to retry reports the failure being
 * retried (it may have reached the service), not "nothing was sent"; and an
 * attempt that may have gone through keeps the message in doubt, whatever the
 * retries after it said (as the batch runner reports an item).
 */
function watched(t: Transport) {
  let count = 0;
  let last: MailsendError | undefined;
  let doubt: MailsendError | undefined;
  const transport: Transport = {
    name: t.name,
    preview: (m, sink, o) => t.preview(m, sink, o),
    close: () => t.close(),
    async send(m, ctx) {
      count++;
      try {
        return await t.send(m, ctx);
      } catch (e) {
        last = asMailsendError(e);
        if (inDoubt(last)) doubt ??= last;
        throw e;
      }
    },
  };
  const verdict = (err: MailsendError): MailsendError => {
    let out = err;
    if (abortedWaits.has(err) && last) out = last;
    if (!inDoubt(out) && doubt) out = doubt;
    if (count > 0) out.attempts = count;
    return out;
  };
  return { transport, verdict };
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
    const budget = openBudget(options, config.apiKey, config.caFile);
    try {
      const transport = await createTransport(config);
      const attempts = watched(transport);
      try {
        return await deliver(attempts.transport, msg, {
          ...budget.options,
          sleep: (ms, s) =>
            abortableSleep(ms, s).catch((e: unknown) => {
              throw s?.aborted ? aborted(s) : e;
            }),
          ...(signal ? { signal } : {}),
          ...(options.onWait
            ? { onWait: (w) => options.onWait!(w.error ? { ...w, error: w.error.in("api") } : w) }
            : {}),
          ...(options.onWarning ? { onWarning: options.onWarning } : {}),
          ...(options.trace ? { trace: options.trace } : {}),
        });
      } catch (e) {
        throw attempts.verdict(asMailsendError(e));
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
