/**
 * What went wrong with the budget's Redis, as a MailsendError with its sysexits
 * code and a hint. Messages name the server by host
 * and port (never by its URL, never with the password) and say that
 * MAILSEND_RATE_LIMIT_URL chose it.
 */
import { type ErrorCode, MailsendError, said, type Text, toMailsendError } from "../core/errors.js";
import type { Say } from "../core/setting-names.js";
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { connect: netConnect } = process.getBuiltinModule("node:net");
import { looksLikeTlsToPlaintext, probe, speaksTls, UNREACHABLE, UNTRUSTED, untrustedHint } from "../net/errors.js";
import { PASSWORD_FILE_VARIABLE, type RedisConfig } from "./redis-config.js";

/** A Redis certificate from a private CA: the CA settings of the send, which the budget shares. */
const PRIVATE_CA_HINT: Text = (s) =>
  `If the server's certificate comes from a private CA, ${s.pick({
    cli: "set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file, or pass --ca-file <pem>.",
    api: "set caFile to its PEM file.",
    sendmail: "set MAILSEND_CA_FILE or NODE_EXTRA_CA_CERTS to its PEM file.",
  })}`;

/** What the store was doing: the first connection, or any later step (the server was there before). */
export type RedisPhase = "connect" | "later";

/** The budget operation that failed: a failed "take" means nothing was sent. */
export type RedisOp = "take" | "record" | "check";

/** The ACL a Redis user needs for the budget (the commands its scripts call included). */
export const REDIS_ACL =
  "~mailsend:* +select +eval +evalsha +zrem +ping +time +get +set +zadd +zcard +zrange +zscore +zremrangebyscore +pexpire";

export function where(config: RedisConfig): string {
  const hostPort = (n: { host: string; port: number }) => `${n.host.includes(":") ? `[${n.host}]` : n.host}:${n.port}`;
  if (config.kind === "sentinel")
    return `master "${config.masterName}" of the sentinels at ${config.nodes.map(hostPort).join(", ")}`;
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
  return /Connection is closed|Stream isn't writeable|connection (?:is )?(?:closed|lost)|socket (?:hang up|closed)/i.test(
    messageOf(e),
  );
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

/** How messages name the server and end their hints: by host and port, and the setting that chose it. */
function naming(config: RedisConfig, op: RedisOp): { at: string; chosen: (s: Say) => string; nothingSent: string } {
  return {
    at: `the shared-budget Redis at ${where(config)}`,
    chosen: (s) => `${s.env("rateLimitUrl")} (${config.label}) chose this Redis`,
    nothingSent: op === "take" ? " Nothing was sent." : "",
  };
}

/** A failure as the cases of redisError read it. */
interface Failure extends ReturnType<typeof naming> {
  e: unknown;
  config: RedisConfig;
  phase: RedisPhase;
  code: string;
  msg: string;
  /** The reply's error code ("WRONGPASS"), inner one for a script's call. */
  reply: string;
}

interface Case {
  when: (f: Failure) => boolean;
  code: ErrorCode;
  /** A refusal of this machine's credentials (ErrorDetails.local). */
  local?: true;
  message: (f: Failure) => string;
  hint: (f: Failure) => Text;
}

function passwordPlace(config: RedisConfig, s: Say): string {
  if (config.passwordSource === "the URL") return "the URL's user:password@";
  return config.passwordSource ? s.env(PASSWORD_FILE_VARIABLE) : `${s.env(PASSWORD_FILE_VARIABLE)} or the URL`;
}

/** Why a connection failed, in words: what its errno means, else its own message. */
function unreachableWhy({ code, msg }: Failure): string {
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "host not found";
  return UNREACHABLE.has(code) ? "host unreachable" : msg;
}

const lostConnection = (f: Failure) => isConnectionLoss(f.e) || /sentinel|timed out|timeout/i.test(f.msg);

/**
 * The failures the budget's Redis meets, the first that matches wins. Refusals of the credentials
 * are 77, like a refused key; TLS faults 78, like a service's untrusted certificate or a port/TLS
 * mismatch.
 */
