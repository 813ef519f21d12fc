/**
 * `mailsend doctor` as data: each check of the configuration, the local
 * rate-limit state, the REST endpoint and the SMTP server, in a fixed order.
 * The CLI prints them; the first failure's exit class is the exit code.
 *
 * No mail is sent. The REST key check is a POST /send the service must
 * refuse as invalid; it may count as one request against the service's
 * limit, so it takes a slot of the local budget like any send. The SMTP
 * check stops after AUTH (a request there is one DATA).
 */
import { createHash } from "node:crypto";
import type { RestConfig, SmtpConfig, TransportConfig } from "../core/config.js";
import { MailsendError, toMailsendError, type ErrorCode } from "../core/errors.js";
import { makeRedactor } from "../core/redact.js";
import type { TransportName } from "../core/transport.js";
import {
  channelConfig,
  cliLayers,
  defaultTransportOf,
  keyOf,
  notConfigured,
  transportOf,
  type ConnectionFlags,
} from "../settings/resolve.js";
import { configSource, loadSettings, type ActiveProfile } from "../settings/profile.js";
import type { InputStreams } from "../core/read.js";
import { openSlotStore } from "../limits/budget.js";
import { resolveLimits } from "../settings/budget.js";
import { FileSlotStore } from "../limits/file-store.js";
import type { RedisConfig } from "../limits/redis-config.js";
import { RedisSlotStore, type RedisProbe } from "../limits/redis-store.js";
import type { Limits } from "../limits/sliding-log.js";
import type { SlotStore } from "../limits/store.js";
import { proxyAnswerError } from "../transports/proxy.js";
import { statusError } from "../transports/rest.js";
import { postEmptySend, reachRest, sendUrlOf, type KeyAnswer } from "./rest-probe.js";
import { lookAtOutbox } from "./outbox-check.js";
import { SETUP_REPLY } from "../relay/replies.js";
import { probeSmtp } from "./smtp-probe.js";
import { certificateSummary, trustFailure, type CertificateInfo } from "./tls-info.js";
import type { Env } from "../core/env.js";

export const CHECK_NAMES = [
  "config.profile",
  "config.key",
  "config.transport",
  "config.rest",
  "config.smtp",
  "ratelimit",
  "outbox",
  "rest.connect",
  "rest.key",
  "smtp.connect",
  "smtp.auth",
] as const;

export type CheckName = (typeof CHECK_NAMES)[number];

export interface CheckResult {
  name: CheckName;
  /** True for a pass and for a skip. */
  ok: boolean;
  skipped?: boolean;
  detail: string;
  /** What to do: always on a failure, sometimes a note on a pass. */
  hint?: string;
  /** On a failure: the exit code of its class (the sysexits table in core/errors.ts). */
  exit?: number;
  code?: ErrorCode;
  certificate?: CertificateInfo;
  /** On a failure, the error itself (for the CLI's error report; not serialised). */
  error?: MailsendError;
}

export interface DoctorReport {
  ok: boolean;
  checks: CheckResult[];
  /** The first failure, whose exit class is doctor's exit code. */
  firstFailure?: CheckResult;
}

export interface DoctorFlags extends ConnectionFlags {
  profile?: string;
  rateLimit?: number;
}

export interface DoctorOptions extends InputStreams {
  env: Env;
  /** Called with each result as soon as it is known (for printing as it goes). */
  onCheck?: (r: CheckResult) => void;
}

