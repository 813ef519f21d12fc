/**
 * Fault injection, for testing what a script does when the service fails:
 * a share of requests answered with an error, added latency, and dropped
 * connections. Settable at start (CLI flags) and while running
 * (POST /_sandbox/faults). Faults apply only to requests that passed
 * authentication, on both channels alike.
 */
import { MailsendError } from "../core/errors.js";

export interface FaultConfig {
  /** Share (0..1) of requests answered with an error instead of being stored. */
  failRate: number;
  /** The HTTP status of an injected REST failure. */
  failStatus: number;
  /** The SMTP reply code of an injected failure at the end of DATA. */
  failSmtpCode: number;
  /** Milliseconds added before each answer to POST /send and to DATA. */
  latencyMs: number;
  /** Share (0..1) of requests whose connection is cut instead of answered. */
  dropRate: number;
  /**
   * "before": cut before the message is stored (nothing was sent).
   * "after": cut after it was stored (the client cannot know: outcome unknown).
   */
  dropWhen: "before" | "after";
}

export const NO_FAULTS: FaultConfig = {
  failRate: 0,
  failStatus: 500,
  failSmtpCode: 451,
  latencyMs: 0,
  dropRate: 0,
  dropWhen: "before",
};

export type FaultDecision = { kind: "none" } | { kind: "fail" } | { kind: "drop"; when: "before" | "after" };

function bad(message: string): MailsendError {
  return new MailsendError("usage", message);
}

/** Check and merge a partial config (from flags or the control endpoint). */
export function mergeFaults(base: FaultConfig, patch: Record<string, unknown>): FaultConfig {
  const out = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) continue;
    switch (k) {
      case "failRate":
      case "dropRate":
        if (typeof v !== "number" || !(v >= 0 && v <= 1)) throw bad(`${k} must be a number from 0 to 1`);
        out[k] = v;
        break;
      case "failStatus":
        if (typeof v !== "number" || !Number.isInteger(v) || v < 400 || v > 599)
          throw bad("failStatus must be an HTTP status from 400 to 599");
        out.failStatus = v;
        break;
      case "failSmtpCode":
        if (typeof v !== "number" || !Number.isInteger(v) || v < 400 || v > 599)
          throw bad("failSmtpCode must be an SMTP code from 400 to 599");
        out.failSmtpCode = v;
        break;
      case "latencyMs":
        if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 600_000)
          throw bad("latencyMs must be a whole number of milliseconds up to 600000");
        out.latencyMs = v;
        break;
      case "dropWhen":
        if (v !== "before" && v !== "after") throw bad('dropWhen must be "before" or "after"');
        out.dropWhen = v;
        break;
      default:
        throw bad(`unknown fault setting ${JSON.stringify(k)} (known: ${Object.keys(NO_FAULTS).join(", ")})`);
    }
  }
  return out;
}

export class Faults {
  config: FaultConfig;
  readonly #random: () => number;

  constructor(config: Partial<FaultConfig> = {}, random: () => number = Math.random) {
    this.config = mergeFaults(NO_FAULTS, config);
    this.#random = random;
  }

  decide(): FaultDecision {
    const c = this.config;
    if (c.dropRate > 0 && this.#random() < c.dropRate) return { kind: "drop", when: c.dropWhen };
    if (c.failRate > 0 && this.#random() < c.failRate) return { kind: "fail" };
    return { kind: "none" };
  }

  /** The injected latencies under way, each ended at once by hurry(). */
  readonly #waiting = new Set<() => void>();
  #hurried = false;

  delay(): Promise<void> {
    const ms = this.config.latencyMs;
    if (ms <= 0 || this.#hurried) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiting.add(done);
    });
  }

  /**
   * The sandbox is stopping: every answer held back by latency goes now, and no more are held.
   * A message stored and then refused as the server closes (SMTP's 421 after DATA means "not
   * accepted") would be sent again by its client, and stored twice.
   */
  hurry(): void {
    this.#hurried = true;
    for (const done of [...this.#waiting]) done();
  }
}