const CASES: Case[] = [
  {
    when: (f) => f.reply === "WRONGPASS" || /invalid (?:username-)?password/i.test(f.msg),
    code: "auth_failed",
    local: true,
    message: (f) =>
      `${f.at} refused ${f.config.username ? `the user "${f.config.username}" or its password` : "the password"} (authentication failed)`,
    hint: (f) => (s) =>
      `Check the password (in ${passwordPlace(f.config, s)})${f.config.username ? " and the ACL user name" : ""}. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => f.reply === "NOAUTH",
    code: "auth_failed",
    local: true,
    message: (f) => `${f.at} requires a password and none was given (authentication failed)`,
    hint: (f) => (s) =>
      `Put the password in a file named by ${s.env(PASSWORD_FILE_VARIABLE)}, or in the URL as redis://[user]:password@host. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => /wrong number of arguments for 'auth'/i.test(f.msg),
    code: "auth_failed",
    local: true,
    message: (f) =>
      `${f.at} takes no user name with the password (Redis 5 or older has no ACL users; authentication failed)`,
    hint: (f) => (s) =>
      `Give only the password, with no user name before the ":" of the URL's user:password@. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => f.reply === "NOPERM",
    code: "auth_failed",
    local: true,
    message: (f) =>
      `${f.at}: the user ${f.config.username ? `"${f.config.username}" ` : ""}may not run the budget's commands (${f.msg})`,
    hint: (f) => (s) =>
      `Grant the ACL user what the budget needs, e.g. ACL SETUSER ${f.config.username ?? "default"} ${REDIS_ACL}. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => UNTRUSTED.has(f.code),
    code: "tls_untrusted",
    message: (f) => `the TLS certificate of ${f.at} is not trusted (${f.code})`,
    hint: (f) => (s) =>
      `${said(
        untrustedHint(f.e, PRIVATE_CA_HINT, (s) => s.env("rateLimitUrl")),
        s.front,
      )} ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) =>
      f.config.tls && (looksLikeTlsToPlaintext(f.e) || /ssl|tls|handshake|certificate/i.test(`${f.code} ${f.msg}`)),
    code: "tls_mismatch",
    message: (f) => `TLS with ${f.at} failed: ${f.msg}`,
    hint: (f) => (s) =>
      `rediss:// speaks TLS from the first byte; if this port is plain Redis, use redis://. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) =>
      /Protocol error|unexpected reply|ParserError|Unknown RESP type/i.test(`${f.msg} ${(f.e as Error)?.name ?? ""}`),
    code: "config_invalid",
    message: (f) => `${f.at} does not speak the Redis protocol${f.config.tls ? "" : " (or it expects TLS)"}`,
    hint: (f) => (s) =>
      `Check the host and port${f.config.tls ? "" : ", and use rediss:// if the server speaks TLS"}. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => /MOVED|CLUSTERDOWN|cluster support disabled/i.test(f.reply),
    code: "config_invalid",
    message: (f) => `${f.at} is a Redis Cluster node, which the budget does not use (${f.msg})`,
    hint: (f) => (s) =>
      `Point ${s.env("rateLimitUrl")} at a standalone Redis or Valkey (or a master through Sentinel). ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => /^(?:READONLY|LOADING|BUSY|MASTERDOWN|TRYAGAIN|OOM)$/.test(f.reply),
    code: "temporary_failure",
    message: (f) => `${f.at} cannot take the budget's writes right now (${f.msg})`,
    hint: (f) => (s) =>
      `${f.reply === "READONLY" ? "It is a replica: point the URL at the master, or use redis-sentinel:// so mailsend finds it. " : "Try again shortly. "}${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    // A command's timeout while connecting (AUTH, SELECT) is a server that took the connection and
    // then stopped answering, as one later: 75 at the bound, not "cannot reach" after more probing.
    when: (f) =>
      /timed out|timeout/i.test(f.msg) &&
      (f.phase === "later" || /^Command timed out/.test(f.msg)) &&
      !/connect/i.test(f.msg),
    code: "temporary_failure",
    message: (f) => `${f.at} did not answer in time (${f.msg})`,
    hint: (f) => (s) => `Try again when it answers. ${f.chosen(s)}.${f.nothingSent}`,
  },
  {
    when: (f) => lostConnection(f) && f.phase === "connect",
    code: "connection_failed",
    message: (f) => `cannot reach ${f.at}: ${unreachableWhy(f)}`,
    hint: (f) => (s) =>
      `${f.chosen(s)}: check that it runs and that this machine can reach it, or unset ${s.env("rateLimitUrl")} to keep the budget per machine.${f.nothingSent}`,
  },
  {
    when: lostConnection,
    code: "temporary_failure",
    message: (f) => `lost ${f.at}: ${unreachableWhy(f)}`,
    hint: (f) => (s) =>
      `mailsend fails closed rather than send outside the shared budget; try again when Redis is back. ${f.chosen(s)}.${f.nothingSent}`,
  },
];

export function redisError(e: unknown, config: RedisConfig, phase: RedisPhase, op: RedisOp): MailsendError {
  if (e instanceof MailsendError) return e;
  const msg = messageOf(e);
  const f: Failure = { e, config, phase, code: codeOf(e), msg, reply: replyCodeOf(msg), ...naming(config, op) };
  const known = CASES.find((c) => c.when(f));
  if (known)
    return new MailsendError(known.code, known.message(f), { cause: e, local: known.local, hint: known.hint(f) });
  // Anything else that is not the server's refusal of a command is a bug of ours (70).
  if ((e as Error)?.name !== "ReplyError") return toMailsendError(e);
  // Any other refusal: the server is not a Redis (or Valkey) the budget can use.
  return new MailsendError("config_invalid", `${f.at} refused the budget's command: ${msg}`, {
    cause: e,
    hint: (s) =>
      `The budget needs Redis 6.2 or later (or Valkey) with Lua scripting (EVAL). ${f.chosen(s)}.${f.nothingSent}`,
  });
}

