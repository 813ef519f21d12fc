import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";

export const REDIS_SERVER = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find((p) => existsSync(p));

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export interface RedisHandle {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** A throw-away redis-server on 127.0.0.1, no persistence. */
export async function startRedis(): Promise<RedisHandle> {
  if (!REDIS_SERVER) throw new Error("redis-server is not installed (.ci/run installs it)");
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const child: ChildProcess = spawn(REDIS_SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "yes"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const ready = await new Promise<boolean>((resolve) => {
      let out = "";
      const t = setTimeout(() => resolve(false), 5_000);
      child.stdout!.on("data", (d) => {
        out += d;
        if (/Ready to accept connections/i.test(out)) {
          clearTimeout(t);
          resolve(true);
        }
      });
      child.on("exit", () => {
        clearTimeout(t);
        resolve(false);
      });
    });
    if (ready) {
      return {
        port,
        url: `redis://127.0.0.1:${port}`,
        stop: () =>
          new Promise<void>((r) => {
            if (child.exitCode !== null) return r();
            child.once("exit", () => r());
            child.kill("SIGTERM");
          }),
      };
    }
    child.kill("SIGKILL");
  }
  throw new Error("redis-server did not start");
}
