/**
 * Who may talk to the sandbox's HTTP port.
 *
 * On loopback, anyone on this machine may (as with any local dev server),
 * but only by the sandbox's own name: a web page that re-points its dotted
 * domain at 127.0.0.1 (DNS rebinding) would otherwise read stored mail and
 * change faults from the user's browser. So every route checks Host.
 *
 * Bound beyond loopback (--host 0.0.0.0 or an interface address), anyone who
 * can reach the port could: the control API (/_sandbox/*) and the web inbox
 * then need the sandbox's token (printed once at start), as
 * `Authorization: Bearer <token>` or, for a browser, a cookie set by opening
 * the inbox once with `?token=<token>`. POST /send needs an API key anyway.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { hostAllowed } from "./web.js";

export const TOKEN_COOKIE = "mailsend_sandbox_token";

/** Whether binding to `host` keeps the sandbox on this machine. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

export function newToken(): string {
  return `sbt_${randomBytes(24).toString("base64url")}`;
}

function same(a: string, b: string): boolean {
  const x = createHash("sha256").update(a).digest();
  const y = createHash("sha256").update(b).digest();
  return timingSafeEqual(x, y);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export interface AccessOptions {
  /** The address the sandbox listens on (--host). */
  host: string;
  /** Required beyond loopback; none on loopback. */
  token?: string;
}

/**
 * The check every request passes first. Returns true when it answered the
 * request itself (refused it, or set the token cookie and redirected).
 */
export function createAccessGate(
  opts: AccessOptions,
): (req: IncomingMessage, res: ServerResponse, path: string) => boolean {
  const own = opts.host.toLowerCase().replace(/^\[|\]$/g, "");
  return (req, res, path) => {
    const token = opts.token;
    if (token && path !== "/send") {
      if (carriesToken(req, token)) return false;
      if (acceptTokenLink(req, res, path, token)) return true;
      refuse(
        res,
        401,
        "token_required",
        "this sandbox listens beyond loopback: its control API and inbox need the token it printed at start (Authorization: Bearer <token>, or open the inbox once with ?token=<token>)",
        {
          "WWW-Authenticate": 'Bearer realm="mailsend sandbox"',
        },
      );
      return true;
    }
    // With the token (or on /send, which needs a key) a foreign Host is no rebinding risk:
    // a page cannot know either. Without one, only the sandbox's own names are answered.
    if (token) return false;
    if (namesSandbox(req.headers.host, own)) return false;
    refuse(
      res,
      403,
      "host_not_allowed",
      "the sandbox answers only to localhost, IP addresses, single-label host names and its --host (DNS rebinding protection)",
    );
    return true;
  };
}

/** Whether a Host header names the sandbox: one of the names any sandbox answers to, or its own --host. */
function namesSandbox(header: string | undefined, own: string): boolean {
  if (hostAllowed(header)) return true;
  const name = (header ?? "")
    .toLowerCase()
    .replace(/:\d+$/, "")
    .replace(/^\[|\]$/g, "");
  return own !== "0.0.0.0" && own !== "::" && own !== "" && name === own;
}

/** Whether the request carries the token: as a Bearer header, or else as the cookie. */
function carriesToken(req: IncomingMessage, token: string): boolean {
  const bearer = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  if (bearer !== undefined) return same(bearer, token);
  const c = cookieValue(req.headers.cookie, TOKEN_COOKIE);
  return c !== undefined && same(c, token);
}

/**
 * The browser's way in: the inbox opened once with ?token=..., which becomes a cookie, the
 * address then reloaded without it. Returns true when it answered so.
 */
function acceptTokenLink(req: IncomingMessage, res: ServerResponse, path: string, token: string): boolean {
  const given = new URL(req.url ?? "/", "http://sandbox").searchParams.get("token");
  if (given === null || (req.method !== "GET" && req.method !== "HEAD") || path.startsWith("/_sandbox/")) return false;
  if (!same(given, token)) return false;
  const clean = new URL(req.url ?? "/", "http://sandbox");
  clean.searchParams.delete("token");
  res.writeHead(303, {
    Location: `${clean.pathname}${clean.search}`,
    "Set-Cookie": `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`,
    "Cache-Control": "no-store",
    "Content-Length": 0,
  });
  res.end();
  return true;
}

/** A refusal as the service words one: JSON, never cached. */
function refuse(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): void {
  const body = JSON.stringify({ success: false, error: { code, message } });
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    "Cache-Control": "no-store",
    ...extra,
  });
  res.end(body);
}
