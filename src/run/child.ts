/**
 * The job as a child process in a process group of its own, so that a timeout or a signal to
 * `mailsend run` reaches everything it started (a shell script's children too), and nothing is
 * left behind when it is stopped. Its stdout and stderr pass through as they come and go to
 * `onOutput` as well.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import type { Readable } from "node:stream";

type Writable = NodeJS.WritableStream & { destroyed?: boolean; writableEnded?: boolean };

export interface ChildOptions {
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  stdout: Writable;
  stderr: Writable;
  onOutput: (chunk: Buffer) => void;
  /** Stop the job (SIGTERM to its group) after this long; 0: never. */
  timeoutMs: number;
  /** Then SIGKILL after this long. */
  graceMs: number;
}

export interface ChildOutcome {
  /** The exit status as a shell gives it: the code, 128 + n for a signal, 127/126 when it could not start. */
  status: number;
  code?: number;
  signal?: NodeJS.Signals;
  /** Stopped by --timeout (and whether SIGKILL was needed). */
  timedOut: boolean;
  killed: boolean;
  /** Why it could not be started (ENOENT, EACCES), in words. */
  startError?: string;
  /** The signal sent to `mailsend run` that it passed on to the job. */
  forwarded?: NodeJS.Signals;
  startedAt: number;
  endedAt: number;
}

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const;

/** How long the job's output pipes may stay open after it exited (a child it left in the background holds them). */
const DRAIN_MS = 2_000;

export function signalStatus(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** Runs the job to its end; never rejects. */
export function runChild(o: ChildOptions): Promise<ChildOutcome> {
  const startedAt = Date.now();
  return new Promise((resolve) => {
    const state: { timedOut: boolean; killed: boolean; forwarded?: NodeJS.Signals } = {
      timedOut: false,
      killed: false,
    };
    let pid: number | undefined;
    const group = (sig: NodeJS.Signals) => killGroup(pid, sig);
    const onSignal = (sig: NodeJS.Signals) => {
      state.forwarded ??= sig;
      group(sig);
    };
    // Taken before the job starts: a signal that comes as it starts is passed on, not the end of run.
    for (const s of FORWARDED) process.on(s, onSignal);
    const child = spawn(o.command, [...o.args], { env: o.env, stdio: ["inherit", "pipe", "pipe"], detached: true });
    pid = child.pid;
    if (state.forwarded) group(state.forwarded);
    const timers = stopAfter(o, state, group);
    const streams = [pass(child.stdout, o.stdout, o.onOutput), pass(child.stderr, o.stderr, o.onOutput)];
    let settled = false;
    const finish = (outcome: Omit<ChildOutcome, "startedAt" | "endedAt" | "timedOut" | "killed">) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      for (const s of FORWARDED) process.off(s, onSignal);
      // A job stopped by us or by a signal leaves nothing running in its group.
      if (state.timedOut || state.forwarded) group("SIGKILL");
      const { forwarded } = state;
      resolve({
        ...outcome,
        timedOut: state.timedOut,
        killed: state.killed,
        ...(forwarded ? { forwarded } : {}),
        startedAt,
        endedAt: Date.now(),
      });
    };
    child.once("error", (e: NodeJS.ErrnoException) => {
      finish({
        status: e.code === "ENOENT" ? 127 : 126,
        startError: `${o.command}: ${e.code === "ENOENT" ? "command not found" : e.message}`,
      });
    });
    child.once("exit", (code, signal) => {
      // The output still in the pipes is read first, within a bound: a child left in the background may hold them open.
      const drained = Promise.all(streams.map((p) => p.done));
      const late = setTimeout(() => {
        for (const p of streams) p.stop();
      }, DRAIN_MS);
      void drained.then(() => {
        clearTimeout(late);
        finish(signal ? { status: signalStatus(signal), signal } : { status: code ?? 0, code: code ?? 0 });
      });
    });
  });
}

/** --timeout: SIGTERM to the group, then SIGKILL after the grace period. */
function stopAfter(
  o: ChildOptions,
  state: { timedOut: boolean; killed: boolean },
  group: (sig: NodeJS.Signals) => void,
): NodeJS.Timeout[] {
  if (o.timeoutMs <= 0) return [];
  const timers: NodeJS.Timeout[] = [];
  timers.push(
    setTimeout(() => {
      state.timedOut = true;
      group("SIGTERM");
      timers.push(
        setTimeout(() => {
          state.killed = true;
          group("SIGKILL");
        }, o.graceMs),
      );
    }, o.timeoutMs),
  );
  return timers;
}

function killGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // The group is gone already.
  }
}

/**
 * One of the job's streams to ours, as it comes, and to the keeper. When ours is slow (a pipe
 * to a slow reader) the job's is paused: its output waits in the job, not in this process.
 */
function pass(
  from: Readable | null,
  to: Writable,
  keep: (chunk: Buffer) => void,
): { done: Promise<void>; stop: () => void } {
  if (!from) return { done: Promise.resolve(), stop: () => {} };
  const done = new Promise<void>((resolve) => {
    from.once("close", () => resolve());
    from.once("error", () => resolve());
  });
  from.on("data", (chunk: Buffer) => {
    keep(chunk);
    if (to.destroyed || to.writableEnded) return;
    if (!to.write(chunk)) {
      from.pause();
      to.once("drain", () => from.resume());
    }
  });
  // Our output gone (a closed pipe): the job goes on, and its output is only kept.
  to.on("error", () => from.resume());
  return { done, stop: () => from.destroy() };
}
