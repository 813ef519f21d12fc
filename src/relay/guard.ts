/**
 * What keeps a relay listening on a network usable by the clients it is for: AUTH advertised only
 * once TLS is up (RFC 3207, RFC 4954: a client that sees it before sends its password in clear), a
 * few wrong passwords close the connection and each is logged for fail2ban, one address holds only
 * its share of the connections, and a session that has not logged in is cut after a short time
 * however busy it keeps itself (NOOP, RSET).
 */
import type { Server, Socket } from "node:net";
import type { SMTPServerSession } from "smtp-server";

/** Wrong passwords on one connection before it is closed with 421. */
export const AUTH_TRIES = 3;
/** How long a session has to log in (from its connection), when AUTH is required. */
export const LOGIN_DEADLINE_MS = 45_000;
/** How long repeated failures from one address are remembered, for the growing delay. */
const FAILURE_MEMORY_MS = 10 * 60_000;

export interface GuardOptions {
  /** AUTH is required (users are set). */
  auth: boolean;
  /** AUTH is hidden until STARTTLS (TLS is offered and the listen address is not loopback). */
  authAfterTls: boolean;
  /** Connections one client address may hold at once (undefined: no cap). */
  perAddress?: number;
  loginDeadlineMs?: number;
  /** The delay before a wrong password's answer grows by this much per recent failure from the address. */
  failureDelayStepMs?: number;
  /** Each wrong password: the client's address and the user name it gave (never the password). */
  onAuthFailed?(info: { address: string; user: string; closing: boolean }): void;
}

/** IPv4 written as IPv6 by a dual-stack socket ("::ffff:10.0.0.1") is that IPv4 address. */
const plainAddress = (a: string | undefined) => (a ?? "").replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "");

export class SessionGuard {
  readonly #opts: GuardOptions;
  readonly #perAddress = new Map<string, number>();
  readonly #counted = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #recent = new Map<string, number[]>();
  readonly #sockets = new Map<string, Socket>();
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(opts: GuardOptions) {
    this.#opts = opts;
  }

  /** Knows each raw socket by its peer, so that a session past its login deadline can be cut. */
  watch(server: Server): void {
    server.on("connection", (socket: Socket) => {
      const key = `${plainAddress(socket.remoteAddress)}:${socket.remotePort}`;
      this.#sockets.set(key, socket);
      socket.once("close", () => this.#sockets.delete(key));
    });
  }

  /** A new session: refused (421) past its address's share; AUTH hidden until TLS; its login deadline set. */
  connect(session: SMTPServerSession, disabled: readonly string[]): string | undefined {
    const address = plainAddress(session.remoteAddress);
    const n = this.#perAddress.get(address) ?? 0;
    if (this.#opts.perAddress !== undefined && n >= this.#opts.perAddress)
      return `4.7.0 Too many connections from ${address}, try again in a moment`;
    this.#perAddress.set(address, n + 1);
    this.#counted.add(session.id);
    if (this.#opts.authAfterTls) session.disabledCommands = [...disabled, "AUTH"];
    if (this.#opts.auth) {
      const key = `${address}:${session.remotePort}`;
      const timer = setTimeout(() => {
        if (!session.user) this.#sockets.get(key)?.destroy();
      }, this.#opts.loginDeadlineMs ?? LOGIN_DEADLINE_MS);
      timer.unref();
      this.#timers.set(session.id, timer);
    }
    return undefined;
  }

  /** TLS is up: AUTH may be offered now. */
  secured(session: SMTPServerSession, disabled: readonly string[]): void {
    if (this.#opts.authAfterTls) session.disabledCommands = [...disabled];
  }

  /** Logged in: no deadline any more. */
  authenticated(session: SMTPServerSession): void {
    clearTimeout(this.#timers.get(session.id));
    this.#timers.delete(session.id);
  }

  /**
   * A wrong password: logged, answered after a delay that grows with the address's recent
   * failures; resolves to whether the connection is to be closed now (421).
   */
  async failed(session: SMTPServerSession, user: string): Promise<boolean> {
    const address = plainAddress(session.remoteAddress);
    const tries = (this.#failures.get(session.id) ?? 0) + 1;
    this.#failures.set(session.id, tries);
    const now = Date.now();
    const recent = (this.#recent.get(address) ?? []).filter((t) => now - t < FAILURE_MEMORY_MS);
    recent.push(now);
    this.#recent.set(address, recent.slice(-50));
    const closing = tries >= AUTH_TRIES;
    this.#opts.onAuthFailed?.({ address, user, closing });
    const delay = Math.min((recent.length - 1) * (this.#opts.failureDelayStepMs ?? 1000), 5000);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay).unref());
    return closing;
  }

  close(session: SMTPServerSession): void {
    this.authenticated(session);
    this.#failures.delete(session.id);
    if (!this.#counted.delete(session.id)) return;
    const address = plainAddress(session.remoteAddress);
    const n = (this.#perAddress.get(address) ?? 1) - 1;
    if (n <= 0) this.#perAddress.delete(address);
    else this.#perAddress.set(address, n);
  }
}

/** A user name as the log line shows it: printable, no quote, bounded (it is the client's to choose). */
export function loggedUser(user: string): string {
  const one = user.replace(/[^\x21-\x7e]|"/g, "?");
  return one.length > 64 ? `${one.slice(0, 61)}...` : one;
}
