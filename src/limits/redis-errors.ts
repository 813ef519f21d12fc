/**
 * What went wrong with the budget's Redis, as a MailsendError with its sysexits
 * code and a hint. Messages name the server by host
 * and port (never by its URL, never with the password) and say that
 * MAILSEND_RATE_LIMIT_URL chose it.
 */
import { MailsendError, toMailsendError } from "../core/errors.js";
import { connect as netConnect } from "node:net";
import { looksLikeTlsToPlaintext, probe, speaksTls, UNREACHABLE, UNTRUSTED, untrustedHint } from "../net/errors.js";
import { PASSWORD_FILE_VARIABLE, URL_VARIABLE, type RedisConfig } from "./redis-config.js";

/** What the store was doing: the first connection, or any later step (the server was there before). */
export type RedisPhase = "connect" | "later";

/** The budget operation that failed: a failed "take" means nothing was sent. */
export type RedisOp = "take" | "record" | "check";

/** The ACL a Redis user needs for the budget (the commands its scripts call included). */
export const REDIS_ACL = "~mailsend:* +select +eval +evalsha +zrem +ping +time +get +set +zadd +zcard +zrange +zscore +zremrangebyscore +pexpire";

export function where(config: RedisConfig): string {
  const hostPort = (n: { host: string; port: number }) => `${n.host.includes(":") ? `[${n.host}]` : n.host}:${n.port}`;
  if (config.kind === "sentinel") return `master "${config.masterName}" of the sentinels at ${config.nodes.map(hostPort).join(", ")}`;
  return hostPort(config.nodes[0]!);
}

