/**
 * startSandbox(): the whole emulator in this process, for the CLI, the demo,
 * the benchmark and the tests. One HTTP port (POST /send, /_sandbox/* and the
 * web inbox) and two SMTP ports (STARTTLS and implicit TLS), sharing one key
 * store, one rate limiter and one mail store.
 */
import { accessSync, constants, existsSync, mkdirSync, rmSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { availableParallelism } from "node:os";
import { resolve as resolvePath } from "node:path";
import { MailsendError } from "../core/errors.js";
import { DEFAULTS } from "../core/config.js";
import type { SandboxCore } from "./core.js";
import { createdByStart, type CreatedByStart } from "./created.js";
import { Faults, mergeFaults, NO_FAULTS, type FaultConfig } from "./faults.js";
import { writeFileAtomic } from "../core/atomic.js";
import { IdempotencyCache, IDEMPOTENCY_TTL_MS } from "./idempotency.js";
import { KeyStore } from "./keys.js";
import { acquireLock } from "./lock.js";
import { sandboxPaths, type SandboxPaths } from "./paths.js";
import { SlidingLogLimiter } from "./ratelimit.js";
import { createSendHandler, sendJson } from "./rest.js";
import { createSmtpServer, type SmtpRole } from "./smtp.js";
import { Stats } from "./stats.js";
import { FileMessageStore } from "./store.js";
import { ensureTls, type TlsMaterial } from "./tls.js";
import { createWriter } from "./writer.js";
import { createInboxHandler } from "./web.js";
import { createAccessGate, isLoopback, newToken } from "./access.js";

export const SANDBOX_DEFAULTS = {
  host: "127.0.0.1",
  httpPort: 8025,
  smtpPort: 2587,
  smtpsPort: 2465,
  rateLimit: DEFAULTS.rateLimit,
  rateWindowMs: 60_000,
  maxSize: 10 * 1024 * 1024,
  smtpUser: DEFAULTS.smtpUser,
} as const;

export interface SandboxOptions {
  /** The data dir: keys, messages, TLS material. */
  dir: string;
  host?: string;
  /** 0 picks a free port. Library default: 0 for all three (the CLI defaults to 8025/2587/2465). */
  httpPort?: number;
  smtpPort?: number;
  smtpsPort?: number;
  /** Requests per window per key, REST and SMTP together (default 60). */
  rateLimit?: number;
  /** The rolling window in ms (default 60000; shorter for tests). */
  rateWindowMs?: number;
  /** Largest REST body and SMTP message in bytes (default 10 MiB). */
  maxSize?: number;
  smtpUser?: string;
  faults?: Partial<FaultConfig>;
  /** Threads that build and write message files (default 1 when there are 2+ cores; 0 = in the main thread). */
  writerThreads?: number;
  /**
   * The token the control API and the web inbox require when `host` is not a
   * loopback address (default: a new random one per start). Ignored on loopback.
   */
  token?: string;
}

export interface Sandbox {
  dir: string;
  paths: SandboxPaths;
  host: string;
  ports: { http: number; smtp: number; smtps: number };
  urls: { baseUrl: string; inbox: string; smtp: string; smtps: string };
  tls: TlsMaterial;
  store: FileMessageStore;
  keys: KeyStore;
  faults: Faults;
  stats: Stats;
  limiter: SlidingLogLimiter;
  /** Set on the start that made the first key: the only time it is seen in clear. */
  createdKey?: { id: string; key: string };
  /** The file holding the first key (mode 0600), if it exists. */
  apiKeyFile?: string;
  /** The variables that point mailsend at this sandbox (STARTTLS port for SMTP). */
  env: Record<string, string>;
  /** Listening beyond loopback (--host 0.0.0.0 or an interface): then `token` guards /_sandbox/* and the inbox. */
  exposed: boolean;
  token?: string;
  close(): Promise<void>;
}

interface Listener {
  listen(port: number, host: string, cb: () => void): unknown;
  once(ev: "error", l: (e: NodeJS.ErrnoException) => void): unknown;
}

/** The library's name for a port flag: http-port is options.httpPort. */
const optionOf = (flag: string) => flag.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

function listen(
  server: Listener,
  address: () => AddressInfo,
  port: number,
  host: string,
  flag: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", (e) => {
      reject(
        e.code === "EADDRINUSE"
          ? new MailsendError("config_invalid", `port ${port} on ${host} is already in use`, {
              hint: (s) =>
                `Choose another with ${s.pick({ cli: `--${flag} <port>`, api: `options.${optionOf(flag)}` })}, or 0 for any free port.`,
            })
          : new MailsendError(
              "config_invalid",
              (s) =>
                `cannot listen on ${host}:${port} (${s.pick({ cli: `--${flag}`, api: `options.${optionOf(flag)}` })}): ${e.message}`,
              { cause: e },
            ),
      );
    });
    server.listen(port, host, () => resolve(address().port));
  });
}

