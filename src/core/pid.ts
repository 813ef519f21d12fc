/** Whether a process with this pid exists (EPERM: it does, but is not ours). For stale-lock recovery. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
