/**
 * The sliding log in Redis (or Valkey), for budgets shared by many machines:
 * a sorted set of send ids scored by time. Each operation is one Lua script,
 * so it is atomic, and the time is the server's own clock, so machines whose
 * clocks disagree still share one window.
 *
 * The client is ioredis, loaded (a dynamic import) on the first operation,
 * so a send without MAILSEND_RATE_LIMIT_URL never pays for it. It is set up
 * to fail rather than wait: no reconnect loop, no queue of commands while
 * disconnected, a time limit on the connection and on each command. A
 * connection that went away while a send waited for its slot (an idle
 * timeout of the server, a restart), or that a failover left on a replica,
 * is made again once; if that fails the operation fails closed (75) and
 * nothing is sent outside the budget.
 */
import type { Redis, RedisOptions } from "ioredis";
import type { ConnectionOptions } from "node:tls";
import { trustedCas } from "../net/ca.js";
import type { RedisConfig } from "./redis-config.js";
import { diagnoseConnect, isConnectionLoss, isReadOnly, redisError, type RedisOp } from "./redis-errors.js";
import { reserveOf, type Limits, type SlotClass } from "./sliding-log.js";
import type { SlotStore, TakeOutcome } from "./store.js";

const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS[1] log (zset), KEYS[2] blocked-until (string); ARGV limit, window, id, and the reserve
// this class may not take (0 for urgent; see sliding-log.ts's roomFor), so bulk takes a slot
// only while the window has room beyond it and the sum never exceeds the limit.
// An id already in the log holds its slot: a take repeated after a lost reply
// (the connection broke after Redis ran the script) does not take a second one.
const TAKE = `${NOW}
local window = tonumber(ARGV[2])
local room = tonumber(ARGV[1]) - tonumber(ARGV[4] or '0')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return {1, 0} end
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > now then return {0, blocked - now} end
local n = redis.call('ZCARD', KEYS[1])
if n < room then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window * 2)
  return {1, 0}
end
local freeing = redis.call('ZRANGE', KEYS[1], n - room, n - room, 'WITHSCORES')
return {0, math.max(1, tonumber(freeing[2]) + window - now + 1)}`;

// ARGV id, ms since the answer came (read just before the call, so now - ago is not before it).
// GT keeps the later of the two times; XX never re-adds a released slot.
const COMPLETE = `${NOW}
local at = now - math.floor(tonumber(ARGV[2] or '0'))
redis.call('ZADD', KEYS[1], 'XX', 'GT', at, ARGV[1]) return 1`;

const BLOCK = `${NOW}
local until_ = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if until_ > cur then redis.call('SET', KEYS[2], until_, 'PX', tonumber(ARGV[1]) + 1000) end
return 1`;