/** A short, non-reversible name for a key: enough to tell two keys apart, nothing to log in with. */
export function keyFingerprint(key: string): string {
  return `sha256:${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;
}

/** Where keyOf found the key, in its order. */
function keySource(flags: ConnectionFlags, env: Env, profile: ActiveProfile | undefined): string {
  if (flags.apiKeyStdin) return "from stdin (--api-key-stdin)";
  if (env.MAILSEND_API_KEY) return "from MAILSEND_API_KEY";
  if (env.MAILSEND_API_KEY_FILE) return `from MAILSEND_API_KEY_FILE (${env.MAILSEND_API_KEY_FILE})`;
  if (profile) return `where profile "${profile.name}" says`;
  return "found";
}

function transportSource(flags: ConnectionFlags, env: Env): string {
  if (flags.transport) return "--transport";
  if (env.MAILSEND_TRANSPORT) return "MAILSEND_TRANSPORT";
  return "the default";
}

/**
 * With REST alone, mail that other programs hand over goes out only when the REST request
 * carries it whole; what does not is in src/outbox/choose.ts (restLossOfRaw, with
 * transports/choose.ts's restLoss), and fails with 78 (config_missing) there and then.
 */
export const REST_ONLY_WARNING =
  "Warning: mail from other programs through `mailsend sendmail` or `mailsend relay` goes over REST only when the REST request carries it whole. " +
  "A message with a plain-text body (text only, or a text part beside the HTML), Cc or Bcc, recipients not in its To header, no Subject, " +
  "inline images, an attached message, a calendar part or a header given twice needs SMTP: sendmail refuses it with exit 78, " +
  `and the relay refuses it at the end of DATA with ${SETUP_REPLY.code} ${SETUP_REPLY.status} (nothing is queued; the app keeps it and tries again). Most cron and system mail is text only. ` +
  "Set --smtp-host / MAILSEND_SMTP_HOST so that such mail goes over SMTP unchanged.";

/** Slot ids of doctor's own requests, recognisable in a state file. */
function slotId(): string {
  return `doctor-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Failures that happened before the request reached the service: its slot was not used. */
const NEVER_REACHED: readonly ErrorCode[] = [
  "connection_failed",
  "timeout",
  "tls_mismatch",
  "tls_untrusted",
  "config_invalid",
  "config_missing",
];

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[?::1\]?)$/i;

function describeTls(c: CertificateInfo, insecure: boolean): string {
  const trust = c.trusted ? "" : insecure ? ` — NOT trusted (${c.trustError}), accepted because of --insecure` : "";
  return `${c.protocol ? `${c.protocol}, ` : ""}${certificateSummary(c)}${trust}`;
}

function expiryNote(c: CertificateInfo | undefined): string | undefined {
  if (!c || c.daysLeft >= 21) return undefined;
  return c.daysLeft < 0
    ? "The certificate has expired."
    : `The certificate expires in ${c.daysLeft} days: make sure it is renewed.`;
}

function rateHeaders(headers: Record<string, string | string[] | undefined>): string {
  const limit = headers["ratelimit-limit"];
  const remaining = headers["ratelimit-remaining"];
  return typeof limit === "string" && typeof remaining === "string"
    ? `; the service reports ${remaining} of ${limit} requests left in its window`
    : "";
}

/** The checks as they are made: each cleaned of the key and handed to onCheck at once. */
class Recorder {
  readonly checks: CheckResult[] = [];
  redact: (s: string) => string = (s) => s;

  constructor(private readonly onCheck: ((r: CheckResult) => void) | undefined) {}

  private add(r: CheckResult): CheckResult {
    // Servers echo things back: nothing leaves doctor with the key in it.
    const clean: CheckResult = {
      ...r,
      detail: this.redact(r.detail),
      ...(r.hint !== undefined ? { hint: this.redact(r.hint) } : {}),
    };
    this.checks.push(clean);
    this.onCheck?.(clean);
    return clean;
  }

  pass = (name: CheckName, detail: string, extra: Partial<CheckResult> = {}) =>
    this.add({ name, ok: true, detail, ...extra });
  skip = (name: CheckName, detail: string, hint?: string) =>
    this.add({ name, ok: true, skipped: true, detail, ...(hint ? { hint } : {}) });
  fail = (name: CheckName, e: unknown, extra: Partial<CheckResult> = {}) => {
    const err = toMailsendError(e);
    return this.add({
      name,
      ok: false,
      detail: err.message,
      ...(err.hint ? { hint: err.hint } : {}),
      exit: err.exitCode,
      code: err.code,
      error: err,
      ...extra,
    });
  };
}

/** What the configuration checks found: the settings the later checks use. */
interface Found {
  env: Env;
  profile: ActiveProfile | undefined;
  key: string | undefined;
  selected: TransportName | undefined;
}

type Resolved = TransportConfig | MailsendError | "absent";

export async function runDoctor(flags: DoctorFlags, opts: DoctorOptions): Promise<DoctorReport> {
  const rec = new Recorder(opts.onCheck);
  const found = await configChecks(flags, opts, rec);
  const { env, key } = found;
  const restResolved = resolveChannel(flags, found, "rest");
  const rest = restConfigCheck(restResolved, found, rec);
  const smtpResolved = resolveChannel(flags, found, "smtp");
  const smtp = smtpConfigCheck(smtpResolved, rest, found, rec);
  const { store, limits } = await budgetCheck(flags, env, key, rec);
  const { pass, fail } = rec;
  // --- the outbox (sendmail, send --queue, the relay) ----------------------
  try {
    const look = await lookAtOutbox(env);
    pass("outbox", look.detail, look.hint ? { hint: look.hint } : {});
  } catch (e) {
    fail("outbox", e);
  }

  try {
    await restChecks(rest, restResolved, key, rec, store, limits);
    await smtpChecks(smtp, smtpResolved, key, rec);
  } finally {
    await store?.close().catch(() => {});
  }

  const firstFailure = rec.checks.find((r) => !r.ok);
  return { ok: firstFailure === undefined, checks: rec.checks, ...(firstFailure ? { firstFailure } : {}) };
}

