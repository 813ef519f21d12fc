import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { redisServer } from "./tools.js";

/** The redis-server program (tests needing it check lacks(redisServer) first). */
export const REDIS_SERVER = redisServer.path;

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export interface RedisHandle {
  /** redis:// (or rediss:// with TLS) on 127.0.0.1, without credentials. */
  url: string;
  port: number;
  pid: number;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
  /** The same server again on the same port (after stop), empty. */
  restart(): Promise<void>;
}

export interface RedisServerOptions {
  /** requirepass: the default user's password. */
  password?: string;
  /** ACL users, each as the words of a `user` line: ["budget", "on", ">secret", "~mailsend:*", "+@all"]. */
  users?: string[][];
  /** Serve TLS only (the plain port closed), with this certificate. */
  tls?: { certPath: string; keyPath: string; caPath: string };
  /** Start as a replica of this port (for Sentinel tests). */
  replicaOf?: number;
  /** More config words, e.g. ["--timeout", "1"] (idle clients closed after 1 s). */
  args?: string[];
  port?: number;
}

function spawnUntil(args: string[], ready: RegExp, cwd?: string): Promise<ChildProcess | undefined> {
  const child = spawn(REDIS_SERVER!, args, { stdio: ["ignore", "pipe", "pipe"], ...(cwd ? { cwd } : {}) });
  return new Promise((resolve) => {
    let out = "";
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      resolve(undefined);
    }, 10_000);
    const onData = (d: Buffer) => {
      out += d;
      if (ready.test(out)) {
        clearTimeout(t);
        child.stdout!.off("data", onData);
        child.stdout!.resume();
        resolve(child);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.resume();
    child.on("exit", () => {
      clearTimeout(t);
      resolve(undefined);
    });
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise<void>((r) => {
    if (child.exitCode !== null || child.signalCode !== null) return r();
    child.once("exit", () => r());
    child.kill("SIGTERM");
  });
}

/** A throw-away redis-server on 127.0.0.1, no persistence. */
export async function startRedis(opts: RedisServerOptions = {}): Promise<RedisHandle> {
  if (!REDIS_SERVER)
    throw new Error("redis-server is not installed (apt-get install redis-server; .ci/tools installs it)");
  const configArgs = (port: number) => {
    const a = [
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--protected-mode",
      "no",
      "--loglevel",
      "notice",
    ];
    if (opts.tls) {
      a.push(
        "--port",
        "0",
        "--tls-port",
        String(port),
        "--tls-cert-file",
        opts.tls.certPath,
        "--tls-key-file",
        opts.tls.keyPath,
        "--tls-ca-cert-file",
        opts.tls.caPath,
        "--tls-auth-clients",
        "no",
      );
    } else a.push("--port", String(port));
    if (opts.password) a.push("--requirepass", opts.password);
    for (const u of opts.users ?? []) a.push("--user", ...u);
    if (opts.replicaOf) a.push("--replicaof", "127.0.0.1", String(opts.replicaOf));
    a.push(...(opts.args ?? []));
    return a;
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = opts.port ?? (await freePort());
    let child = await spawnUntil(configArgs(port), /Ready to accept connections/i);
    if (!child) continue;
    const handle: RedisHandle = {
      port,
      pid: child.pid!,
      url: `${opts.tls ? "rediss" : "redis"}://127.0.0.1:${port}`,
      stop: () => stopChild(child!),
      restart: async () => {
        await stopChild(child!);
        for (let i = 0; i < 20; i++) {
          const again = await spawnUntil(configArgs(port), /Ready to accept connections/i);
          if (again) {
            child = again;
            handle.pid = again.pid!;
            return;
          }
          await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error(`redis-server did not start again on port ${port}`);
      },
    };
    return handle;
  }
  throw new Error("redis-server did not start");
}

export interface SentinelHandle {
  port: number;
  stop(): Promise<void>;
}

/**
 * `redis-server --sentinel` watching the master on 127.0.0.1:masterPort as
 * `name`, on a free port, with its own config file (sentinel rewrites it).
 */
export async function startSentinel(
  masterPort: number,
  name: string,
  opts: { masterPassword?: string; password?: string } = {},
): Promise<SentinelHandle> {
  if (!REDIS_SERVER)
    throw new Error("redis-server is not installed (apt-get install redis-server; .ci/tools installs it)");
  for (let attempt = 0; attempt < 5; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), "mailsend-sentinel-"));
    const port = await freePort();
    const conf = join(dir, "sentinel.conf");
    const lines = [
      `port ${port}`,
      "bind 127.0.0.1",
      "protected-mode no",
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 2000`,
      ...(opts.masterPassword ? [`sentinel auth-pass ${name} ${opts.masterPassword}`] : []),
      ...(opts.password ? [`requirepass ${opts.password}`] : []),
    ];
    writeFileSync(conf, `${lines.join("\n")}\n`);
    const child = await spawnUntil([conf, "--sentinel"], /\+monitor master/, dir);
    if (!child) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    return {
      port,
      stop: async () => {
        await stopChild(child);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  throw new Error("redis-server --sentinel did not start");
}
