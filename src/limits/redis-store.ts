/**
 * The sliding log in Redis, for budgets shared by many machines: a sorted
 * set of send ids scored by time. Each operation is one Lua script, so it is
 * atomic, and the time is Redis's own clock, so machines whose clocks
 * disagree still share one window.
 */
import { MailsendError } from "../core/errors.js";
import { RespClient } from "./resp.js";
import type { Limits } from "./sliding-log.js";
import type { SlotStore, TakeOutcome } from "./store.js";

const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// KEYS[1] log (zset), KEYS[2] blocked-until (string); ARGV limit, window, id
const TAKE = `${NOW}
local limit = tonumber(ARGV[1]) local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > now then return {0, blocked - now} end
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window * 2)
  return {1, 0}
end
local freeing = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
return {0, math.max(1, tonumber(freeing[2]) + window - now + 1)}`;

const COMPLETE = `${NOW}
redis.call('ZADD', KEYS[1], 'XX', 'GT', now, ARGV[1]) return 1`;

const BLOCK = `${NOW}
local until_ = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if until_ > cur then redis.call('SET', KEYS[2], until_, 'PX', tonumber(ARGV[1]) + 1000) end
return 1`;

const USED = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
return redis.call('ZCARD', KEYS[1])`;

export class RedisSlotStore implements SlotStore {
  readonly #client: RespClient;
  readonly #log: string;
  readonly #blocked: string;

  constructor(url: string, keyHash: string) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new MailsendError("config_invalid", `MAILSEND_RATE_LIMIT_URL is not a URL: ${url}`, { hint: "Expected redis://host:port" });
    }
    if (parsed.protocol !== "redis:") {
      throw new MailsendError("config_invalid", `MAILSEND_RATE_LIMIT_URL must start with redis://, not ${parsed.protocol}`);
    }
    this.#client = new RespClient(parsed);
    this.#log = `mailsend:ratelimit:${keyHash}`;
    this.#blocked = `${this.#log}:blocked`;
    const db = parsed.pathname.replace(/^\//, "");
    const password = decodeURIComponent(parsed.password);
    if (password) void this.#client.command("AUTH", ...(parsed.username ? [decodeURIComponent(parsed.username)] : []), password).catch(() => {});
    if (db) void this.#client.command("SELECT", db).catch(() => {});
  }

  async #eval(script: string, ...args: Array<string | number>): Promise<unknown> {
    return this.#client.command("EVAL", script, 2, this.#log, this.#blocked, ...args);
  }

  async tryTake(id: string, limits: Limits): Promise<TakeOutcome> {
    const r = (await this.#eval(TAKE, limits.limit, limits.windowMs, id)) as [number, number];
    return r[0] === 1 ? { ok: true } : { ok: false, waitMs: Number(r[1]) };
  }

  async complete(id: string, _limits?: Limits): Promise<void> {
    await this.#eval(COMPLETE, id);
  }

  async release(id: string, _limits?: Limits): Promise<void> {
    await this.#client.command("ZREM", this.#log, id);
  }

  async block(waitMs: number, _limits?: Limits): Promise<void> {
    await this.#eval(BLOCK, Math.ceil(waitMs));
  }

  async used(limits: Limits): Promise<number> {
    return Number(await this.#eval(USED, limits.windowMs));
  }

  close(): Promise<void> {
    return this.#client.close();
  }
}