/** The profile, the key and the transport. */
async function configChecks(flags: DoctorFlags, opts: DoctorOptions, rec: Recorder): Promise<Found> {
  const { pass, skip, fail } = rec;
  let env = opts.env;
  // --- configuration -------------------------------------------------------
  // flags > environment > profile > defaults, as for send: the profile is layered under the environment.
  let profile: ActiveProfile | undefined;
  try {
    const settings = loadSettings(flags.profile, opts.env);
    env = settings.env;
    profile = settings.profile;
    // Which file: the system's is read only by a user with none of their own, which may surprise.
    const system = " (the system's config file: this user has none of its own)";
    if (profile)
      pass("config.profile", `profile "${profile.name}" from ${profile.file}${profile.system ? system : ""}`);
    else {
      const source = configSource(opts.env);
      skip("config.profile", `no profile in use (config file: ${source.path}${source.system ? system : ""})`);
    }
  } catch (e) {
    fail("config.profile", e);
  }

  let key: string | undefined;
  try {
    key = await keyOf(cliLayers(flags, env, profile), opts);
    rec.redact = makeRedactor(key, flags.smtpUser ?? env.MAILSEND_SMTP_USER);
    pass(
      "config.key",
      `${keySource(flags, env, profile)}: ${key.length} characters, fingerprint ${keyFingerprint(key)}`,
    );
  } catch (e) {
    fail("config.key", e);
  }

  let selected: TransportName | undefined;
  try {
    const layers = cliLayers(flags, env);
    const source = transportSource(flags, env);
    // Named, doctor checks it as the selected one; unnamed, it is send's default (auto with an SMTP host).
    const name = source === "the default" ? defaultTransportOf(layers, true) : transportOf(layers, false);
    selected = name === "auto" ? undefined : name;
    pass(
      "config.transport",
      name === "auto"
        ? "auto (from the default, as an SMTP host is configured: send and batch choose per message, REST when it carries the message whole, else SMTP); both transports are checked when both are configured"
        : `${name} (from ${source}); both transports are checked when both are configured`,
    );
  } catch (e) {
    fail("config.transport", e);
  }

  return { env, profile, key, selected };
}

/** A channel's settings, checked without the key (config.key said what is wrong with it), then given it. */
function resolveChannel(flags: DoctorFlags, found: Found, t: TransportName): Resolved {
  try {
    return { ...channelConfig(cliLayers(flags, found.env, found.profile), t, ""), apiKey: found.key ?? "" };
  } catch (e) {
    const err = toMailsendError(e);
    return notConfigured(err) && found.selected !== t ? "absent" : err;
  }
}

const chosen = (found: Found, t: TransportName) => (found.selected === t ? " (the selected transport)" : "");

function restConfigCheck(restResolved: Resolved, found: Found, rec: Recorder): RestConfig | undefined {
  const { pass, skip, fail } = rec;
  let rest: RestConfig | undefined;
  if (restResolved === "absent") {
    skip(
      "config.rest",
      "REST is not configured",
      "Optional: set --base-url / MAILSEND_BASE_URL to check the REST endpoint too.",
    );
  } else if (restResolved instanceof MailsendError) {
    fail("config.rest", restResolved);
  } else if (restResolved.transport === "rest") {
    let url: URL | undefined;
    try {
      url = sendUrlOf(restResolved.baseUrl);
    } catch {
      fail(
        "config.rest",
        new MailsendError("config_invalid", `the base URL is not a valid URL: ${restResolved.baseUrl}`, {
          hint: "Set --base-url or MAILSEND_BASE_URL to e.g. https://api.example.com",
        }),
      );
    }
    if (url && url.protocol !== "http:" && url.protocol !== "https:") {
      fail(
        "config.rest",
        new MailsendError("config_invalid", `the base URL must start with http:// or https://, not ${url.protocol}`, {
          hint: "Set --base-url or MAILSEND_BASE_URL to e.g. https://api.example.com",
        }),
      );
    } else if (url) {
      rest = restResolved;
      const plainRemote = url.protocol === "http:" && !LOOPBACK.test(url.hostname);
      const via = rest.proxy
        ? `, through the proxy ${rest.proxy.label} (from ${rest.proxy.source}${rest.proxy.user ? `, as ${rest.proxy.user}` : ""}; ${url.protocol === "https:" ? "CONNECT" : "absolute-form requests"})`
        : rest.proxyBypass
          ? `, direct (a proxy is set, but ${rest.proxyBypass} exempts this host)`
          : "";
      pass(
        "config.rest",
        `POST ${url.href}${chosen(found, "rest")}${via}`,
        plainRemote
          ? {
              hint: "This is plain http:// to another machine: the key crosses the network unencrypted. Use https:// if the service offers it.",
            }
          : {},
      );
    }
  }

  return rest;
}