const USED = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
return redis.call('ZCARD', KEYS[1])`;

export interface RedisStoreOptions {
  /** Longest wait for a connection (TCP, TLS and AUTH) and for each command's answer. */
  timeoutMs?: number;
  /** --verbose: a line when the store connects (again). */
  trace?: (line: string) => void;
}

/** What `mailsend doctor` shows about the store. */
export interface RedisProbe {
  /** Milliseconds to connect, TLS and AUTH included (the sentinels' answer too). */
  connectMs: number;
  /** Milliseconds of a PING's round trip on the open connection. */
  rttMs: number;
  /** The TLS version in use, undefined for plain TCP. */
  tlsProtocol?: string;
  /** The master the sentinels named, host:port (Sentinel only). */
  master?: string;
  /** "redis 7.0.15" or "valkey 8.0.1", when INFO may be read. */
  server?: string;
}

/** Milliseconds since a process.hrtime.bigint() reading (the global `performance` would load perf_hooks in every send). */
function msSince(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

type Socket = { getProtocol?: () => string | null; remoteAddress?: string; remotePort?: number };

/** ioredis's socket (a TLSSocket for rediss://): not in its public types. */
function streamOf(client: Redis): Socket | undefined {
  return (client as unknown as { stream?: Socket }).stream;
}

export class RedisSlotStore implements SlotStore {
  readonly config: RedisConfig;
  readonly #log: string;
  readonly #blocked: string;
  readonly #timeoutMs: number;
  readonly #trace: ((line: string) => void) | undefined;
  #pending: Promise<Redis> | undefined;
  #connected = false;
  #connectMs = 0;
  #closed = false;
  /** A password was given, and the server said it requires none (doctor says so). */
  passwordUnneeded = false;
  /** The last error the client reported as an event: the cause behind a command's bare "Connection is closed." */
  #lastError: unknown;

  constructor(config: RedisConfig, keyHash: string, opts: RedisStoreOptions = {}) {
    this.config = config;
    this.#log = `mailsend:ratelimit:${keyHash}`;
    this.#blocked = `${this.#log}:blocked`;
    this.#timeoutMs = opts.timeoutMs ?? 5_000;
    this.#trace = opts.trace;
  }

  #options(): RedisOptions {
    const c = this.config;
    const tls: ConnectionOptions | undefined = c.tls ? (c.caFile ? { ca: trustedCas(c.caFile) } : {}) : undefined;
    const common: RedisOptions = {
      lazyConnect: true,
      // Fail, never wait in a queue or a reconnect loop: the store makes a lost connection again itself.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      reconnectOnError: () => false,
      autoResendUnfulfilledCommands: false,
      enableReadyCheck: false,
      disableClientInfo: true,
      protocol: 2,
      connectTimeout: this.#timeoutMs,
      // How long disconnect() lets a socket that already failed linger before destroying it:
      // that timer would hold a finished CLI process open.
      disconnectTimeout: 100,
      commandTimeout: this.#timeoutMs,
      ...(tls ? { tls } : {}),
    };
    if (c.kind === "standalone") return { ...common, host: c.nodes[0]!.host, port: c.nodes[0]!.port };
    return {
      ...common,
      sentinels: c.nodes,
      name: c.masterName!,
      sentinelRetryStrategy: () => null,
      sentinelCommandTimeout: this.#timeoutMs,
      ...(c.sentinelPassword ? { sentinelPassword: c.sentinelPassword } : {}),
      ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
    };
  }

  async #connect(op: RedisOp): Promise<Redis> {
    const phase = this.#connected ? "later" : "connect";
    let client: Redis | undefined;
    let reported: unknown;
    try {
      // A CommonJS module: `default` is module.exports, which is the client class and also
      // carries it as `.default` (the one TypeScript knows), bundled or not.
      const Redis = (await loadIoredis()).default.default;
      client = new Redis(this.#options());
      // connect() rejects with a bare "Connection is closed."; the cause comes as an event
      // (without a listener ioredis would print it).
      client.on("error", (e: unknown) => {
        reported = e;
        this.#lastError = e;
      });
      const t0 = process.hrtime.bigint();
      await client.connect();
      await this.#login(client);
      this.#connectMs = msSince(t0);
      if (this.#trace) {
        const stream = streamOf(client);
        const how = stream?.getProtocol?.() ? `${stream.getProtocol!()}, certificate verified` : "plain TCP";
        const master =
          this.config.kind === "sentinel" && stream?.remoteAddress
            ? `, master ${this.config.masterName} at ${stream.remoteAddress}:${stream.remotePort}`
            : "";
        this.#trace(
          `* budget: ${this.#connected ? "connected again to" : "shared through"} Redis ${this.config.label} (${how}${master}) in ${Math.round(this.#connectMs)} ms`,
        );
        if (this.passwordUnneeded)
          this.#trace("* budget: the Redis server requires no password, but one was given; it was not used");
      }
      this.#connected = true;
      return client;
    } catch (e) {
      client?.disconnect();
      const cause = reported ?? e;
      throw phase === "connect"
        ? await diagnoseConnect(cause, this.config, op, this.#timeoutMs)
        : redisError(cause, this.config, phase, op);
    }
  }

  /**
   * AUTH and SELECT, sent together by us rather than by ioredis's handshake,
   * which turns a refused AUTH into a bare "Connection is closed." and prints
   * warnings of its own on stderr.
   */
  async #login(client: Redis): Promise<void> {
    const { username, password, db } = this.config;
    const auth = password
      ? (username ? client.auth(username, password) : client.auth(password)).catch((e: unknown) => {
          // What redis-cli and ioredis let pass with a warning: a password the server does not ask for.
          if (!/called without any password configured|no password is set/i.test((e as Error)?.message ?? "")) throw e;
          this.passwordUnneeded = true;
          return "OK";
        })
      : undefined;
    const select = db ? client.select(db) : undefined;
    await Promise.all([auth, select]);
  }

  #open(op: RedisOp): Promise<Redis> {
    this.#pending ??= this.#connect(op).catch((e: unknown) => {
      this.#pending = undefined;
      throw e;
    });
    return this.#pending;
  }

  /** Run `fn` on the connection; a connection that was lost is made again once. */
  async #run<T>(op: RedisOp, fn: (client: Redis) => Promise<T>): Promise<T> {
    if (this.#closed) throw redisError(new Error("Connection is closed."), this.config, "later", op);
    for (let attempt = 1; ; attempt++) {
      const pending = this.#open(op);
      const client = await pending;
      this.#lastError = undefined;
      try {
        return await fn(client);
      } catch (e) {
        // READONLY on a connection that was writing: a failover made this server a replica and its
        // address (a managed service's DNS name, or the sentinels) now names the new primary, which
        // only a new connection reaches. A replica runs no write, so the step is safe to repeat.
        if (attempt === 1 && (isConnectionLoss(e) || isReadOnly(e))) {
          client.disconnect();
          if (this.#pending === pending) this.#pending = undefined;
          continue;
        }
        throw redisError(
          /Connection is closed/.test((e as Error)?.message) && this.#lastError ? this.#lastError : e,
          this.config,
          "later",
          op,
        );
      }
    }
  }

  #eval(op: RedisOp, script: string, ...args: Array<string | number>): Promise<unknown> {
    return this.#run(op, (c) => c.eval(script, 2, this.#log, this.#blocked, ...args));
  }

  /**
   * A script on other keys of the same Redis (mailsend run's job states, under mailsend:): the same
   * connection, timeouts and error words as the budget's own.
   */
  evalKeys(
    op: RedisOp,
    script: string,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<unknown> {
    return this.#run(op, (c) => c.eval(script, keys.length, ...keys, ...args));
  }

  async tryTake(id: string, limits: Limits, cls: SlotClass = "urgent"): Promise<TakeOutcome> {
    const heldBack = cls === "bulk" ? reserveOf(limits) : 0;
    const r = (await this.#eval("take", TAKE, limits.limit, limits.windowMs, id, heldBack)) as [number, number];
    return r[0] === 1 ? { ok: true } : { ok: false, waitMs: Number(r[1]) };
  }

  async complete(id: string, _limits?: Limits, elapsedMs?: () => number): Promise<void> {
    // Redis's clock, not ours: the answer's time is sent as how long ago it was.
    await this.#run("record", (c) =>
      c.eval(COMPLETE, 2, this.#log, this.#blocked, id, Math.max(0, Math.floor(elapsedMs?.() ?? 0))),
    );
  }

  async release(id: string, _limits?: Limits): Promise<void> {
    await this.#run("record", (c) => c.zrem(this.#log, id));
  }

  async block(waitMs: number, _limits?: Limits): Promise<void> {
    await this.#eval("record", BLOCK, Math.ceil(waitMs));
  }

  async used(limits: Limits): Promise<number> {
    return Number(await this.#eval("check", USED, limits.windowMs));
  }

  /** Connect (if not yet) and measure, for `mailsend doctor`. */
  async probe(): Promise<RedisProbe> {
    return this.#run("check", async (c) => {
      const t0 = process.hrtime.bigint();
      await c.ping();
      const rttMs = msSince(t0);
      const stream = streamOf(c);
      const tlsProtocol = stream?.getProtocol?.() ?? undefined;
      const master =
        this.config.kind === "sentinel" && stream?.remoteAddress
          ? `${stream.remoteAddress}:${stream.remotePort}`
          : undefined;
      // INFO may be refused to a restricted ACL user: the version is a nicety.
      const info = await c.info("server").catch(() => "");
      const name = /^server_name:(\S+)/m.exec(info)?.[1] ?? (/^valkey_version:/m.test(info) ? "valkey" : "redis");
      const version = /^(?:valkey|redis)_version:(\S+)/m.exec(info)?.[1];
      return {
        connectMs: this.#connectMs,
        rttMs,
        ...(tlsProtocol ? { tlsProtocol } : {}),
        ...(master ? { master } : {}),
        ...(version ? { server: `${name} ${version}` } : {}),
      };
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const pending = this.#pending;
    this.#pending = undefined;
    const client = await pending?.catch(() => undefined);
    client?.disconnect();
  }
}

/**
 * ioredis logs each command through the `debug` package when DEBUG names it (DEBUG=*), AUTH's
 * password included: its namespaces are switched off with debug's own API, any others kept.
 */
async function quietIoredisDebug(): Promise<void> {
  const { default: debug } = await import("debug");
  debug.enable(`${debug.disable()},-ioredis:*`);
}

/** The Redis client (ioredis) and the switch that keeps its debug log quiet, loaded together. */
export async function loadIoredis() {
  const [ioredis] = await Promise.all([import("ioredis"), quietIoredisDebug()]);
  return ioredis;
}
