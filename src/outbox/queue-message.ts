/**
 * `send --queue auto|always`: a message built by send goes through the outbox, as mail from
 * sendmail does, with the transport send chose and its own idempotency key.
 */
import type { Env } from "../core/env.js";
import type { Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";
import { rawOfMessage } from "./from-message.js";
import type { Envelope } from "../core/envelope.js";
import { queueModeFrom, submitStoppable, type SubmitResult } from "./submit.js";

export interface QueueMessageOptions {
  env: Env;
  profile?: string | undefined;
  trace?: ((line: string) => void) | undefined;
}

export async function queueMessage(
  message: Message,
  transport: TransportName,
  mode: string,
  opts: QueueMessageOptions,
): Promise<{ result: SubmitResult; envelope: Envelope }> {
  const queueMode = queueModeFrom(mode, opts.env);
  const { raw, envelope } = await rawOfMessage(message);
  // Stopped during the at-once attempt (a timeout, systemd, Ctrl-C), the message stays queued.
  const result = await submitStoppable(raw, envelope, {
    mode: queueMode,
    env: opts.env,
    source: "send",
    transport,
    idempotencyKey: message.idempotencyKey,
    ...(opts.profile ? { profile: opts.profile } : {}),
    ...(opts.trace ? { trace: opts.trace } : {}),
  });
  return { result, envelope };
}
