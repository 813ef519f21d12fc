import type { TransportConfig } from "../core/config.js";
import type { Transport, TransportOptions } from "../core/transport.js";
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

export async function createTransport(config: TransportConfig, opts: TransportOptions = {}): Promise<Transport> {
  if (config.transport === "rest") return (await registry.rest()).create(config, opts);
  return (await registry.smtp()).create(config, opts);
}
