/**
 * A small HTTP proxy for tests, on 127.0.0.1: CONNECT tunnels (https://
 * services) and absolute-form requests (http:// ones), with an optional
 * user:password it requires (407 otherwise), targets it refuses (403), and a
 * log of what it saw. Also tinyproxy (Debian's package; .ci/run installs it),
 * a proxy that is not ours, for the happy paths.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./redis.js";
import { tinyproxy } from "./tools.js";

export interface ProxyLogEntry {
  method: string;
  /** host:port for CONNECT, the absolute URL otherwise. */
  target: string;
  /** The Proxy-Authorization header, if any. */
  authorization?: string;
  /** What the proxy answered. */
  status: number;
}

export interface TestProxy {
  url: string;
  port: number;
  log: ProxyLogEntry[];
  stop(): Promise<void>;
}

export interface TestProxyOptions {
  /** "user:password" that must come as Proxy-Authorization: Basic. */
  auth?: string;
  /** Targets (host:port or URL) to refuse with 403. */
  deny?: (target: string) => boolean;
}

export async function startProxy(opts: TestProxyOptions = {}): Promise<TestProxy> {
  const log: ProxyLogEntry[] = [];
  const sockets = new Set<net.Socket>();
  const expected = opts.auth ? `Basic ${Buffer.from(opts.auth).toString("base64")}` : undefined;
  const refusal = (_method: string, target: string, authorization: string | undefined): number | undefined => {
    if (expected && authorization !== expected) return 407;
    if (opts.deny?.(target)) return 403;
    return undefined;
  };
  const server = http.createServer((req, res) => {
    const target = req.url ?? "";
    const authorization = req.headers["proxy-authorization"];
    const entry: ProxyLogEntry = {
      method: req.method ?? "",
      target,
      ...(authorization ? { authorization } : {}),
      status: 0,
    };
    log.push(entry);
    const refused = refusal(entry.method, target, authorization);
    if (refused || !/^http:\/\//.test(target)) {
      entry.status = refused ?? 400;
      res.writeHead(entry.status, {
        "Content-Type": "text/html",
        ...(entry.status === 407 ? { "Proxy-Authenticate": 'Basic realm="test"' } : {}),
      });
      res.end(`<h1>${entry.status}</h1>`);
      return;
    }
    const headers = { ...req.headers };
    delete headers["proxy-authorization"];
    delete headers["proxy-connection"];
    const upstream = http.request(target, { method: req.method, headers }, (up) => {
      entry.status = up.statusCode ?? 0;
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on("error", () => {
      entry.status = 502;
      if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/html" });
      res.end("<h1>502 Bad Gateway</h1>");
    });
    req.pipe(upstream);
  });
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const target = req.url ?? "";
    const authorization = req.headers["proxy-authorization"];
    const entry: ProxyLogEntry = { method: "CONNECT", target, ...(authorization ? { authorization } : {}), status: 0 };
    log.push(entry);
    client.on("error", () => {});
    const refused = refusal("CONNECT", target, authorization);
    if (refused) {
      entry.status = refused;
      client.end(
        `HTTP/1.1 ${refused} ${refused === 407 ? "Proxy Authentication Required" : "Forbidden"}\r\n${refused === 407 ? 'Proxy-Authenticate: Basic realm="test"\r\n' : ""}Content-Length: 0\r\n\r\n`,
      );
      return;
    }
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(target);
    const up = net.connect({ host: m?.[1] ?? "", port: Number(m?.[2] ?? 0) });
    sockets.add(up);
    up.on("close", () => sockets.delete(up));
    up.once("connect", () => {
      entry.status = 200;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    up.on("error", () => {
      if (entry.status === 0) {
        entry.status = 502;
        client.end("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
      } else client.destroy();
    });
  });
  return listening(server, "http", sockets, log);
}

/** The server on a free port of 127.0.0.1; stop() cuts its open connections too. */
async function listening<L>(
  server: net.Server,
  scheme: string,
  sockets: Set<net.Socket>,
  log: L,
): Promise<{ url: string; port: number; log: L; stop(): Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    log,
    stop: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** An https:// front for an http:// server (the sandbox), with the given certificate. */
export async function startTlsFront(
  backendPort: number,
  tls: { cert: string; key: string },
): Promise<{ url: string; port: number; stop(): Promise<void> }> {
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const up = http.request(
      { host: "127.0.0.1", port: backendPort, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export const TINYPROXY = tinyproxy.path;

/**
 * tinyproxy on a free port of 127.0.0.1, every port allowed for CONNECT, its log in `logFile`;
 * with `basicAuth` ("user password", letters and digits only: tinyproxy's syntax) it wants those credentials.
 */
export async function startTinyproxy(
  opts: { basicAuth?: string } = {},
): Promise<{ url: string; logFile: string; stop(): Promise<void> }> {
  if (!TINYPROXY) throw new Error("tinyproxy is not installed (apt-get install tinyproxy; .ci/tools installs it)");
  for (let attempt = 0; attempt < 5; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), "mailsend-tinyproxy-"));
    const port = await freePort();
    const logFile = join(dir, "tinyproxy.log");
    // No ConnectPort line: CONNECT to every port (the test's services are on ephemeral ones).
    writeFileSync(
      join(dir, "tinyproxy.conf"),
      `${[`Port ${port}`, "Listen 127.0.0.1", "Timeout 30", "MaxClients 20", "Allow 127.0.0.1", "LogLevel Connect", `LogFile "${logFile}"`, ...(opts.basicAuth ? [`BasicAuth ${opts.basicAuth}`] : [])].join("\n")}\n`,
    );
    const child: ChildProcess = spawn(TINYPROXY, ["-d", "-c", join(dir, "tinyproxy.conf")], { stdio: "ignore" });
    const up = await waitForPort(port, 5_000);
    if (up) {
      return {
        url: `http://127.0.0.1:${port}`,
        logFile,
        stop: () =>
          new Promise<void>((r) => {
            const done = () => {
              rmSync(dir, { recursive: true, force: true });
              r();
            };
            if (child.exitCode !== null) return done();
            child.once("exit", done);
            child.kill("SIGTERM");
          }),
      };
    }
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
  throw new Error("tinyproxy did not start");
}

async function waitForPort(port: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const ok = await new Promise<boolean>((r) => {
      const s = net.connect({ host: "127.0.0.1", port });
      s.once("connect", () => {
        s.destroy();
        r(true);
      });
      s.once("error", () => r(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/**
 * A SOCKS5 server (RFC 1928 CONNECT, RFC 1929 user/password when `auth` is
 * given) on 127.0.0.1, logging the targets it connected.
 */
export async function startSocks5(
  opts: { auth?: { user: string; password: string } } = {},
): Promise<{ url: string; port: number; log: string[]; stop(): Promise<void> }> {
  const log: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    let buf = Buffer.alloc(0);
    let stage: "greeting" | "auth" | "request" | "done" = "greeting";
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (stage === "greeting") {
        if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
        const methods = [...buf.subarray(2, 2 + buf[1]!)];
        buf = buf.subarray(2 + buf[1]!);
        const want = opts.auth ? 2 : 0;
        if (!methods.includes(want)) {
          client.end(Buffer.from([5, 0xff]));
          return;
        }
        client.write(Buffer.from([5, want]));
        stage = opts.auth ? "auth" : "request";
      }
      if (stage === "auth") {
        if (buf.length < 2) return;
        const ul = buf[1]!;
        if (buf.length < 3 + ul || buf.length < 3 + ul + buf[2 + ul]!) return;
        const user = buf.subarray(2, 2 + ul).toString();
        const password = buf.subarray(3 + ul, 3 + ul + buf[2 + ul]!).toString();
        buf = buf.subarray(3 + ul + buf[2 + ul]!);
        const ok = user === opts.auth!.user && password === opts.auth!.password;
        client.write(Buffer.from([1, ok ? 0 : 1]));
        if (!ok) return void client.end();
        stage = "request";
      }
      if (stage === "request") {
        if (buf.length < 5) return;
        const atyp = buf[3]!;
        const len = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + buf[4]!;
        if (buf.length < 4 + len + 2) return;
        const addr = buf.subarray(4, 4 + len);
        const host =
          atyp === 1
            ? [...addr].join(".")
            : atyp === 4
              ? addr.toString("hex").replace(/(.{4})(?!$)/g, "$1:")
              : addr.subarray(1).toString();
        const port = buf.readUInt16BE(4 + len);
        const rest = buf.subarray(4 + len + 2);
        stage = "done";
        client.off("data", onData);
        log.push(`${host}:${port}`);
        const up = net.connect({ host, port });
        sockets.add(up);
        up.on("close", () => sockets.delete(up));
        up.once("connect", () => {
          client.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]));
          if (rest.length) up.write(rest);
          up.pipe(client);
          client.pipe(up);
        });
        up.on("error", () => client.end(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0])));
      }
    };
    client.on("data", onData);
  });
  return listening(server, "socks5", sockets, log);
}
