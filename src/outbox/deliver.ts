/**
 * Delivery of mail the outbox holds (or that a sendmail caller hands over):
 * which transport carries it, through the same budget, retry policy and
 * idempotency as `mailsend send`.
 */
import { Readable } from "node:stream";
import type { TransportConfig } from "../core/config.js";
import { MailsendError } from "../core/errors.js";
import type { Message } from "../core/message.js";
import type { SendResult, Transport, TransportName } from "../core/transport.js";
import { allChannels, cliLayers, resolveSettings, type Layers } from "../settings/resolve.js";
import { loadSettings } from "../settings/profile.js";
import { openSlotStore } from "../limits/budget.js";
import { resolveLimits } from "../settings/budget.js";
import { deliver, type DeliverOptions, type WaitInfo } from "../limits/deliver.js";
import type { SlotStore } from "../limits/store.js";
import type { SlotClass } from "../limits/sliding-log.js";
import type { OutboxMeta } from "./types.js";
import { createTransport } from "../transports/index.js";
import { restLossOfRaw } from "./choose.js";
import { smtpPreference } from "../transports/choose.js";
import type { Env } from "../core/env.js";

export type Preferred = TransportName | "auto";

export interface Chosen {
  transport: TransportName;
  /** Why this one, for -v and --json. */
  reason: string;
}

/** The transport a message goes over: the configured one, or under auto REST when it carries the message whole. */
export function chooseFor(message: Message, preferred: Preferred, available: { rest: boolean; smtp: boolean }): Chosen {
  const loss = restLossOfRaw(message);
  if (preferred === "smtp") return { transport: "smtp", reason: "--transport smtp" };
  if (preferred === "rest") {
    if (loss) {
      throw new MailsendError("config_invalid", `this message cannot go over REST without loss: ${loss}`, {
        hint: "Configure SMTP (MAILSEND_SMTP_HOST) and set MAILSEND_TRANSPORT=auto (or smtp): such messages then go over SMTP unchanged.",
      });
    }
    return { transport: "rest", reason: "--transport rest" };
  }
  const preference = !loss && available.rest && available.smtp ? smtpPreference(message) : undefined;
  if (preference !== undefined) return { transport: "smtp", reason: preference };
  if (!loss && available.rest) return { transport: "rest", reason: "REST carries it whole" };
  if (available.smtp) return { transport: "smtp", reason: loss ? loss : "only SMTP is configured" };
  throw new MailsendError(
    "config_missing",
    `this message cannot go over REST without loss (${loss}), and no SMTP server is configured`,
    {
      hint: "Set MAILSEND_SMTP_HOST (and MAILSEND_SMTP_PORT) so that such messages go over SMTP unchanged; nothing was changed or sent.",
    },
  );
}

/** Over REST the envelope's recipients are the `to`; the headers' Cc/Bcc were checked away by chooseFor. */
function forTransport(message: Message, transport: TransportName): Message {
  if (transport === "smtp" || !message.envelope) return message;
  return {
    ...message,
    to: message.envelope.to.map(
      (address) => message.to.find((t) => t.address.toLowerCase() === address.toLowerCase()) ?? { address },
    ),
  };
}

export interface SenderOptions {
  /** Connections to keep per transport (the runner's concurrency). */
  pool?: number;
  trace?: (line: string) => void;
  /** The rest of deliver()'s settings. */
  retries: number;
  maxWaitMs: number;
  deadlineMs: number;
  noWait?: boolean;
}

const noStdin = () => Readable.from([]) as unknown as NodeJS.ReadableStream;

/** What one profile delivers with: its settings, its MAILSEND_TRANSPORT, and the channels it configures. */
export interface ProfileChannels {
  env: Env;
  preferred: Preferred;
  configs: Partial<Record<TransportName, TransportConfig>>;
  /**
   * A channel whose settings are there but wrong (not merely absent): its error. A message only
   * that channel can carry waits for the settings to be fixed rather than failing as if it were
   * not configured at all.
   */
  broken: Partial<Record<TransportName, MailsendError>>;
}

/**
 * The channels of one profile, as the runner delivers with them (and the relay checks its intake
 * against). Both when both are configured: auto needs them, and `send --queue` may have chosen
 * either. Throws what makes the profile unusable: an unknown profile, a bad MAILSEND_TRANSPORT,
 * the preferred channel (or both) not configured. `needKey`: read the key (the relay's check
 * does not need it).
 */
export async function profileChannels(
  env: Env,
  profile: string | undefined,
  needKey: boolean,
): Promise<ProfileChannels> {
  const settings = loadSettings(profile, env);
  const e = settings.env;
  // Unset, the outbox delivers under auto: each message over the channel that carries it whole.
  const layers: Layers = { ...cliLayers({}, e, settings.profile), defaultTransport: "auto" };
  const resolved = await resolveSettings(layers, { stdin: noStdin(), needKey });
  const preferred = resolved.transport;
  const { configs, errors } = allChannels(resolved);
  if (preferred !== "auto" && !configs[preferred]) throw errors[preferred];
  if (!configs.rest && !configs.smtp) throw errors.rest ?? errors.smtp;
  const broken: ProfileChannels["broken"] = {};
  for (const name of ["rest", "smtp"] as const) {
    const err = errors[name];
    if (err instanceof MailsendError && err.code !== "config_missing") broken[name] = err;
  }
  return { env: e, preferred, configs, broken };
}

