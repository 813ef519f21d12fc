/**
 * A stand-in for the service's REST endpoint: records every request exactly
 * as received and answers from a programmable script.
 *
 *   const rec = await startRestRecorder();            // http://127.0.0.1:<port>
 *   const rec = await startRestRecorder({ tls });     // https, cert from src/sandbox/tls.ts
 *   rec.script({ status: 429, headers: { "Retry-After": "7" } });
 *   ... run the CLI with --base-url rec.url ...
 *   expect(rec.requests).toHaveLength(1);
 *   rec.reset();                                      // between tests
 *   await rec.close();                                // afterAll
 *
 *   let rec: RestRecorder;
 *   useRestRecorder((r) => (rec = r));                // all three, as hooks of the file or describe
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, beforeEach } from "vitest";
import type { TlsMaterial } from "../../src/sandbox/tls.js";

export interface RecordedRequest {
  method: string;
  url: string;
  /** Lower-cased names, as node:http gives them. */
  headers: http.IncomingHttpHeaders;
  /** Names as sent, alternating name, value. */
  rawHeaders: string[];
  body: Buffer;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any;
}

export interface Reply {
  /** Default 200. */
  status?: number;
  /** A string is sent as is; anything else as JSON. Default: a success with a fresh message_id. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long (after reading the whole request) before answering. */
  delayMs?: number;
  /**
   * Destroy the socket instead of answering: "before-body" as soon as the
   * request head arrives (nothing of the body read), "after-body" once the
   * whole request has been read.
   */
  destroy?: "before-body" | "after-body";
}

export type ReplyFn = (req: RecordedRequest, index: number) => Reply;

export interface RestRecorder {
  /** Base URL to pass as --base-url (no trailing slash). */
  readonly url: string;
  readonly port: number;
  /** Completed requests, in arrival order. */
  readonly requests: RecordedRequest[];
  /** TCP (or TLS) connections accepted since the last reset. */
  readonly connections: number;
  /**
   * Replies for the next requests, one each, in order; once used up, the
   * last one keeps answering. A function decides per request.
   */
  script(...replies: Array<Reply | ReplyFn>): void;
  /** Forget recorded requests and the script (back to the default success). */
  reset(): void;
  close(): Promise<void>;
}

let counter = 0;

export function successBody(): { success: true; message_id: string } {
  counter += 1;
  return { success: true, message_id: `msg_${process.pid}_${counter}` };
}

export async function startRestRecorder(opts: { tls?: TlsMaterial } = {}): Promise<RestRecorder> {
  const requests: RecordedRequest[] = [];
  let queue: Array<Reply | ReplyFn> = [];
  let connections = 0;
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let seen = 0;

  const nextReply = (req: RecordedRequest, index: number): Reply => {
    const item = queue.length > 1 ? queue.shift()! : queue[0];
    if (item === undefined) return {};
    return typeof item === "function" ? item(req, index) : item;
  };

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const index = seen++;
    const chunks: Buffer[] = [];
    // "before-body" has to be decided from the head alone: peek at the script.
    const peek = queue[0];
    if (peek && typeof peek !== "function" && peek.destroy === "before-body") {
      if (queue.length > 1) queue.shift();
      req.socket.destroy();
      return;
    }
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => {});
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const text = body.toString("utf8");
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      const record: RecordedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
        text,
        json,
      };
      requests.push(record);
      const reply = nextReply(record, index);
      const answer = () => {
        if (reply.destroy) {
          req.socket.destroy();
          return;
        }
        const payload =
          reply.body === undefined
            ? JSON.stringify(successBody())
            : typeof reply.body === "string"
              ? reply.body
              : JSON.stringify(reply.body);
        const headers: Record<string, string> = {
          "Content-Type": typeof reply.body === "string" ? "text/plain; charset=utf-8" : "application/json",
          ...reply.headers,
        };
        res.writeHead(reply.status ?? 200, headers);
        res.end(payload);
      };
      if (reply.delayMs) {
        const t = setTimeout(() => {
          timers.delete(t);
          if (!res.destroyed) answer();
        }, reply.delayMs);
        timers.add(t);
      } else answer();
    });
  };

  const server = opts.tls
    ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler)
    : http.createServer(handler);
  const onSocket = (s: Socket) => {
    connections += 1;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
  };
  // TCP level, so a TLS handshake the client aborts (untrusted cert) still counts.
  server.on("connection", onSocket);
  if (opts.tls) server.on("tlsClientError", () => {});
  server.on("clientError", (_e, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`,
    port,
    requests,
    get connections() {
      return connections;
    },
    script(...replies) {
      queue = replies;
    },
    reset() {
      requests.length = 0;
      queue = [];
      connections = 0;
      seen = 0;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const s of sockets) s.destroy();
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Header names as the client wrote them (for checking exact spelling). */
export function headerNames(req: RecordedRequest): string[] {
  return req.rawHeaders.filter((_, i) => i % 2 === 0);
}

/** A recorder for the file (or describe) it is called in: started before all, reset before each test, closed after all. */
export function useRestRecorder(set: (rec: RestRecorder) => void): void {
  let rec: RestRecorder | undefined;
  beforeAll(async () => {
    rec = await startRestRecorder();
    set(rec);
  });
  afterAll(async () => {
    await rec?.close();
  });
  beforeEach(() => rec?.reset());
}