/** The host clients should use: a wildcard bind is reached on loopback. */
function clientHost(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "::1";
  return host;
}

function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** mkdir -p the data dir and check it can be used; returns the first directory it made, if any. */
function openDataDir(dir: string): string | undefined {
  try {
    const made = mkdirSync(dir, { recursive: true, mode: 0o700 });
    accessSync(dir, constants.R_OK | constants.W_OK);
    return made;
  } catch (e) {
    throw new MailsendError(
      "config_invalid",
      `cannot use ${dir} as the sandbox data dir (${(e as NodeJS.ErrnoException).code ?? e})`,
      {
        cause: e,
        hint: (s) =>
          `Give ${s.pick({ cli: "--dir (or MAILSEND_SANDBOX_DIR)", api: "options.dir" })} a directory you can write to.`,
      },
    );
  }
}

/**
 * Bind every fixed port at once, then let go: a port in use (or given twice)
 * fails the start before a first start has made a key, a CA or the data dir.
 * The real servers bind a moment later; if one loses that race, the start
 * still removes what it made (createdByStart).
 */
async function checkPorts(host: string, ports: ReadonlyArray<readonly [number | undefined, string]>): Promise<void> {
  const fixed = ports.filter(([port]) => port);
  for (const [i, [port, flag]] of fixed.entries()) {
    const other = fixed.slice(0, i).find(([p]) => p === port);
    if (other)
      throw new MailsendError("usage", `--${other[1]} and --${flag} are both ${port}: each needs a port of its own`);
  }
  const probes: net.Server[] = [];
  try {
    for (const [port, flag] of ports) {
      if (!port) continue;
      const probe = net.createServer();
      await listen(probe, () => probe.address() as AddressInfo, port, host, flag);
      probes.push(probe);
    }
  } finally {
    await Promise.all(probes.map((p) => new Promise<void>((resolve) => p.close(() => resolve()))));
  }
}

/** The sandbox's state: its keys (a first one made when there is none), stored mail, limits and faults. */
async function openCore(
  paths: SandboxPaths,
  options: SandboxOptions,
  cleanups: Cleanups,
): Promise<{ core: SandboxCore; createdKey?: Sandbox["createdKey"] }> {
  const keys = KeyStore.open(paths.keys);
  let createdKey: Sandbox["createdKey"];
  if (keys.size === 0) {
    const made = keys.add({ label: "default" });
    writeFileAtomic(paths.apiKeyFile, `${made.key}\n`, { mode: 0o600 });
    createdKey = { id: made.record.id, key: made.key };
  }

  const writer = createWriter(options.writerThreads ?? (availableParallelism() > 1 ? 1 : 0));
  cleanups.push(() => writer.close());
  const store = await FileMessageStore.open(paths.dir, { writer });
  cleanups.push(() => store.close());
  const idempotency = new IdempotencyCache();
  for (const r of store.withIdempotencyKey(Date.now() - IDEMPOTENCY_TTL_MS)) {
    idempotency.set(IdempotencyCache.scope(r.keyId, r.idempotencyKey!), {
      id: r.id,
      messageId: r.messageId,
      ...(r.requestHash ? { requestHash: r.requestHash } : {}),
      at: Date.parse(r.receivedAt),
    });
  }
  const core: SandboxCore = {
    keys,
    store,
    limiter: new SlidingLogLimiter(
      options.rateLimit ?? SANDBOX_DEFAULTS.rateLimit,
      options.rateWindowMs ?? SANDBOX_DEFAULTS.rateWindowMs,
    ),
    idempotency,
    faults: new Faults(options.faults ?? {}),
    stats: new Stats(),
    maxSize: options.maxSize ?? SANDBOX_DEFAULTS.maxSize,
    smtpUser: options.smtpUser ?? SANDBOX_DEFAULTS.smtpUser,
  };
  return { core, ...(createdKey ? { createdKey } : {}) };
}

