/**
 * An alert into the outbox: on disk before `run` exits, then delivered by the background runner
 * within the key's budget. Never tried at once: the job's exit waits for neither the budget nor
 * the service. Settings that cannot deliver it (no key yet) do not lose it: it waits in the
 * outbox, as queued mail does, and the caller is told.
 */
import type { Message } from "../core/message.js";
import { toMailsendError } from "../core/errors.js";
import type { Env } from "../core/env.js";
import { profileChannels } from "../outbox/deliver.js";
import { rawOfMessage } from "../outbox/from-message.js";
import { kickRunner } from "../outbox/spawn.js";
import { Outbox } from "../outbox/store.js";

export async function queueAlert(
  message: Message,
  env: Env,
  profile: string | undefined,
): Promise<{ id: string; warnings: string[] }> {
  const { raw, envelope } = await rawOfMessage(message);
  const outbox = Outbox.fromEnv(env);
  const id = await outbox.add({
    raw,
    envelope,
    idempotencyKey: message.idempotencyKey,
    source: "run",
    ...(profile ? { profile } : {}),
    subject: message.subject,
    headerFrom: message.from.address,
    // Its Message-ID is mailsend's, which nothing refers to yet: REST may replace it.
    stampedMessageId: true,
  });
  const warnings: string[] = [];
  try {
    await profileChannels(env, profile, true);
  } catch (e) {
    const err = toMailsendError(e);
    warnings.push(
      `the job's mail is queued as ${id} but cannot leave until this is fixed: ${err.message}${err.hint ? ` (${err.hint})` : ""}`,
    );
  }
  await kickRunner(env, outbox);
  return { id, warnings };
}
