/**
 * An SMTP client driven line by line (a command, then its reply), for what a real client would never
 * send: commands out of order, cut connections, a relay's or the sandbox's refusals one by one.
 */
import net from "node:net";
import tls from "node:tls";

export class SmtpDialog {
  #socket: net.Socket;
  #buf = "";
  #waiters: Array<() => void> = [];
  closed = false;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    this.#attach();
  }

  #attach(): void {
    this.#socket.setEncoding("latin1");
    this.#socket.on("data", (d: string) => {
      this.#buf += d;
      this.#wake();
    });
    this.#socket.on("close", () => {
      this.closed = true;
      this.#wake();
    });
    this.#socket.on("error", () => {});
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  /** The server's 220 line. */
  greeting = "";

  static async connect(port: number, opts: { implicit?: boolean; ca?: string } = {}): Promise<SmtpDialog> {
    const socket = opts.implicit
      ? tls.connect({ host: "127.0.0.1", port, ca: opts.ca, servername: "localhost" })
      : net.connect({ host: "127.0.0.1", port });
    await new Promise<void>((resolve, reject) => {
      socket.once(opts.implicit ? "secureConnect" : "connect", () => resolve());
      socket.once("error", reject);
    });
    const d = new SmtpDialog(socket);
    d.greeting = await d.reply();
    return d;
  }

  /** The next complete reply ("250-..." lines then "250 ..."); "" when the server closed. */
  async reply(timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = /^(?:\d{3}-[^\n]*\n)*\d{3}(?: [^\n]*)?\n/.exec(this.#buf);
      if (m) {
        this.#buf = this.#buf.slice(m[0].length);
        return m[0].trimEnd();
      }
      if (this.closed) return "";
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SMTP reply within ${timeoutMs} ms (have ${JSON.stringify(this.#buf)})`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  write(data: string | Buffer): void {
    this.#socket.write(data);
  }

  async cmd(line: string): Promise<string> {
    this.write(`${line}\r\n`);
    return this.reply();
  }

  async starttls(ca: string): Promise<void> {
    const r = await this.cmd("STARTTLS");
    if (!r.startsWith("220")) throw new Error(`STARTTLS refused: ${r}`);
    this.#socket.removeAllListeners("data");
    this.#socket.removeAllListeners("close");
    const secure = tls.connect({ socket: this.#socket, ca, servername: "localhost" });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", () => resolve());
      secure.once("error", reject);
    });
    this.#socket = secure;
    this.#attach();
  }

  async login(user: string, key: string): Promise<string> {
    const r1 = await this.cmd("AUTH LOGIN");
    if (!r1.startsWith("334")) return r1;
    const r2 = await this.cmd(Buffer.from(user).toString("base64"));
    if (!r2.startsWith("334")) return r2;
    return this.cmd(Buffer.from(key).toString("base64"));
  }

  destroy(): void {
    this.#socket.destroy();
  }

  async quit(): Promise<void> {
    if (!this.closed) {
      this.write("QUIT\r\n");
      await this.reply().catch(() => "");
    }
    this.#socket.destroy();
  }
}
