/** Whether a process with this pid exists (EPERM: it does, but is not ours). For stale-lock recovery. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Linux: a process's state and start time (fields 3 and 22 of /proc/PID/stat; the start time is
 * in clock ticks since boot). Undefined without /proc, or when it hides the process.
 */
function procStat(pid: number): { state: string; start: string } | undefined {
  if (process.platform !== "linux") return undefined;
  let stat: string;
  try {
    stat = process.getBuiltinModule("node:fs").readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // "<pid> (<comm>) <state> <ppid> ...": comm may hold spaces and parentheses; the rest follows the last ')'.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const start = rest[19];
  return rest[0] && start && /^\d+$/.test(start) ? { state: rest[0], start } : undefined;
}

/**
 * What tells this process (or `pid`) from a later one given the same pid: its start time on Linux,
 * undefined elsewhere. A lock records it beside the pid (see processHolds).
 */
export function processStartTime(pid = process.pid): string | undefined {
  return procStat(pid)?.start;
}

/**
 * Whether the process that wrote a lock (its pid, and the start time it recorded, if any) still
 * runs. A pid alone is not enough where pids are soon reused (a container, a reboot with the state
 * dir kept): on Linux a live pid is another process when its start time differs from the recorded
 * one, or, for a holder that recorded none (runner.pid, an older version's lock), when it is
 * neither this program (the same executable file: the single executable, under whatever name it
 * was called) nor a Node process (`looksLike` its command line); a zombie is dead. Without /proc,
 * a live pid holds.
 */
export function processHolds(pid: number, start: string | undefined, looksLike = /node|mailsend/i): boolean {
  if (!processAlive(pid)) return false;
  const now = procStat(pid);
  if (!now) return true;
  if (now.state === "Z" || now.state === "X" || now.state === "x") return false;
  if (start !== undefined) return now.start === start;
  if (sameExecutable(pid)) return true;
  let cmdline: string;
  try {
    const fs = process.getBuiltinModule("node:fs");
    cmdline = `${fs.readFileSync(`/proc/${pid}/comm`, "latin1")}\0${fs.readFileSync(`/proc/${pid}/cmdline`, "latin1")}`;
  } catch {
    return true;
  }
  return looksLike.test(cmdline);
}

/** Whether `pid` runs the executable file this process runs (false when /proc does not say). */
function sameExecutable(pid: number): boolean {
  try {
    const { statSync } = process.getBuiltinModule("node:fs");
    const theirs = statSync(`/proc/${pid}/exe`);
    const ours = statSync("/proc/self/exe");
    return theirs.dev === ours.dev && theirs.ino === ours.ino;
  } catch {
    return false;
  }
}
