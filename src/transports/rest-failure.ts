/**
 * What a failed POST /send means for the message (rest.ts), from the error and
 * how far the request got: above all, whether it may have been sent.
 */
import { MailsendError, said } from "../core/errors.js";
import type { Say, Words } from "../core/setting-names.js";
import { connectError, isReset, speaksTls, TRUST_HINT } from "../net/errors.js";

/** How far one request got: what decides whether a failure may have sent the message. */
export interface Progress {
  /** The connection (and TLS) is up and the request is on it. */
  connected: boolean;
  /** The whole body has been handed to the connection. */
  sent: boolean;
  /** The answer's status line arrived. */
  answered: boolean;
}

export interface PostContext {
  url: URL;
  headers: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
  /** SendContext.answered. */
  answered?: () => void;
}

const handedOver = (p: Progress) => p.connected && p.sent;

function resendHint(ctx: PostContext): Words {
  return resendHintFor(ctx.headers["Idempotency-Key"]);
}

function resendHintFor(key: string | undefined): Words {
  return (s) =>
    `The message may have been sent. Check before sending again (resending with ${s.idempotencyKey(key)} is safe).`;
}

/**
 * A request made again after a kept-alive connection broke once the message was on it: the
 * service may have taken it then. This is that doubt; an answer to the repeat (which keeps its
 * own code, a 429 its Retry-After) carries it as its cause.
 */
export function brokenAfterSent(url: URL, key: string | undefined): MailsendError {
  return new MailsendError(
    "outcome_unknown",
    `the kept-alive connection to ${url.origin} broke after the message was sent`,
    { mayHaveBeenSent: true, hint: resendHintFor(key) },
  );
}

/** The repeat itself failed (no answer): however it failed, the outcome is unknown. */
export function afterResetFailure(e: MailsendError, url: URL, key: string | undefined): MailsendError {
  if (e.mayHaveBeenSent || e.code === "outcome_unknown") return e;
  const doubt = brokenAfterSent(url, key);
  return new MailsendError(
    "outcome_unknown",
    (s) => `${doubt.message}, and sending it again failed: ${said(e.messageWords, s.front)}`,
    { cause: e, mayHaveBeenSent: true, ...(doubt.hintWords ? { hint: doubt.hintWords } : {}) },
  );
}

/** The --timeout ran out: whether anything was sent depends on how far the request got. */
export function timeoutFailure(p: Progress, ctx: PostContext): MailsendError {
  const { url, timeoutMs } = ctx;
  return handedOver(p)
    ? new MailsendError(
        "outcome_unknown",
        `no answer from ${url.origin} within ${timeoutMs / 1000} s after the message was sent`,
        {
          mayHaveBeenSent: true,
          hint: resendHint(ctx),
        },
      )
    : new MailsendError("timeout", `${url.origin} did not respond within ${timeoutMs / 1000} s; nothing was sent`, {
        hint: (s) => `Check the network, or raise ${s.flag("timeout")}.`,
      });
}

/**
 * The start of what a server said when its answer was not HTTP at all (an
 * SMTP greeting, say), as printable text; "" when unknown; undefined when the
 * error is not an HTTP parse error.
 */
