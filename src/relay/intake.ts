/**
 * The relay's check at the end of DATA: mail its delivery settings can never
 * deliver is refused then (451 4.3.5, relay/replies.ts), never answered 250 and moved to
 * failed/ later, where no sender looks. The settings are the ones the
 * outbox's runner uses for the message (src/outbox/runner.ts): the
 * environment with the --profile recorded with it layered in, its
 * MAILSEND_TRANSPORT, and which channels are configured (a REST base URL, an
 * SMTP host); the choice is the runner's own (chooseFor, restLossOfRaw).
 *
 * Settings the runner could not open at all (no base URL and no SMTP host,
 * an unknown profile, a bad MAILSEND_TRANSPORT) are not judged here: the
 * runner keeps such mail until they are fixed.
 */
import { MailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import { restLossOfRaw } from "../outbox/choose.js";
import { chooseFor, profileChannels, type Preferred } from "../outbox/deliver.js";
import type { Env } from "../core/env.js";

export interface DeliverySettings {
  preferred: Preferred;
  rest: boolean;
  smtp: boolean;
}

/**
 * The channels the runner would have for this profile (profileChannels, without reading the key:
 * whether a channel is configured does not depend on it); undefined when the runner could not
 * open them at all.
 */
export async function deliverySettings(env: Env, profile: string | undefined): Promise<DeliverySettings | undefined> {
  try {
    const { preferred, configs } = await profileChannels(env, profile, false);
    return { preferred, rest: configs.rest !== undefined, smtp: configs.smtp !== undefined };
  } catch {
    return undefined;
  }
}

/** Throws (a 451 4.3.5 for the relay: a setting of this machine) when these settings can never deliver the message unchanged. */
export function checkDeliverable(message: Message, s: DeliverySettings): void {
  try {
    chooseFor(message, s.preferred, { rest: s.rest, smtp: s.smtp });
  } catch (e) {
    if (!(e instanceof MailsendError)) throw e;
    const loss = restLossOfRaw(message) ?? e.message;
    const why = s.preferred === "rest" ? "the transport is rest (MAILSEND_TRANSPORT)" : "no SMTP server is configured";
    const fix =
      s.preferred === "rest"
        ? "configure an SMTP server (MAILSEND_SMTP_HOST) and MAILSEND_TRANSPORT=auto for such mail"
        : "configure an SMTP server (MAILSEND_SMTP_HOST) for such mail";
    throw new MailsendError(e.code, `this message cannot go over REST without loss (${loss}), and ${why}; ${fix}`, {
      cause: e,
      local: e.local,
    });
  }
}

/**
 * The check for one relay: the settings found on first use and kept (the
 * runner keeps its own for as long as it runs), looked for again while the
 * runner could not open them.
 */
export function intakeCheck(env: Env, profile: string | undefined): (message: Message) => Promise<void> {
  let found: DeliverySettings | undefined;
  return async (message) => {
    found ??= await deliverySettings(env, profile);
    if (found) checkDeliverable(message, found);
  };
}