/** The HTTP side: POST /send, the control routes and the web inbox, behind the access gate. */
async function startHttp(
  core: SandboxCore,
  host: string,
  port: number,
  token: string | undefined,
  cleanups: Cleanups,
): Promise<number> {
  const handleSend = createSendHandler(core);
  // Host (and beyond loopback the token) is checked for every route here, so the inbox need not.
  const inbox = createInboxHandler(core.store, { checkHost: false });
  const gate = createAccessGate({ host, ...(token ? { token } : {}) });
  const control = createControlHandler(core);
  const route = async (req: http.IncomingMessage, res: http.ServerResponse, expectContinue: boolean) => {
    try {
      const path = (req.url ?? "/").split("?")[0]!;
      if (gate(req, res, path)) return;
      if (path === "/send") return await handleSend(req, res, expectContinue);
      if (expectContinue) res.writeContinue();
      if (path.startsWith("/_sandbox/")) return await control(req, res, path);
      if (await inbox(req, res)) return;
      sendJson(res, 404, {
        success: false,
        error: { code: "not_found", message: `nothing at ${path}; the send endpoint is POST /send` },
      });
    } catch {
      // A bug of ours: answer 500 rather than hang or crash (the message, if any, was not acknowledged).
      if (!res.headersSent)
        sendJson(
          res,
          500,
          { success: false, error: { code: "internal_error", message: "internal error in the sandbox" } },
          { Connection: "close" },
        );
      else res.destroy();
    }
  };
  const httpServer = http.createServer({ keepAliveTimeout: 5000 }, (req, res) => void route(req, res, false));
  httpServer.on("checkContinue", (req, res) => void route(req, res, true));
  httpServer.on("clientError", (_e, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    else socket.destroy();
  });
  const httpPort = await listen(httpServer, () => httpServer.address() as AddressInfo, port, host, "http-port");
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        httpServer.closeIdleConnections();
        // Event streams of the web inbox and slow clients: give them a moment, then cut.
        setTimeout(() => httpServer.closeAllConnections(), 500).unref();
      }),
  );
  return httpPort;
}

/** One SMTP server in its role (STARTTLS on --smtp-port, implicit TLS on --smtps-port). */
async function startSmtp(
  core: SandboxCore,
  role: SmtpRole,
  tls: TlsMaterial,
  host: string,
  port: number,
  cleanups: Cleanups,
): Promise<number> {
  const server = createSmtpServer(core, role, tls);
  const bound = await listen(
    server,
    () => server.server.address() as AddressInfo,
    port,
    host,
    role === "starttls" ? "smtp-port" : "smtps-port",
  );
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return bound;
}

/** The environment that points mailsend (in another shell) at this sandbox. */
function clientEnv(o: {
  baseUrl: string;
  reach: string;
  smtpPort: number;
  core: SandboxCore;
  caPath: string;
  keyFile: string | undefined;
  dir: string;
}): Record<string, string> {
  const { limiter, smtpUser } = o.core;
  return {
    MAILSEND_BASE_URL: o.baseUrl,
    MAILSEND_SMTP_HOST: o.reach,
    MAILSEND_SMTP_PORT: String(o.smtpPort),
    MAILSEND_SMTP_TLS: "starttls",
    ...(smtpUser !== DEFAULTS.smtpUser ? { MAILSEND_SMTP_USER: smtpUser } : {}),
    NODE_EXTRA_CA_CERTS: o.caPath,
    ...(o.keyFile ? { MAILSEND_API_KEY_FILE: o.keyFile } : {}),
    // For `mailsend inbox` and `sandbox keys` in the other shell: they read this dir, not the default.
    MAILSEND_SANDBOX_DIR: o.dir,
    // A client's own budget must match the limit it is held to.
    ...(limiter.limit !== DEFAULTS.rateLimit ? { MAILSEND_RATE_LIMIT: String(limiter.limit) } : {}),
    ...(limiter.windowMs !== 60_000 ? { MAILSEND_RATE_WINDOW: String(Math.ceil(limiter.windowMs / 1000)) } : {}),
  };
}

