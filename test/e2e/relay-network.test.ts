/**
 * The relay as it stands on a network (--listen beyond loopback, AUTH and STARTTLS): AUTH is
 * advertised only once TLS is up, a third wrong password closes the connection with 421 and each
 * is reported with the address and user (never the password), one address holds only its share
 * of the connections, and a session that does not log in is cut however many NOOPs it sends.
 * The relay in this process on 127.0.0.1, treated as on a network; real clients on 127.0.0.2.
 */
import { connect, type Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword, RelayUsers } from "../../src/relay/auth.js";
import { startRelay, type Relay } from "../../src/relay/server.js";
import type { TlsMaterial } from "../../src/sandbox/tls.js";
import { scratch } from "../helpers/tmp.js";

const s = scratch("mailsend-relay-network-");
let tls: TlsMaterial;
let users: RelayUsers;
beforeAll(async () => {
  tls = await s.tls();
  users = RelayUsers.parse(`app:${await hashPassword("right-password-7")}\n`, "users");
});
afterAll(() => s.remove());

/** A line-at-a-time SMTP client from 127.0.0.2 that can go TLS. */
class Client {
  private buf = "";
  private waiting: Array<(l: string) => void> = [];
  closed: Promise<void>;
  constructor(private sock: Socket | TLSSocket) {
    this.closed = new Promise((r) => sock.once("close", () => r()));
    this.listen(sock);
  }
  private listen(sock: Socket | TLSSocket) {
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      this.buf += d;
      for (let i = this.buf.indexOf("\r\n"); i >= 0 && this.waiting.length; i = this.buf.indexOf("\r\n")) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 2);
        this.waiting.shift()!(line);
      }
    });
    sock.on("error", () => {});
  }
  static open(port: number): Promise<Client> {
    return new Promise((resolve, reject) => {
      const sock = connect({ host: "127.0.0.1", port, localAddress: "127.0.0.2" }, () => resolve(new Client(sock)));
      sock.once("error", reject);
    });
  }
  line(timeoutMs = 10_000): Promise<string> {
    const i = this.buf.indexOf("\r\n");
    if (i >= 0) {
      const l = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 2);
      return Promise.resolve(l);
    }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no reply")), timeoutMs);
      const done = (l: string) => {
        clearTimeout(t);
        resolve(l);
      };
      this.waiting.push(done);
      void this.closed.then(() => {
        const at = this.waiting.indexOf(done);
        if (at >= 0) {
          this.waiting.splice(at, 1);
          clearTimeout(t);
          resolve("(closed)");
        }
      });
    });
  }
  /** Every line of a reply (multi-line "250-" included), joined. */
  async reply(): Promise<string> {
    const lines = [await this.line()];
    while (/^\d{3}-/.test(lines.at(-1)!)) lines.push(await this.line());
    return lines.join("\n");
  }
  async cmd(c: string): Promise<string> {
    this.sock.write(`${c}\r\n`);
    return this.reply();
  }
  async starttls(): Promise<void> {
    expect(await this.cmd("STARTTLS")).toMatch(/^220/);
    const plain = this.sock as Socket;
    plain.removeAllListeners("data");
    this.sock = await new Promise<TLSSocket>((resolve, reject) => {
      const t = tlsConnect({ socket: plain, ca: tls.ca, servername: "localhost" }, () => resolve(t));
      t.once("error", reject);
    });
    this.closed = new Promise((r) => this.sock.once("close", () => r()));
    this.listen(this.sock);
  }
  end() {
    this.sock.destroy();
  }
}

const plainAuth = (user: string, pass: string) => `AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString("base64")}`;

async function relay(extra: Partial<Parameters<typeof startRelay>[0]> = {}) {
  const failures: Array<{ address: string; user: string; closing: boolean }> = [];
  const r: Relay = await startRelay({
    host: "127.0.0.1",
    port: 0,
    network: true,
    maxSize: 1_000_000,
    maxClients: 8,
    users,
    tls: { key: tls.key, cert: tls.cert },
    validate: async () => {},
    store: async () => "id0000000000000000",
    onAuthFailed: (f) => failures.push(f),
    failureDelayStepMs: 50,
    ...extra,
  });
  return { r, failures };
}