function smtpConfigCheck(
  smtpResolved: Resolved,
  rest: RestConfig | undefined,
  found: Found,
  rec: Recorder,
): SmtpConfig | undefined {
  const { pass, skip, fail } = rec;
  let smtp: SmtpConfig | undefined;
  if (smtpResolved === "absent" && rest) {
    // Not a failure (send and send --queue choose for themselves), but a warning.
    skip("config.smtp", "SMTP is not configured: only REST is", REST_ONLY_WARNING);
  } else if (smtpResolved === "absent") {
    skip(
      "config.smtp",
      "SMTP is not configured",
      "Optional: set --smtp-host / MAILSEND_SMTP_HOST to check SMTP submission too.",
    );
  } else if (smtpResolved instanceof MailsendError) {
    fail("config.smtp", smtpResolved);
  } else if (smtpResolved.transport === "smtp") {
    smtp = smtpResolved;
    const mode = smtp.tls === "implicit" ? "implicit TLS" : "STARTTLS required";
    // A sandbox or a local relay uses other ports; only a remote server on one is worth a word.
    const odd = smtp.port !== 587 && smtp.port !== 465 && !LOOPBACK.test(smtp.host);
    pass(
      "config.smtp",
      `${smtp.host}:${smtp.port}, ${mode}, user ${smtp.user}${chosen(found, "smtp")}`,
      odd
        ? {
            hint: `Port ${smtp.port} is not one of the service's submission ports (587 STARTTLS, 465 implicit TLS); fine for a sandbox.`,
          }
        : {},
    );
  }

  return smtp;
}

/** The local rate-limit budget: on or off, where it is kept, how much of it is used. */
async function budgetCheck(
  flags: DoctorFlags,
  env: Env,
  key: string | undefined,
  rec: Recorder,
): Promise<{ store: SlotStore | undefined; limits: Limits | undefined }> {
  const { pass, skip, fail } = rec;
  // --- the local rate-limit budget -----------------------------------------
  let store: SlotStore | undefined;
  let limits: Limits | undefined;
  try {
    limits = resolveLimits({ ...(flags.rateLimit !== undefined ? { rateLimit: flags.rateLimit } : {}) }, env);
    if (limits.limit === 0) {
      skip(
        "ratelimit",
        "the local budget is off (--rate-limit 0 / MAILSEND_RATE_LIMIT=0): mailsend does not pace itself",
      );
    } else if (!key) {
      skip("ratelimit", "not checked: the budget is kept per key, and there is no key");
    } else {
      const caFile = flags.caFile ?? (env.MAILSEND_CA_FILE || undefined);
      const opened = openSlotStore(key, limits, env, caFile ? { caFile } : {})!;
      try {
        const use = await budgetUse(opened, limits);
        store = opened;
        pass("ratelimit", use.detail, use.hint ? { hint: use.hint } : {});
      } catch (e) {
        await opened.close().catch(() => {});
        throw e;
      }
    }
  } catch (e) {
    fail("ratelimit", e);
  }

  return { store, limits };
}