type Cleanups = Array<() => Promise<void> | void>;

/** The running sandbox as its starter sees it: where it listens, the environment for clients, close(). */
function sandboxHandle(o: {
  paths: SandboxPaths;
  reach: string;
  tls: TlsMaterial;
  core: SandboxCore;
  ports: Sandbox["ports"];
  createdKey: Sandbox["createdKey"] | undefined;
  exposed: boolean;
  token: string | undefined;
  cleanup: () => Promise<void>;
}): Sandbox {
  const { paths, reach, tls, core, ports, createdKey, token } = o;
  const reachHost = urlHost(reach);
  const baseUrl = `http://${reachHost}:${ports.http}`;
  const keyFile = existsSync(paths.apiKeyFile) ? paths.apiKeyFile : undefined;
  const env = clientEnv({ baseUrl, reach, smtpPort: ports.smtp, core, caPath: tls.caPath, keyFile, dir: paths.dir });
  let closing: Promise<void> | undefined;
  return {
    dir: paths.dir,
    paths,
    host: reach,
    ports,
    urls: {
      baseUrl,
      inbox: `${baseUrl}/`,
      smtp: `smtp://${reachHost}:${ports.smtp}`,
      smtps: `smtps://${reachHost}:${ports.smtps}`,
    },
    tls,
    store: core.store,
    keys: core.keys,
    faults: core.faults,
    stats: core.stats,
    limiter: core.limiter,
    ...(createdKey ? { createdKey } : {}),
    ...(keyFile ? { apiKeyFile: keyFile } : {}),
    env,
    exposed: o.exposed,
    ...(token ? { token } : {}),
    close: () => (closing ??= o.cleanup()),
  };
}

/**
 * The data dir's lock, held from before the snapshot of what exists until after a failed start has
 * taken back what it made: no other start can write in between and have its files taken for ours.
 * Once taken it is released by the last cleanup (they run in reverse), unless a failed start
 * called hold() to release it itself after removing what it made.
 */
function dirLock(paths: SandboxPaths, created: CreatedByStart, cleanups: Cleanups) {
  let releaseLock: (() => void) | undefined;
  let holdLock = false;
  return {
    take: () => {
      const release = acquireLock(paths.lock, paths.dir);
      releaseLock = release;
      cleanups.push(() => {
        if (!holdLock) release();
      });
      created.snapshot();
    },
    hold: () => {
      holdLock = true;
    },
    release: () => releaseLock?.(),
  };
}

/** Opens (or makes) the data dir and takes its lock, checking the ports are free on the way. */
async function claimDataDir(
  paths: SandboxPaths,
  host: string,
  options: SandboxOptions,
  created: CreatedByStart,
  lock: () => void,
): Promise<void> {
  // A sandbox already running on this dir is the better message than its ports being in use.
  const existed = existsSync(paths.dir);
  if (existed) {
    openDataDir(paths.dir);
    lock();
  }
  await checkPorts(host, [
    [options.httpPort, "http-port"],
    [options.smtpPort, "smtp-port"],
    [options.smtpsPort, "smtps-port"],
  ]);
  if (!existed) {
    created.madeDir(openDataDir(paths.dir));
    lock();
  }
}

/** The HTTP and both SMTP servers, then the url file other processes find the sandbox by. */
async function startServers(
  o: {
    paths: SandboxPaths;
    core: SandboxCore;
    tls: TlsMaterial;
    host: string;
    reach: string;
    token: string | undefined;
    options: SandboxOptions;
  },
  cleanups: Cleanups,
): Promise<Sandbox["ports"]> {
  const { paths, core, tls, host, reach, token, options } = o;
  const httpPort = await startHttp(core, host, options.httpPort ?? 0, token, cleanups);

  const smtpPort = await startSmtp(core, "starttls", tls, host, options.smtpPort ?? 0, cleanups);
  const smtpsPort = await startSmtp(core, "implicit", tls, host, options.smtpsPort ?? 0, cleanups);
  // Run first (cleanups go in reverse): answers held back by latency go out before the servers close.
  cleanups.push(() => core.faults.hurry());
  // Where other processes (`mailsend inbox wait`) reach this sandbox; gone first on close.
  writeFileAtomic(paths.url, `http://${urlHost(reach)}:${httpPort}\n`, { mode: 0o644 });
  cleanups.push(() => rmSync(paths.url, { force: true }));
  return { http: httpPort, smtp: smtpPort, smtps: smtpsPort };
}

