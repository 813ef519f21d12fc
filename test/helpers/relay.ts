/**
 * `mailsend relay --listen 127.0.0.1:0 --json` as a child process of a test:
 * the port from its ready line, the JSON event lines it prints after it.
 */
import { execa, type ResultPromise } from "execa";
import { createInterface } from "node:readline";
import { baseEnv, mailsendCommand, ROOT } from "./cli.js";

export interface Ready {
  ready: true;
  pid: number;
  host: string;
  port: number;
  outbox: string;
  auth: boolean;
  tls: string | null;
  ca_file?: string;
  max_size: number;
}

export interface RelayChild {
  ready: Ready;
  child: ResultPromise;
  /** JSON lines printed after the ready line (-v events). */
  events: Array<Record<string, any>>;
  stop(signal?: NodeJS.Signals): Promise<{ exitCode: number | undefined; stderr: string }>;
}

/** `mailsend relay --listen 127.0.0.1:0 --json` as a child process. */
export async function startRelayChild(env: Record<string, string>, args: string[] = []): Promise<RelayChild> {
  const child = execa(...mailsendCommand(["relay", "--listen", "127.0.0.1:0", "--json", ...args]), {
    env: { ...baseEnv(), ...env },
    extendEnv: false,
    cwd: ROOT,
    stdin: "ignore",
    reject: false,
    timeout: 240_000,
    // A stop waits for the deliveries in flight; execa would SIGKILL after 5 s.
    forceKillAfterDelay: 60_000,
  });
  const events: Array<Record<string, any>> = [];
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Ready>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the relay did not print its ready line within 15 s")), 15_000);
    let first = true;
    lines.on("line", (l) => {
      if (!first) {
        try {
          events.push(JSON.parse(l));
        } catch {
          events.push({ line: l });
        }
        return;
      }
      first = false;
      clearTimeout(timer);
      try {
        resolve(JSON.parse(l) as Ready);
      } catch (e) {
        reject(e);
      }
    });
    void child.then((r) => {
      clearTimeout(timer);
      reject(new Error(`the relay exited (${r.exitCode}) before it was ready: ${String(r.stderr)}`));
    });
  });
  return {
    ready,
    child,
    events,
    async stop(signal = "SIGTERM") {
      child.kill(signal);
      const r = await child;
      return { exitCode: r.exitCode, stderr: String(r.stderr ?? "") };
    },
  };
}
