/**
 * doctor's look at the outbox: what waits there, since when and why, whether a runner is
 * delivering it, and mail left in the other default state dir. Mail that does not arrive is what
 * sends most people to `mailsend doctor`; this says where it is without sending anything.
 */
import { formatAge } from "../core/size.js";
import { runnerHoldsOutbox } from "../outbox/runner-lock.js";
import { autorunOff } from "../outbox/spawn.js";
import { Outbox, strandedMailNote } from "../outbox/store.js";
import type { Env } from "../core/env.js";

export interface OutboxLook {
  detail: string;
  hint?: string;
}

/** Reads the outbox of `env` (never makes it); a directory that cannot be read throws its local-file error. */
export async function lookAtOutbox(env: Env, now = Date.now()): Promise<OutboxLook> {
  const outbox = Outbox.fromEnv(env);
  const queued = await outbox.ids("queue");
  const failed = await outbox.count("failed");
  const hints: string[] = [];
  const parts: string[] = [];
  if (queued.length === 0) parts.push("nothing queued");
  else {
    // The oldest says how long mail has been held back, and its last attempt why.
    const id = queued[0]!;
    const meta = await outbox.meta(id).catch(() => undefined);
    const state = await outbox.state(id).catch(() => undefined);
    const about = [
      ...(state?.lastError ? [`attempt ${state.attempts}: ${state.lastError.message}`] : []),
      ...(state && state.nextAttemptAt > now ? [`next in ${formatAge(state.nextAttemptAt - now)}`] : []),
    ];
    const oldest = meta
      ? `, the oldest ${formatAge(now - meta.createdAt)} ago${about.length ? ` (${about.join("; ")})` : ""}`
      : "";
    parts.push(`${queued.length} message${queued.length === 1 ? "" : "s"} queued${oldest}`);
    if (!runnerHoldsOutbox(outbox, now)) {
      hints.push(
        `No runner is delivering now: \`mailsend queue run\` delivers what is due (a sendmail that queues starts one${autorunOff(env) ? `; MAILSEND_QUEUE_AUTORUN=${env.MAILSEND_QUEUE_AUTORUN} turns that off here` : ""}).`,
      );
    }
    hints.push(`\`mailsend queue\` lists ${queued.length === 1 ? "it" : "them"}.`);
  }
  if (failed > 0) {
    parts.push(`${failed} failed`);
    hints.push(
      "`mailsend queue --failed` lists the failed ones and why; `mailsend queue retry --all` tries them again.",
    );
  }
  const stranded = strandedMailNote(env);
  if (stranded) hints.push(`${stranded[0]!.toUpperCase()}${stranded.slice(1)}.`);
  return { detail: `${parts.join(", ")}, in ${outbox.dir}`, ...(hints.length ? { hint: hints.join(" ") } : {}) };
}