/** How much of the budget is used for the key, where it is kept, and what is worth a word about it. */
async function budgetUse(opened: SlotStore, limits: Limits): Promise<{ detail: string; hint?: string }> {
  // Redis first answers how it was reached, then what is used there.
  const redis = opened instanceof RedisSlotStore ? await opened.probe() : undefined;
  const used = await opened.used(limits);
  const where =
    opened instanceof RedisSlotStore && redis
      ? `shared through Redis at ${opened.config.label} (MAILSEND_RATE_LIMIT_URL): ${describeRedis(opened.config, redis)}`
      : `per machine, in ${opened instanceof FileSlotStore ? opened.path : "the state dir"}`;
  const hints = [
    ...(used >= limits.limit
      ? ["The budget is used up: the next send waits for a slot (or fails at once with --no-wait)."]
      : []),
    ...(opened instanceof RedisSlotStore && opened.passwordUnneeded
      ? [
          `The Redis server requires no password, but one was given (from ${opened.config.passwordSource}); it is not used.`,
        ]
      : []),
  ];
  return {
    detail: `${used}/${limits.limit} slots used in the last ${limits.windowMs / 1000} s for this key; ${where}`,
    ...(hints.length ? { hint: hints.join(" ") } : {}),
  };
}

async function restChecks(
  rest: RestConfig | undefined,
  restResolved: Resolved,
  key: string | undefined,
  rec: Recorder,
  store: SlotStore | undefined,
  limits: Limits | undefined,
): Promise<void> {
  const { pass, skip, fail } = rec;
  // --- REST ---------------------------------------------------------------
  if (!rest) {
    const why = restResolved === "absent" ? "REST is not configured" : "not checked: the REST configuration failed";
    skip("rest.connect", why);
    skip("rest.key", why);
  } else {
    let reached = false;
    try {
      const r = await reachRest(rest, rest.timeoutMs);
      const url = sendUrlOf(rest.baseUrl);
      const untrusted = url.protocol === "https:" ? trustFailure(r.certificate, url.origin, rest) : undefined;
      if (untrusted) {
        fail("rest.connect", untrusted, r.certificate ? { certificate: r.certificate } : {});
      } else {
        reached = true;
        const how = r.certificate ? describeTls(r.certificate, rest.insecure) : "plain HTTP (no TLS)";
        const note = expiryNote(r.certificate);
        const reachedHow = !rest.proxy
          ? `${url.host}${r.address && r.address !== url.hostname ? ` (${r.address})` : ""} reached in ${r.ms} ms`
          : url.protocol === "https:"
            ? `${url.host} reached through the proxy ${rest.proxy.label} in ${r.ms} ms`
            : `the proxy ${rest.proxy.label} reached in ${r.ms} ms (${url.host} answers the key check through it)`;
        pass("rest.connect", `${reachedHow}, ${how}`, {
          ...(r.certificate ? { certificate: r.certificate } : {}),
          ...(note ? { hint: note } : {}),
        });
      }
    } catch (e) {
      fail("rest.connect", e);
    }
    if (!reached) skip("rest.key", "not checked: the endpoint was not reached");
    else if (!key) skip("rest.key", "not checked: there is no key");
    else await checkRestKey(rest, rec, store, limits);
  }
}

async function smtpChecks(
  smtp: SmtpConfig | undefined,
  smtpResolved: Resolved,
  key: string | undefined,
  rec: Recorder,
): Promise<void> {
  const { pass, skip, fail } = rec;
  // --- SMTP ---------------------------------------------------------------
  if (!smtp) {
    const why = smtpResolved === "absent" ? "SMTP is not configured" : "not checked: the SMTP configuration failed";
    skip("smtp.connect", why);
    skip("smtp.auth", why);
  } else {
    const probe = await probeSmtp(smtp, { auth: key !== undefined });
    const c = probe.connect.certificate;
    const mode = smtp.tls === "implicit" ? "implicit TLS" : "STARTTLS";
    if (probe.connect.ok) {
      const note = expiryNote(c);
      pass(
        "smtp.connect",
        `${smtp.host}:${smtp.port} ${mode} in ${probe.connect.ms} ms, ${c ? describeTls(c, smtp.insecure) : "no certificate"}`,
        {
          ...(c ? { certificate: c } : {}),
          ...(note ? { hint: note } : {}),
        },
      );
    } else {
      fail("smtp.connect", probe.connect.error, c ? { certificate: c } : {});
    }
    if (!probe.connect.ok) skip("smtp.auth", "not checked: no secure SMTP session");
    else if (!probe.auth) skip("smtp.auth", "not checked: there is no key");
    else if (probe.auth.ok) pass("smtp.auth", `AUTH ${probe.auth.method} as ${smtp.user} accepted; no mail sent`);
    else fail("smtp.auth", probe.auth.error);
  }
}

