/**
 * An HTTP/1.1 peer on a bare TCP server, for tests that watch the wire itself: when each
 * connection came, every byte it was sent and when the first came, and when it was answered. A
 * whole request (headers plus Content-Length bytes) is answered 200 with a message id; `hangUp(n)`
 * decides, per connection (from 0), to close it after that many ms without reading anything.
 */
import { createServer, type Server, type Socket } from "node:net";
import { until } from "./until.js";

export interface PeerConnection {
  socket: Socket;
  connectedAt: number;
  firstByteAt?: number;
  answeredAt?: number;
  bytes: Buffer;
  /** The client ended or closed it. */
  closedByClient: boolean;
}

export interface RawPeer {
  url: string;
  conns: PeerConnection[];
  /** The POST requests every connection carried, in all. */
  posts(): number;
  /** Until `n` connections came; fails after 2 s. */
  connected(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startRawPeer(opts: { hangUp?: (index: number) => number | undefined } = {}): Promise<RawPeer> {
  const conns: PeerConnection[] = [];
  const server: Server = createServer((socket) => {
    const c: PeerConnection = { socket, connectedAt: Date.now(), bytes: Buffer.alloc(0), closedByClient: false };
    const index = conns.push(c) - 1;
    socket.on("error", () => {});
    socket.on("end", () => (c.closedByClient = true));
    socket.on("close", () => (c.closedByClient = true));
    const after = opts.hangUp?.(index);
    if (after !== undefined) {
      if (after <= 0) socket.destroy();
      else setTimeout(() => socket.end(), after);
      return;
    }
    socket.on("data", (d: Buffer) => {
      c.firstByteAt ??= Date.now();
      c.bytes = Buffer.concat([c.bytes, d]);
      const text = c.bytes.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? -1);
      if (c.answeredAt === undefined && end >= 0 && length >= 0 && c.bytes.length >= end + 4 + length) {
        const body = JSON.stringify({ success: true, message_id: `id-${index}` });
        c.answeredAt = Date.now();
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        );
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    conns,
    posts: () => conns.reduce((n, c) => n + c.bytes.toString("latin1").split("POST /send").length - 1, 0),
    async connected(n) {
      await until(() => conns.length >= n, { what: `${n} connection(s)`, timeoutMs: 2000, everyMs: 10 });
    },
    async close() {
      for (const c of conns) c.socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
