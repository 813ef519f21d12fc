import type { TransportConfig } from "../core/config.js";
import type { Transport, TransportOptions } from "../core/transport.js";

/**
 * The transports, loaded on demand so that a REST send never pays for
 * nodemailer. A new transport is one file and one line here.
 */
const registry = {
  rest: () => import("./rest.js"),
  smtp: () => import("./smtp.js"),
} as const;

export async function createTransport(config: TransportConfig, opts: TransportOptions = {}): Promise<Transport> {
  if (config.transport === "rest") return (await registry.rest()).create(config, opts);
  return (await registry.smtp()).create(config, opts);
}