/** The REST key check: an empty POST /send the service must refuse as invalid, through the budget like any send. */
async function checkRestKey(
  config: RestConfig,
  rec: Recorder,
  store: SlotStore | undefined,
  limits: Limits | undefined,
): Promise<void> {
  const { pass, fail } = rec;
  // A budget that cannot be asked (its Redis refusing, a bad limit): no request outside it, as send would make none.
  if (!store && limits?.limit !== 0)
    return void rec.skip(
      "rest.key",
      "not checked: the rate-limit budget could not be asked for a slot (see its check), and the probe is a request like any send",
    );
  const id = slotId();
  const slot = store && limits ? await takeProbeSlot(store, limits, id) : false;
  if (slot instanceof Error) return void fail("rest.key", slot);
  const limitsNow = limits;
  const settle = async (reachedService: boolean) => {
    if (!slot || !store || !limitsNow) return;
    await (reachedService ? store.complete(id, limitsNow) : store.release(id, limitsNow)).catch(() => {});
  };
  const url = sendUrlOf(config.baseUrl);
  const counted = slot
    ? "; it counted as one request against the service's limit (one slot of the local budget)"
    : "; it may count as one request against the service's limit";
  try {
    const answer = await postEmptySend(config, config.timeoutMs);
    await settle(true);
    const wrong = keyAnswerError(config, answer, rec.redact);
    if (wrong) fail("rest.key", wrong);
    else
      pass(
        "rest.key",
        `accepted: POST ${url.pathname} with an empty request was refused as invalid (HTTP ${answer.status}), not for the key; nothing was sent${counted}${rateHeaders(answer.headers)}`,
      );
  } catch (e) {
    const err = toMailsendError(e);
    await settle(!NEVER_REACHED.includes(err.code));
    fail("rest.key", err);
  }
}

/** A slot of the local budget for the key probe (true), or why there is none: the store failing, or the budget used up. */
async function takeProbeSlot(store: SlotStore, limits: Limits, id: string): Promise<true | Error> {
  const taken = await store.tryTake(id, limits).catch((e: unknown) => e);
  // The ratelimit check just worked; a store failing now is reported there on the next run.
  if (taken instanceof Error) return taken;
  if ((taken as { ok: boolean }).ok) return true;
  const seconds = Math.ceil((taken as { waitMs: number }).waitMs / 1000);
  return new MailsendError(
    "rate_limited",
    `not checked: the local budget of ${limits.limit} per ${limits.windowMs / 1000} s for this key is used up (the next slot frees in ${seconds} s)`,
    {
      retryAfter: seconds,
      hint: `The REST key check counts as a request, so it waits its turn like mail does: run doctor again in ${seconds} s. The SMTP check uses no slot.`,
    },
  );
}

/** What the service's answer to the empty send says about the key: nothing when it refused the request as invalid. */
function keyAnswerError(
  config: RestConfig,
  answer: KeyAnswer,
  redact: (s: string) => string,
): MailsendError | undefined {
  if (answer.status === 400 || answer.status === 422) return undefined;
  if (answer.status >= 200 && answer.status < 300)
    return new MailsendError(
      "protocol_error",
      `the service answered HTTP ${answer.status} to an empty send request; it should have refused it as invalid`,
      {
        status: answer.status,
        hint: "Check that --base-url / MAILSEND_BASE_URL points at the mail service.",
      },
    );
  const url = sendUrlOf(config.baseUrl);
  const byProxy =
    config.proxy && url.protocol === "http:"
      ? proxyAnswerError(answer.status, answer.body, config.proxy, url)
      : undefined;
  const err = byProxy ?? statusError(answer.status, answer.body, answer.headers, url, redact);
  if (err.code !== "rate_limited") return err;
  return new MailsendError("rate_limited", `not checked: ${err.message}`, {
    status: answer.status,
    hint: "The service is limiting this key right now; run doctor again in a minute.",
  });
}

/** How the budget's Redis was reached: never its password, only where the password came from. */
function describeRedis(config: RedisConfig, p: RedisProbe): string {
  const who = config.password
    ? `authenticated as ${config.username ?? "default"} (password from ${config.passwordSource})`
    : "no password";
  const tls = p.tlsProtocol ? `${p.tlsProtocol}, certificate verified` : "plain TCP (no TLS)";
  const master = p.master ? `, master ${config.masterName} at ${p.master}` : "";
  return `reachable in ${Math.round(p.connectMs)} ms${master}, ${who}, ${tls}, round trip ${p.rttMs.toFixed(1)} ms${p.server ? `, ${p.server}` : ""}`;
}