function notHttpAnswer(e: unknown): string | undefined {
  const err = e as { code?: unknown; rawPacket?: unknown };
  if (!(typeof err?.code === "string" && err.code.startsWith("HPE_"))) return undefined;
  const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket : undefined;
  if (!raw) return "";
  // HTTP-looking answers that merely broke the parser are not this case.
  if (/^HTTP\//.test(raw.toString("latin1", 0, 5))) return undefined;
  return raw
    .toString("latin1", 0, 80)
    .split(/\r?\n/)[0]!
    .replace(/[^\x20-\x7e]/g, "?")
    .trim();
}

/** What a failed request means for the message, from the error and how far the request got. */
export async function failureOf(e: unknown, p: Progress, ctx: PostContext): Promise<MailsendError> {
  const { url } = ctx;
  if (e instanceof MailsendError) return e;
  if (ctx.signal?.aborted) return interruptedFailure(e, p, ctx);
  const notHttp = notHttpAnswer(e);
  if (notHttp !== undefined) return notHttpFailure(e, notHttp, url);
  const endpoint = {
    label: url.origin,
    setting: (s: Say) => s.either("baseUrl"),
    tlsHint: (s: Say) =>
      `Check the scheme of ${s.either("baseUrl")}: https:// for a TLS port, http:// for a plain one.`,
  };
  const early = connectError(e, endpoint, TRUST_HINT);
  if (early && !handedOver(p)) return early;
  if (isReset(e) || early) return brokenFailure(e, p, ctx);
  return new MailsendError("connection_failed", `request to ${url.origin} failed: ${(e as Error).message}`, {
    cause: e,
  });
}

/** Interrupted by the caller: whether it was sent depends only on how far it got. */
function interruptedFailure(e: unknown, p: Progress, ctx: PostContext): MailsendError {
  const { url } = ctx;
  return handedOver(p)
    ? new MailsendError(
        "outcome_unknown",
        `interrupted after the message was sent to ${url.origin}, before the answer`,
        {
          cause: e,
          mayHaveBeenSent: true,
          hint: resendHint(ctx),
        },
      )
    : new MailsendError("temporary_failure", `interrupted before the message was sent to ${url.origin}`, {
        cause: e,
        hint: "Nothing was sent; it is safe to try again.",
      });
}

/** The server answered, but not in HTTP (`heard`: the start of what it said, from notHttpAnswer). */
function notHttpFailure(e: unknown, heard: string, url: URL): MailsendError {
  return new MailsendError(
    "config_invalid",
    `${url.origin} did not answer with HTTP${heard ? ` (it said ${JSON.stringify(heard)})` : ""}`,
    {
      cause: e,
      hint: /^\d{3}[ -]/.test(heard)
        ? (s) =>
            `That looks like an SMTP server's greeting: ${s.either("baseUrl")} must be the service's HTTP(S) address; for SMTP use ${s.value("transport", "smtp")} with ${s.pair("smtpHost", "smtpPort", false, "/")}.`
        : (s) => `Check ${s.either("baseUrl")}: it must be the service's HTTP(S) address.`,
    },
  );
}

/** The connection broke: nothing was sent before the hand-over; after it, the outcome is unknown. */
async function brokenFailure(e: unknown, p: Progress, ctx: PostContext): Promise<MailsendError> {
  const { url, timeoutMs } = ctx;
  const unknown = () =>
    new MailsendError(
      "outcome_unknown",
      `the connection to ${url.origin} broke after the message was sent (${(e as Error).message})`,
      {
        cause: e,
        mayHaveBeenSent: true,
        hint: resendHint(ctx),
      },
    );
  if (handedOver(p) && !p.answered && url.protocol === "http:") {
    // A TLS port drops a plain-text request without a byte of answer, exactly
    // like a server that died mid-request. If the port speaks TLS, the request
    // cannot have been understood: that is a scheme mismatch, and nothing was sent.
    return (await speaksTls(url.hostname, Number(url.port || 80), Math.min(timeoutMs, 3000)))
      ? new MailsendError("tls_mismatch", (s) => `${url.origin} speaks TLS, but ${s.flag("baseUrl")} says http://`, {
          cause: e,
          hint: (s) => `Use https:// in ${s.either("baseUrl")}. Nothing was sent.`,
        })
      : unknown();
  }
  return handedOver(p)
    ? unknown()
    : new MailsendError(
        "connection_failed",
        `the connection to ${url.origin} broke before the message was sent (${(e as Error).message})`,
        {
          cause: e,
          hint: "Nothing was sent; it is safe to try again.",
        },
      );
}