/** Whether host:port answers a plain-text PING as Redis does (+PONG, or an -ERR/-NOAUTH). */
function speaksPlainRedis(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return probe(
    timeoutMs,
    undefined,
    (bare, answer) => {
      const socket = netConnect({ host: bare, port });
      socket.once("connect", () => socket.write("PING\r\n"));
      socket.once("data", (d: Buffer) => answer(/^[+-]/.test(d.toString("latin1", 0, 1))));
      return socket;
    },
    host,
  );
}

/**
 * A first connection that timed out or was cut during the handshake may be
 * TLS spoken to a plain port or the reverse: ask the port (one short probe)
 * and say so, instead of "unreachable".
 */
export async function diagnoseConnect(
  e: unknown,
  config: RedisConfig,
  op: RedisOp,
  timeoutMs: number,
): Promise<MailsendError> {
  const plain = redisError(e, config, "connect", op);
  if (plain.code !== "connection_failed" || config.kind !== "standalone" || UNREACHABLE.has(codeOf(e))) return plain;
  const node = config.nodes[0]!;
  const { at, chosen, nothingSent } = naming(config, op);
  if (config.tls && (await speaksPlainRedis(node.host, node.port, Math.min(timeoutMs, 2_000)))) {
    return new MailsendError("tls_mismatch", `${at} speaks plain Redis, not TLS`, {
      cause: e,
      hint: (s) => `Use redis:// for this port (rediss:// is for a TLS port). ${chosen(s)}.${nothingSent}`,
    });
  }
  if (!config.tls && (await speaksTls(node.host, node.port, Math.min(timeoutMs, 2_000)))) {
    return new MailsendError("tls_mismatch", `${at} speaks TLS`, {
      cause: e,
      hint: (s) => `Use rediss:// for this port. ${chosen(s)}.${nothingSent}`,
    });
  }
  return plain;
}