function codeOf(e: unknown): string {
  const c = (e as { code?: unknown })?.code;
  return typeof c === "string" ? c : "";
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A connection that went away or never came: the only kind of failure worth one reconnect. */
export function isConnectionLoss(e: unknown): boolean {
  const code = codeOf(e);
  if (UNREACHABLE.has(code) || code === "ECONNRESET" || code === "EPIPE" || code === "ETIMEDOUT") return true;
  return /Connection is closed|Stream isn't writeable|connection (?:is )?(?:closed|lost)|socket (?:hang up|closed)/i.test(messageOf(e));
}

/**
 * The error code of a reply ("READONLY", "WRONGPASS"). For a redis.call that failed in a script,
 * Redis 6 (and Dragonfly) answer "ERR Error running script (call to f_...): @user_script:4:
 * @user_script: 4: -READONLY You can't write against a read only replica.": the inner code is
 * the one that says what happened (Redis 7 answers "READONLY ... script: ..." itself).
 */
function replyCodeOf(msg: string): string {
  const inner = /^ERR Error running script\b[^\n]*?: -([A-Z]+)\b/.exec(msg);
  return inner ? inner[1]! : (msg.split(/\s/)[0] ?? "");
}

/** The server became a replica (a failover): a new connection may reach the primary. */
export function isReadOnly(e: unknown): boolean {
  return replyCodeOf(messageOf(e)) === "READONLY";
}

export function redisError(e: unknown, config: RedisConfig, phase: RedisPhase, op: RedisOp): MailsendError {
  if (e instanceof MailsendError) return e;
  const at = `the shared-budget Redis at ${where(config)}`;
  const chosen = `${URL_VARIABLE} (${config.label}) chose this Redis`;
  const nothingSent = op === "take" ? " Nothing was sent." : "";
  const code = codeOf(e);
  const msg = messageOf(e);
  const reply = replyCodeOf(msg);

  // Refusals of the credentials: 77, like a refused key.
  if (reply === "WRONGPASS" || /invalid (?:username-)?password/i.test(msg)) {
    return new MailsendError("auth_failed", `${at} refused ${config.username ? `the user "${config.username}" or its password` : "the password"} (authentication failed)`, {
      cause: e,
      local: true,
      hint: `Check the password (in ${config.passwordSource === "the URL" ? "the URL's user:password@" : config.passwordSource ? PASSWORD_FILE_VARIABLE : `${PASSWORD_FILE_VARIABLE} or the URL`})${config.username ? " and the ACL user name" : ""}. ${chosen}.${nothingSent}`,
    });
  }
  if (reply === "NOAUTH") {
    return new MailsendError("auth_failed", `${at} requires a password and none was given (authentication failed)`, {
      cause: e,
      local: true,
      hint: `Put the password in a file named by ${PASSWORD_FILE_VARIABLE}, or in the URL as redis://[user]:password@host. ${chosen}.${nothingSent}`,
    });
  }
  if (/wrong number of arguments for 'auth'/i.test(msg)) {
    return new MailsendError("auth_failed", `${at} takes no user name with the password (Redis 5 or older has no ACL users; authentication failed)`, {
      cause: e,
      local: true,
      hint: `Give only the password, with no user name before the ":" of the URL's user:password@. ${chosen}.${nothingSent}`,
    });
  }
  if (reply === "NOPERM") {
    return new MailsendError("auth_failed", `${at}: the user ${config.username ? `"${config.username}" ` : ""}may not run the budget's commands (${msg})`, {
      cause: e,
      local: true,
      hint: `Grant the ACL user what the budget needs, e.g. ACL SETUSER ${config.username ?? "default"} ${REDIS_ACL}. ${chosen}.${nothingSent}`,
    });
  }

  // TLS: 78, like a service's untrusted certificate or a port/TLS mismatch.
  if (UNTRUSTED.has(code)) {
    return new MailsendError("tls_untrusted", `the TLS certificate of ${at} is not trusted (${code})`, {
      cause: e,
      hint: `${untrustedHint(e, "If the server's certificate comes from a private CA, set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file, or pass --ca-file <pem>.", URL_VARIABLE)} ${chosen}.${nothingSent}`,
    });
  }
  if (config.tls && (looksLikeTlsToPlaintext(e) || /ssl|tls|handshake|certificate/i.test(`${code} ${msg}`))) {
    return new MailsendError("tls_mismatch", `TLS with ${at} failed: ${msg}`, {
      cause: e,
      hint: `rediss:// speaks TLS from the first byte; if this port is plain Redis, use redis://. ${chosen}.${nothingSent}`,
    });
  }
  if (/Protocol error|unexpected reply|ParserError|Unknown RESP type/i.test(`${msg} ${(e as Error)?.name ?? ""}`)) {
    return new MailsendError("config_invalid", `${at} does not speak the Redis protocol${config.tls ? "" : " (or it expects TLS)"}`, {
      cause: e,
      hint: `Check the host and port${config.tls ? "" : ", and use rediss:// if the server speaks TLS"}. ${chosen}.${nothingSent}`,
    });
  }
  if (/MOVED|CLUSTERDOWN|cluster support disabled/i.test(reply)) {
    return new MailsendError("config_invalid", `${at} is a Redis Cluster node, which the budget does not use (${msg})`, {
      cause: e,
      hint: `Point ${URL_VARIABLE} at a standalone Redis or Valkey (or a master through Sentinel). ${chosen}.${nothingSent}`,
    });
  }
  if (/^(?:READONLY|LOADING|BUSY|MASTERDOWN|TRYAGAIN|OOM)$/.test(reply)) {
    return new MailsendError("temporary_failure", `${at} cannot take the budget's writes right now (${msg})`, {
      cause: e,
      hint: `${reply === "READONLY" ? "It is a replica: point the URL at the master, or use redis-sentinel:// so mailsend finds it. " : "Try again shortly. "}${chosen}.${nothingSent}`,
    });
  }
  // A command's timeout while connecting (AUTH, SELECT) is a server that took the connection and
  // then stopped answering, as one later: 75 at the bound, not "cannot reach" after more probing.
  if (/timed out|timeout/i.test(msg) && (phase === "later" || /^Command timed out/.test(msg)) && !/connect/i.test(msg)) {
    return new MailsendError("temporary_failure", `${at} did not answer in time (${msg})`, {
      cause: e,
      hint: `Try again when it answers. ${chosen}.${nothingSent}`,
    });
  }
  if (isConnectionLoss(e) || /sentinel|timed out|timeout/i.test(msg)) {
    const why = code === "ECONNREFUSED" ? "connection refused" : code === "ENOTFOUND" || code === "EAI_AGAIN" ? "host not found" : UNREACHABLE.has(code) ? "host unreachable" : msg;
    if (phase === "connect") {
      return new MailsendError("connection_failed", `cannot reach ${at}: ${why}`, {
        cause: e,
        hint: `${chosen}: check that it runs and that this machine can reach it, or unset ${URL_VARIABLE} to keep the budget per machine.${nothingSent}`,
      });
    }
    return new MailsendError("temporary_failure", `lost ${at}: ${why}`, {
      cause: e,
      hint: `mailsend fails closed rather than send outside the shared budget; try again when Redis is back. ${chosen}.${nothingSent}`,
    });
  }
  // Anything else that is not the server's refusal of a command is a bug of ours (70).
  if ((e as Error)?.name !== "ReplyError") return toMailsendError(e);
  // Any other refusal: the server is not a Redis (or Valkey) the budget can use.
  return new MailsendError("config_invalid", `${at} refused the budget's command: ${msg}`, {
    cause: e,
    hint: `The budget needs Redis 6.2 or later (or Valkey) with Lua scripting (EVAL). ${chosen}.${nothingSent}`,
  });
}

/** Whether host:port answers a plain-text PING as Redis does (+PONG, or an -ERR/-NOAUTH). */
function speaksPlainRedis(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return probe(timeoutMs, undefined, (bare, answer) => {
    const socket = netConnect({ host: bare, port });
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (d: Buffer) => answer(/^[+-]/.test(d.toString("latin1", 0, 1))));
    return socket;
  }, host);
}

/**
 * A first connection that timed out or was cut during the handshake may be
 * TLS spoken to a plain port or the reverse: ask the port (one short probe)
 * and say so, instead of "unreachable".
 */
export async function diagnoseConnect(e: unknown, config: RedisConfig, op: RedisOp, timeoutMs: number): Promise<MailsendError> {
  const plain = redisError(e, config, "connect", op);
  if (plain.code !== "connection_failed" || config.kind !== "standalone" || UNREACHABLE.has(codeOf(e))) return plain;
  const node = config.nodes[0]!;
  const at = `the shared-budget Redis at ${where(config)}`;
  const chosen = `${URL_VARIABLE} (${config.label}) chose this Redis`;
  const nothingSent = op === "take" ? " Nothing was sent." : "";
  if (config.tls && (await speaksPlainRedis(node.host, node.port, Math.min(timeoutMs, 2_000)))) {
    return new MailsendError("tls_mismatch", `${at} speaks plain Redis, not TLS`, { cause: e, hint: `Use redis:// for this port (rediss:// is for a TLS port). ${chosen}.${nothingSent}` });
  }
  if (!config.tls && (await speaksTls(node.host, node.port, Math.min(timeoutMs, 2_000)))) {
    return new MailsendError("tls_mismatch", `${at} speaks TLS`, { cause: e, hint: `Use rediss:// for this port. ${chosen}.${nothingSent}` });
  }
  return plain;
}