export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  // Absolute: the export lines and the ready line are used from other shells, in other directories.
  const paths = sandboxPaths(resolvePath(options.dir));
  const host = options.host ?? SANDBOX_DEFAULTS.host;
  const created = createdByStart(paths);
  const cleanups: Cleanups = [];
  const cleanup = async () => {
    for (const c of cleanups.reverse()) await c();
  };
  const lock = dirLock(paths, created, cleanups);
  try {
    await claimDataDir(paths, host, options, created, lock.take);

    const reach = clientHost(host);
    const tls = await ensureTls(paths.tls, [...new Set(["localhost", "127.0.0.1", "::1", reach])]);

    const { core, createdKey } = await openCore(paths, options, cleanups);

    const exposed = !isLoopback(host);
    const token = exposed ? options.token || newToken() : undefined;
    const ports = await startServers({ paths, core, tls, host, reach, token, options }, cleanups);

    return sandboxHandle({ paths, reach, tls, core, ports, createdKey, exposed, token, cleanup });
  } catch (e) {
    // Everything but the lock first (servers, store), then what this start made, then the lock.
    lock.hold();
    await cleanup();
    created.remove();
    lock.release();
    created.removeEmptyDirs();
    throw e;
  }
}

/** /_sandbox/stats, /_sandbox/faults: for tests and for scripted chaos. */
function createControlHandler(core: SandboxCore) {
  return async (req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> => {
    if (path === "/_sandbox/stats" && req.method === "GET") {
      sendJson(res, 200, {
        ...core.stats.toJSON(),
        stored: core.store.count,
        rateLimit: { limit: core.limiter.limit, windowMs: core.limiter.windowMs },
      });
      return;
    }
    if (path === "/_sandbox/faults") {
      if (req.method === "GET") return sendJson(res, 200, core.faults.config);
      if (req.method === "DELETE") {
        core.faults.config = { ...NO_FAULTS };
        return sendJson(res, 200, core.faults.config);
      }
      if (req.method === "POST") return postFaults(core, req, res);
      return sendJson(
        res,
        405,
        { success: false, error: { code: "method_not_allowed", message: "use GET, POST or DELETE" } },
        { Allow: "GET, POST, DELETE" },
      );
    }
    sendJson(res, 404, {
      success: false,
      error: {
        code: "not_found",
        message: `no control endpoint ${path} (known: GET /_sandbox/stats, GET|POST|DELETE /_sandbox/faults)`,
      },
    });
  };
}

/** POST /_sandbox/faults: a JSON object of fault settings merged into those in force, which are answered. */
async function postFaults(core: SandboxCore, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  // JSON only: a cross-site form post from a web page cannot set faults.
  if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
    return sendJson(res, 415, {
      success: false,
      error: { code: "unsupported_media_type", message: "send the fault settings as application/json" },
    });
  }
  const patch = await readFaultPatch(req, res);
  if (!patch) return;
  try {
    core.faults.config = mergeFaults(core.faults.config, patch);
  } catch (e) {
    return sendJson(res, 400, {
      success: false,
      error: { code: "invalid_request", message: (e as Error).message },
    });
  }
  return sendJson(res, 200, core.faults.config);
}

/** The request's body as a JSON object; nothing when it is not one (too large, not JSON), which is answered. */
async function readFaultPatch(
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<Record<string, unknown> | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 64 * 1024)
      return void sendJson(
        res,
        413,
        { success: false, error: { code: "payload_too_large", message: "fault settings are small" } },
        { Connection: "close" },
      );
    chunks.push(c as Buffer);
  }
  let patch: unknown;
  try {
    patch = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return void sendJson(res, 400, {
      success: false,
      error: { code: "invalid_json", message: "the body is not valid JSON" },
    });
  }
  if (!patch || typeof patch !== "object" || Array.isArray(patch)) {
    return void sendJson(res, 400, {
      success: false,
      error: { code: "invalid_request", message: "expected a JSON object of fault settings" },
    });
  }
  return patch as Record<string, unknown>;
}
