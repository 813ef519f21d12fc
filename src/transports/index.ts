import type { TransportConfig } from "../core/config.js";
import type { Transport, TransportName, TransportOptions } from "../core/transport.js";
import { chooseTransport } from "./choose.js";
import * as rest from "./rest.js";

/**
 * The transports: SMTP loaded on demand so that a REST send never pays for
 * nodemailer; REST is small and most sends use it, so it comes with this file
 * (an import() would only add a file to open). A new transport is one file and
 * one line here.
 */
const registry = {
  rest: async () => rest,
  smtp: () => import("./smtp.js"),
} as const;

/** Loads every transport's code now, for a process that must keep delivering after an upgrade (outbox/preload.ts). */
export async function loadTransports(): Promise<void> {
  const smtp = await registry.smtp();
  await Promise.all([smtp.loadSmtpConnection(), smtp.loadNodemailer()]);
}

export async function createTransport(config: TransportConfig, opts: TransportOptions = {}): Promise<Transport> {
  if (config.transport === "rest") return (await registry.rest()).create(config, opts);
  return (await registry.smtp()).create(config, opts);
}

/**
 * `--transport auto` for many messages (a batch): each message goes over the channel send would
 * choose for it (transports/choose.ts) among those configured; each channel's transport (its
 * pool) is made when a message first needs it.
 */
export function createAutoTransport(
  configs: Partial<Record<TransportName, TransportConfig>>,
  opts: TransportOptions = {},
): Transport {
  const channels = { rest: configs.rest !== undefined, smtp: configs.smtp !== undefined };
  const made = new Map<TransportName, Promise<Transport>>();
  const get = (name: TransportName): Promise<Transport> => {
    let t = made.get(name);
    if (!t) {
      t = createTransport(configs[name]!, opts);
      made.set(name, t);
    }
    return t;
  };
  return {
    // One name is asked for; a message's own is in its SendResult.
    name: channels.rest ? "rest" : "smtp",
    async send(message, ctx) {
      return (await get(chooseTransport(message, channels).transport)).send(message, ctx);
    },
    async preview(message, sink, o) {
      return (await get(chooseTransport(message, channels).transport)).preview(message, sink, o);
    },
    async close() {
      const all = [...made.values()];
      made.clear();
      const results = await Promise.allSettled(all.map(async (t) => (await t).close()));
      const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
    },
  };
}
