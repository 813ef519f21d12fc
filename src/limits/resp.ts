/**
 * Just enough of the Redis protocol (RESP2) for the shared budget: one
 * connection, commands as arrays of bulk strings, replies parsed in order.
 */
import net from "node:net";
import { MailsendError } from "../core/errors.js";

export type Reply = string | number | null | Reply[] | RedisReplyError;

export class RedisReplyError extends Error {}

type Pending = { resolve: (r: Reply) => void; reject: (e: Error) => void };

function encode(args: Array<string | number>): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const s = String(a);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return Buffer.from(parts.join(""));
}

/** Parse one reply at `pos`; undefined when the buffer does not hold it all yet. */
function parse(buf: Buffer, pos: number): { reply: Reply; next: number } | undefined {
  const eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, eol);
  switch (type) {
    case "+":
      return { reply: line, next: eol + 2 };
    case "-":
      return { reply: new RedisReplyError(line), next: eol + 2 };
    case ":":
      return { reply: Number(line), next: eol + 2 };
    case "$": {
      const len = Number(line);
      if (len < 0) return { reply: null, next: eol + 2 };
      if (buf.length < eol + 2 + len + 2) return undefined;
      return { reply: buf.toString("utf8", eol + 2, eol + 2 + len), next: eol + 2 + len + 2 };
    }
    case "*": {
      const n = Number(line);
      if (n < 0) return { reply: null, next: eol + 2 };
      const items: Reply[] = [];
      let at = eol + 2;
      for (let i = 0; i < n; i++) {
        const item = parse(buf, at);
        if (!item) return undefined;
        items.push(item.reply);
        at = item.next;
      }
      return { reply: items, next: at };
    }
    default:
      throw new MailsendError("protocol_error", `unexpected reply from Redis: ${JSON.stringify(buf.toString("utf8", pos, Math.min(buf.length, pos + 40)))}`);
  }
}

export class RespClient {
  readonly #socket: net.Socket;
  readonly #pending: Pending[] = [];
  #buf: Buffer = Buffer.alloc(0);
  #error: Error | undefined;
  readonly #ready: Promise<void>;

  constructor(url: URL, timeoutMs = 5_000) {
    const port = Number(url.port || 6379);
    const host = url.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
    this.#socket = net.connect({ host, port });
    this.#socket.setNoDelay(true);
    this.#socket.setTimeout(timeoutMs, () => this.#fail(new MailsendError("temporary_failure", `Redis at ${host}:${port} did not answer within ${timeoutMs / 1000} s`)));
    this.#ready = new Promise<void>((resolve, reject) => {
      this.#socket.once("connect", () => resolve());
      this.#socket.once("error", reject);
    }).catch((e: Error) => {
      throw new MailsendError("config_invalid", `cannot reach the shared rate-limit Redis at ${host}:${port}: ${e.message}`, {
        cause: e,
        hint: "Check MAILSEND_RATE_LIMIT_URL, or unset it to use the per-machine budget.",
      });
    });
    this.#ready.catch(() => {}); // reported by the first command, not as an unhandled rejection
    this.#socket.on("data", (d: Buffer) => this.#onData(d));
    this.#socket.on("error", (e) => this.#fail(e));
    this.#socket.on("close", () => this.#fail(new Error("Redis connection closed")));
  }

  #fail(e: Error): void {
    this.#error ??= e;
    for (const p of this.#pending.splice(0)) p.reject(e);
    this.#socket.destroy();
  }

  #onData(d: Buffer): void {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
    let pos = 0;
    for (;;) {
      const r = parse(this.#buf, pos);
      if (!r) break;
      pos = r.next;
      const p = this.#pending.shift();
      if (!p) continue;
      if (r.reply instanceof RedisReplyError) p.reject(r.reply);
      else p.resolve(r.reply);
    }
    this.#buf = this.#buf.subarray(pos);
  }

  async command(...args: Array<string | number>): Promise<Reply> {
    await this.#ready;
    if (this.#error) throw this.#error;
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#socket.write(encode(args));
    });
  }

  async close(): Promise<void> {
    if (this.#error) return;
    try {
      await this.command("QUIT");
    } catch {}
    this.#socket.destroy();
  }
}