describe("the relay on a network", () => {
  it("advertises AUTH only after STARTTLS, and takes no MAIL before AUTH", async () => {
    const { r } = await relay();
    try {
      const c = await Client.open(r.port);
      expect(await c.reply()).toMatch(/^220 /);
      const before = await c.cmd("EHLO client.example");
      expect(before).toContain("STARTTLS");
      expect(before).not.toMatch(/AUTH/);
      expect(await c.cmd("MAIL FROM:<a@example.com>")).toMatch(/^530 /);
      await c.starttls();
      const after = await c.cmd("EHLO client.example");
      expect(after).toMatch(/AUTH PLAIN LOGIN/);
      expect(await c.cmd("MAIL FROM:<a@example.com>")).toMatch(/^530 /);
      expect(await c.cmd(plainAuth("app", "right-password-7"))).toMatch(/^235 /);
      expect(await c.cmd("MAIL FROM:<a@example.com>")).toMatch(/^250 /);
      c.end();
    } finally {
      await r.close();
    }
  });

  it("a third wrong password closes the connection with 421; each is reported with address and user, never the password", async () => {
    const { r, failures } = await relay();
    try {
      const c = await Client.open(r.port);
      await c.reply();
      await c.cmd("EHLO client.example");
      await c.starttls();
      await c.cmd("EHLO client.example");
      expect(await c.cmd(plainAuth("app", "wrong-one-1"))).toMatch(/^535 /);
      expect(await c.cmd(plainAuth("app", "wrong-one-2"))).toMatch(/^535 /);
      expect(await c.cmd(plainAuth("mallory", "wrong-one-3"))).toMatch(/^421 /);
      await c.closed;
      expect(failures).toEqual([
        { address: "127.0.0.2", user: "app", closing: false },
        { address: "127.0.0.2", user: "app", closing: false },
        { address: "127.0.0.2", user: "mallory", closing: true },
      ]);
      expect(JSON.stringify(failures)).not.toMatch(/wrong-one/);
    } finally {
      await r.close();
    }
  });

  it("one address holds a quarter of --max-clients; past it 421, the others still get in", async () => {
    const { r } = await relay({ maxClients: 8 });
    const open: Client[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const c = await Client.open(r.port);
        expect(await c.reply()).toMatch(/^220 /);
        open.push(c);
      }
      const third = await Client.open(r.port);
      expect(await third.reply()).toMatch(/^421 .*Too many connections from 127\.0\.0\.2/);
      // From another address (127.0.0.1): served.
      const other = await new Promise<Socket>((resolve) => {
        const sock = connect({ host: "127.0.0.1", port: r.port, localAddress: "127.0.0.1" }, () => resolve(sock));
      });
      const greeting = await new Promise<string>((resolve) => other.once("data", (d) => resolve(d.toString())));
      expect(greeting).toMatch(/^220 /);
      other.destroy();
      // One closes: its place is free again.
      open.shift()!.end();
      await new Promise((res) => setTimeout(res, 200));
      const again = await Client.open(r.port);
      expect(await again.reply()).toMatch(/^220 /);
      open.push(again);
    } finally {
      for (const c of open) c.end();
      await r.close();
    }
  });

  it("a session that does not log in is cut at its deadline, NOOPs or not", async () => {
    const { r } = await relay({ loginDeadlineMs: 1_500 });
    try {
      const c = await Client.open(r.port);
      await c.reply();
      await c.cmd("EHLO client.example");
      const started = Date.now();
      for (let i = 0; i < 100 && Date.now() - started < 5_000; i++) {
        const got = await c.cmd("NOOP").catch(() => "(closed)");
        if (got === "(closed)") break;
        await new Promise((res) => setTimeout(res, 100));
      }
      await c.closed;
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      await r.close();
    }
  });
});

describe("mailsend relay's log of a wrong password", () => {
  it("is one line, without -v, that the documented fail2ban filter matches, never the password", async () => {
    const { execa } = await import("execa");
    const { baseEnv, ROOT, mailsendCommand } = await import("../helpers/cli.js");
    const { readFileSync } = await import("node:fs");
    const authFile = s.file("relay-users", `app:${await hashPassword("right-password-7")}\n`);
    const child = execa(
      ...mailsendCommand(["relay", "--listen", "127.0.0.1:0", "--auth-file", authFile, "--no-deliver"]),
      {
        env: {
          ...baseEnv(),
          MAILSEND_STATE_DIR: `${s.dir}/state`,
          MAILSEND_API_KEY: "msk_unused_key_123456",
          MAILSEND_BASE_URL: "http://127.0.0.1:9",
        },
        extendEnv: false,
        cwd: ROOT,
        reject: false,
        timeout: 60_000,
      },
    );
    try {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      let err = "";
      child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
      for (let i = 0; i < 200 && !/listening on 127\.0\.0\.1:\d+/.test(out); i++)
        await new Promise((r) => setTimeout(r, 50));
      const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(out)![1]);
      const c = await Client.open(port);
      await c.reply();
      await c.cmd("EHLO client.example");
      expect(await c.cmd(plainAuth("grafana", "wrong-password-9"))).toMatch(/^535 /);
      c.end();
      for (let i = 0; i < 100 && !err.includes("authentication failed"); i++)
        await new Promise((r) => setTimeout(r, 50));
      // The filter of docs/sendmail.md, with fail2ban's <HOST> as an address.
      const doc = readFileSync(new URL("../../docs/sendmail.md", import.meta.url), "utf8");
      const failregex = /failregex = (.*)\n/.exec(doc)![1]!.replace("<HOST>", "(?<host>[\\d.:a-f]+)");
      const line = err.split("\n").find((l) => l.includes("authentication failed"))!;
      expect(new RegExp(failregex).exec(line)?.groups?.host, line).toBe("127.0.0.2");
      expect(line).toContain('user "grafana"');
      expect(err + out).not.toContain("wrong-password-9");
    } finally {
      child.kill("SIGTERM");
      await child;
    }
  });
});
