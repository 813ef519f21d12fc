/** `--listen host:port` and whether that address is this machine alone. */
import { isIP } from "node:net";
import { MailsendError } from "../core/errors.js";

export interface ListenAddress {
  host: string;
  port: number;
}

export const DEFAULT_LISTEN: ListenAddress = { host: "127.0.0.1", port: 2525 };

/** "127.0.0.1:2525", "[::1]:2525", "localhost:2525", "0.0.0.0:25"; a bare port means 127.0.0.1. */
export function parseListen(spec: string): ListenAddress {
  const bad = (why: string) =>
    new MailsendError("usage", `--listen ${JSON.stringify(spec)}: ${why}`, {
      hint: "Give host:port, e.g. --listen 127.0.0.1:2525 or --listen [::1]:2525.",
    });
  let host: string;
  let port: string;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(spec);
  if (v6) {
    host = v6[1]!;
    port = v6[2]!;
    if (isIP(host) !== 6) throw bad(`${host} is not an IPv6 address`);
  } else if (/^\d+$/.test(spec)) {
    host = DEFAULT_LISTEN.host;
    port = spec;
  } else {
    const colon = spec.lastIndexOf(":");
    if (colon <= 0) throw bad("no port (host:port)");
    host = spec.slice(0, colon);
    port = spec.slice(colon + 1);
    if (host.includes(":")) throw bad("write an IPv6 address in brackets: [::1]:2525");
    if (!/^\d+$/.test(port)) throw bad("the port is not a number");
  }
  const n = Number(port);
  if (n > 65535) throw bad("the port must be from 0 to 65535");
  return { host, port: n };
}

/** Only this machine can connect: 127.0.0.0/8, ::1, ::ffff:127.x.y.z, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  const v4 = /^(?:::ffff:)?(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(h);
  return v4 !== null && v4[1] === "127";
}

/** host:port as written in a URL: an IPv6 address in brackets. */
export function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}
