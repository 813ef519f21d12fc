import type { Message } from "../../core/message.js";
import type { TransportName } from "../../core/transport.js";
import { rawOfMessage } from "../../outbox/from-message.js";
import { autorunOff } from "../../outbox/spawn.js";
import { queueModeFrom, submitStoppable } from "../../outbox/submit.js";
import { colorsFor, type CliIO } from "../io.js";
import { reportSent } from "../report.js";
import { resultJson } from "./send.js";

/**
 * `send --queue auto|always`: the message goes through the outbox, as mail
 * from sendmail does, with the transport send chose and its own key.
 */
export async function runSendQueued(
  message: Message,
  transport: TransportName,
  mode: string,
  opts: { profile?: string | undefined; json: boolean; quiet: boolean; trace?: (line: string) => void },
  io: CliIO,
): Promise<number> {
  const queueMode = queueModeFrom(mode, io.env);
  const { raw, envelope } = await rawOfMessage(message);
  // Stopped during the at-once attempt (a timeout, systemd, Ctrl-C), the message stays queued.
  const r = await submitStoppable(raw, envelope, {
    mode: queueMode,
    env: io.env,
    source: "send",
    transport,
    idempotencyKey: message.idempotencyKey,
    ...(opts.profile ? { profile: opts.profile } : {}),
    ...(opts.trace ? { trace: opts.trace } : {}),
  });
  if (r.status === "sent") {
    if (opts.json) io.stdout.write(`${JSON.stringify(resultJson(r.result))}\n`);
    else if (!opts.quiet) reportSent(io, r.result);
    return 0;
  }
  if (opts.json) io.stdout.write(`${JSON.stringify({ ok: true, queued: true, id: r.id, reason: r.reason, idempotency_key: message.idempotencyKey, recipients: envelope.to })}\n`);
  // Queued is a success (exit 0): --quiet prints nothing for it either; `mailsend queue` shows it.
  else if (!opts.quiet) {
    const out = colorsFor(io.stdout, io.env);
    const who = autorunOff(io.env) ? "`mailsend queue run` (or the relay) delivers it" : "it goes out by itself";
    io.stdout.write(`${out.yellow("queued")} ${r.id} ${out.dim(`(${r.reason}; mailsend queue shows it, ${who})`)}\n`);
  }
  return 0;
}
