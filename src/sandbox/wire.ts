/**
 * The MAIL FROM and RCPT TO arguments as the client wrote them. smtp-server
 * hands its handlers the address with A-label ("xn--") domains decoded to
 * Unicode and keeps no copy of the original, and it has no hook that sees a
 * command line, except its documented `logger` option, which is given every
 * command line ("C:" and the line, tagged with the connection's id, the
 * session's id) just before the command's handler runs, in the same tick.
 * So the logger keeps the last MAIL or RCPT line of each connection and the
 * handler takes it. Should a future smtp-server log otherwise, the address
 * falls back to the decoded one and the end-to-end test that sends to an IDN
 * domain fails.
 */
import type { SMTPServerAddress, SMTPServerOptions } from "smtp-server";

/** The envelope addresses exactly as sent, and their decoded forms where those differ. */
export interface WireEnvelope {
  envelope: { from: string; to: string[] };
  envelopeUnicode?: { from: string; to: string[] };
}

const localPart = (address: string) => {
  const at = address.lastIndexOf("@");
  return at < 0 ? address : address.slice(0, at);
};

/**
 * The mailbox inside the angle brackets of a MAIL or RCPT line; a source
 * route ("@relay:"), which RFC 5321 says to ignore, is dropped as smtp-server
 * drops it. undefined when the line is not of that shape.
 */
export function pathArgument(line: string): string | undefined {
  const colon = line.indexOf(":");
  if (colon < 0) return undefined;
  const path = line
    .slice(colon + 1)
    .trim()
    .split(/\s+/)[0];
  if (!path || !/^<[^<>]*>$/.test(path)) return undefined;
  return path.slice(1, -1).replace(/^@[^\s,:@]+(?:,@[^\s,:@]+)*:/, "");
}

export class WireRecorder {
  /** Connection id -> its last MAIL or RCPT line not yet taken. AUTH lines (secrets) are never kept. */
  readonly #lines = new Map<string, string>();
  readonly #sent = new WeakMap<SMTPServerAddress, string>();

  /** For smtp-server's `logger` option: everything but the command lines is dropped. */
  readonly logger: NonNullable<Exclude<SMTPServerOptions["logger"], boolean>> = {
    debug: (meta: { tnx?: unknown; cid?: unknown } | undefined, message: unknown, line: unknown) => {
      if (meta?.tnx !== "command" || message !== "C:" || typeof meta.cid !== "string" || typeof line !== "string")
        return;
      if (/^(?:MAIL|RCPT)\b/i.test(line)) this.#lines.set(meta.cid, line);
      else this.#lines.delete(meta.cid);
    },
    info: () => {},
    warn: () => {},
    error: () => {},
    trace: () => {},
    fatal: () => {},
  };

  /**
   * From onMailFrom/onRcptTo: remember the address as the client wrote it. A
   * line whose local part is not the parsed address's belongs to something
   * else and is not used.
   */
  take(sessionId: string, address: SMTPServerAddress): void {
    const line = this.#lines.get(sessionId);
    this.#lines.delete(sessionId);
    const sent = line === undefined ? undefined : pathArgument(line);
    if (sent !== undefined && localPart(sent) === localPart(address.address)) this.#sent.set(address, sent);
  }

  /** The connection is gone. */
  forget(sessionId: string): void {
    this.#lines.delete(sessionId);
  }

  /** The session's envelope as sent, with the decoded form beside it when any address differs. */
  envelopeOf(mailFrom: SMTPServerAddress | false, rcptTo: readonly SMTPServerAddress[]): WireEnvelope {
    const decoded = { from: mailFrom ? mailFrom.address : "", to: rcptTo.map((r) => r.address) };
    const envelope = {
      from: mailFrom ? (this.#sent.get(mailFrom) ?? mailFrom.address) : "",
      to: rcptTo.map((r) => this.#sent.get(r) ?? r.address),
    };
    const same = envelope.from === decoded.from && envelope.to.every((a, i) => a === decoded.to[i]);
    return same ? { envelope } : { envelope, envelopeUnicode: decoded };
  }
}