/** Queued mail that is always urgent: `run`'s alerts and the outbox's own notices. */
const URGENT_SOURCES: ReadonlySet<OutboxMeta["source"]> = new Set(["run", "notice"]);

/**
 * The budget class of a queued message's attempt: its first attempt is urgent (a sendmail or
 * relay caller's mail goes as soon as a slot frees), later ones are bulk (a backlog being
 * drained leaves the reserve to new mail), alerts and notices urgent always.
 */
export function slotClassOf(source: OutboxMeta["source"], attempt: number): SlotClass {
  return attempt <= 1 || URGENT_SOURCES.has(source) ? "urgent" : "bulk";
}

/**
 * The connections and the budget of one profile. The key is read from the
 * environment or the profile at delivery time, never from the outbox.
 */
export class OutboxSender {
  private transports = new Map<TransportName, Promise<Transport>>();

  private constructor(
    private readonly configs: Partial<Record<TransportName, TransportConfig>>,
    private readonly broken: ProfileChannels["broken"],
    readonly preferred: Preferred,
    private readonly store: SlotStore | undefined,
    private readonly limits: DeliverOptions["limits"],
    private readonly opts: SenderOptions,
  ) {}

  static async open(env: Env, profile: string | undefined, opts: SenderOptions): Promise<OutboxSender> {
    const { env: e, preferred, configs, broken } = await profileChannels(env, profile, true);
    const any = (configs.rest ?? configs.smtp)!;
    const limits = resolveLimits({}, e);
    const store = openSlotStore(any.apiKey, limits, e, {
      ...(any.caFile ? { caFile: any.caFile } : {}),
      ...(opts.trace ? { trace: opts.trace } : {}),
    });
    return new OutboxSender(configs, broken, preferred, store, limits, opts);
  }

  /**
   * The channel for this message. None of the configured ones carrying it whole is final, unless
   * a channel is configured wrongly (its settings there, but refused): then that error, a setting
   * to fix, which the message waits out.
   */
  choose(message: Message): Chosen {
    try {
      return chooseFor(message, this.preferred, {
        rest: this.configs.rest !== undefined,
        smtp: this.configs.smtp !== undefined,
      });
    } catch (e) {
      const broken = this.broken.smtp ?? this.broken.rest;
      if (broken) throw Object.assign(broken, { broken: true });
      throw e;
    }
  }

  private transport(name: TransportName): Promise<Transport> {
    let t = this.transports.get(name);
    if (!t) {
      const config = this.configs[name];
      if (!config)
        throw new MailsendError(
          "config_missing",
          `no ${name === "rest" ? "REST base URL" : "SMTP host"} is configured`,
        );
      t = createTransport(config, this.opts.pool ? { pool: this.opts.pool } : {});
      this.transports.set(name, t);
    }
    return t;
  }

  async send(
    message: Message,
    chosen: Chosen,
    extra: {
      onWait?: (w: WaitInfo) => void;
      signal?: AbortSignal;
      sleep?: DeliverOptions["sleep"];
      slotClass?: SlotClass;
    } = {},
  ): Promise<SendResult> {
    const transport = await this.transport(chosen.transport);
    return deliver(transport, forTransport(message, chosen.transport), {
      ...(this.store ? { store: this.store } : {}),
      limits: this.limits,
      retries: this.opts.retries,
      maxWaitMs: this.opts.maxWaitMs,
      deadlineMs: this.opts.deadlineMs,
      noWait: this.opts.noWait ?? false,
      ...(extra.onWait ? { onWait: extra.onWait } : {}),
      ...(extra.signal ? { signal: extra.signal } : {}),
      ...(extra.sleep ? { sleep: extra.sleep } : {}),
      ...(extra.slotClass ? { slotClass: extra.slotClass } : {}),
      ...(this.opts.trace ? { trace: this.opts.trace } : {}),
    });
  }

  async close(): Promise<void> {
    for (const t of this.transports.values()) await (await t.catch(() => undefined))?.close();
    await this.store?.close();
  }
}

/**
 * What a message already in the outbox waits out (tried again later, up to the outbox's max age)
 * rather than going to failed/ at once: what isTemporary says, and the service refusing the key
 * (wrong, revoked, expired). Whoever queued it was told it was accepted; a key is replaced by
 * fixing a setting, after which the backlog goes, as Postfix defers mail when its login is refused
 * (smtp_sasl_auth_soft_bounce). A caller still waiting for its answer (send --queue, sendmail) is
 * told of a refused key at once instead (isTemporary).
 */
export function waitsInOutbox(e: MailsendError): boolean {
  return isTemporary(e) || e.code === "auth_failed" || e.code === "key_revoked";
}

/**
 * What is worth another try later (it stays in the outbox) and what is not
 * (it goes to failed/ at once, or is refused to the caller).
 */
export function isTemporary(e: MailsendError): boolean {
  // This machine's Redis or proxy refused its credentials: a setting to fix, the message is fine.
  if (e.local) return true;
  return [
    "rate_limited",
    "temporary_failure",
    "timeout",
    "connection_failed",
    "service_error",
    "outcome_unknown",
    "protocol_error",
    "local_write_failed",
    "local_io_failed",
    // The machine's settings, not the message: it waits until they are fixed.
    "config_missing",
    "config_invalid",
    "tls_mismatch",
    "tls_untrusted",
  ].includes(e.code);
}
