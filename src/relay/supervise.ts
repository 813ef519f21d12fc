/**
 * The outbox's runner in watch mode, for as long as the relay runs. Only one
 * runner holds an outbox: while another one does (a `queue run --watch`
 * service), the relay only queues and tries again to take over every few
 * seconds, so mail never waits for a runner that has gone.
 */
import type { Env } from "../core/env.js";
import { QueueRunner, type RunnerEvent } from "../outbox/runner.js";

/** How often the relay tries again to take over an outbox another runner holds. */
const TAKE_OVER_EVERY_MS = 3000;

export interface SuperviseOptions {
  env: Env;
  concurrency?: number;
  onEvent(ev: RunnerEvent): void;
  /** Said once: another runner delivers from this outbox, so the relay only queues for now. */
  onBusy(outboxDir: string): void;
}

export interface RunnerSupervisor {
  /** Settles when the supervision ends: after stop(), or with the runner's error. */
  done: Promise<void>;
  /** A message was queued: the runner delivering now takes it at once. */
  wake(): void;
  stop(): void;
}

export function superviseRunner(opts: SuperviseOptions): RunnerSupervisor {
  let current: QueueRunner | undefined;
  let stopping = false;
  let wakeSleep: (() => void) | undefined;
  const done = (async () => {
    let told = false;
    while (!stopping) {
      const r = new QueueRunner({
        env: opts.env,
        mode: "watch",
        onEvent: opts.onEvent,
        ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
      });
      current = r;
      const summary = await r.run();
      current = undefined;
      if (stopping) break;
      if (!summary.ran && !told) {
        told = true;
        opts.onBusy(r.outbox.dir);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, TAKE_OVER_EVERY_MS);
        wakeSleep = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wakeSleep = undefined;
    }
  })();
  return {
    done,
    wake: () => current?.wake(),
    stop: () => {
      stopping = true;
      current?.stop();
      wakeSleep?.();
    },
  };
}
