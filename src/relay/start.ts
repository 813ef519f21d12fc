/**
 * What `mailsend relay` settles before it listens: whether this address may be
 * listened on as configured, the TLS certificate, the users, the outbox, and how
 * local names are mapped; the checks of what delivery will need, said at start.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { parseMailbox1 } from "../core/address.js";
import { MailsendError, localFileError } from "../core/errors.js";
import {
  atThisMachine,
  expandLocal,
  isLocalName,
  loadAliases,
  withProfileAliases,
  type AliasTable,
} from "../sendmail/aliases.js";
import { loadSettings } from "../settings/profile.js";
import { addMissingStamps, mapRelayedLocalNames, mentionsThisMachine, relayLocal } from "../sendmail/submission.js";
import { stateDir } from "../settings/state-dir.js";
import { prepareMessage } from "../outbox/message.js";
import { preloadDelivery } from "../outbox/preload.js";
import { Outbox } from "../outbox/store.js";
import type { Envelope } from "../core/envelope.js";
import { RelayUsers } from "./auth.js";
import { intakeCheck } from "./intake.js";
import { hostPort, isLoopback, type ListenAddress } from "./listen.js";
import { summaryHeaders, type RelayOptions } from "./server.js";

export interface RelayStartOptions {
  listen: ListenAddress;
  authFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsSelfSigned?: boolean;
  /** False: only queue; a `queue run` elsewhere delivers. */
  deliver: boolean;
  profile?: string;
  transport?: "rest" | "smtp" | "auto";
  env: Record<string, string | undefined>;
  /** Each note on how a message's local names were mapped (logged under -v). */
  onMapped?(note: string): void;
}

/** The relay's hooks into the outbox and the aliases, and what it found at start. */
export interface RelayStart {
  outbox: Outbox;
  users?: RelayUsers;
  tls?: { key: string; cert: string };
  /** The CA of a self-signed certificate, for the clients to trust. */
  caFile?: string;
  hooks: Pick<RelayOptions, "checkRecipient" | "prepare" | "validate" | "store">;
  /** Why delivery cannot work yet: mail is still taken and kept. */
  deliveryTrouble?: string;
  /** Why the aliases file cannot be read: mail to local names waits (451) meanwhile. */
  aliasesTrouble?: string;
}

/** Off loopback, other machines could send mail with this machine's key: only with users and TLS. */
export function checkExposure(
  opts: Pick<RelayStartOptions, "listen" | "authFile" | "tlsCert" | "tlsSelfSigned">,
): void {
  const wantsTls = opts.tlsCert !== undefined || opts.tlsSelfSigned === true;
  if (isLoopback(opts.listen.host) || (opts.authFile !== undefined && wantsTls)) return;
  const missing = [
    opts.authFile === undefined ? "--auth-file (who may send)" : "",
    !wantsTls ? "TLS (--tls-cert and --tls-key, or --tls-self-signed)" : "",
  ].filter(Boolean);
  throw new MailsendError(
    "config_invalid",
    `refusing to listen on ${hostPort(opts.listen.host, opts.listen.port)} without ${missing.join(" and ")}: it is not a loopback address, so other machines could send mail with your key`,
    {
      hint: "Listen on 127.0.0.1 or [::1] for programs on this machine, or give both. Users: printf '%s' 'the password' | mailsend relay hash-password USER > relay-users",
    },
  );
}

async function readPem(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new MailsendError("file_not_found", `the ${what} ${path} does not exist`);
    throw localFileError(e, path, "read", what);
  }
}

/** The given certificate, or one made (and kept) for the listening address. */
async function relayTls(opts: RelayStartOptions): Promise<Pick<RelayStart, "tls" | "caFile">> {
  if (opts.tlsCert !== undefined && opts.tlsKey !== undefined) {
    return {
      tls: {
        cert: await readPem(opts.tlsCert, "TLS certificate file"),
        key: await readPem(opts.tlsKey, "TLS key file"),
      },
    };
  }
  if (!opts.tlsSelfSigned) return {};
  const { ensureTls } = await import("../sandbox/tls.js");
  const { host } = opts.listen;
  const hosts = ["localhost", "127.0.0.1", "::1"];
  if (isIP(host) && !hosts.includes(host) && host !== "0.0.0.0" && host !== "::") hosts.push(host);
  const m = await ensureTls(join(stateDir(opts.env), "relay-tls"), hosts);
  return { tls: { cert: m.cert, key: m.key }, caFile: m.caPath };
}

function openOutbox(env: Record<string, string | undefined>): Outbox {
  const outbox = Outbox.fromEnv(env);
  try {
    outbox.ensureDirs();
  } catch (e) {
    // At start nothing was offered yet: say so as the outbox's fault (73), not as a message refused.
    const why = e instanceof MailsendError ? e.message.replace(/; the message was NOT queued$/, "") : String(e);
    throw new MailsendError("local_write_failed", `the relay cannot start: ${why}`, {
      cause: e,
      hint: "The outbox is $MAILSEND_STATE_DIR/outbox (or MAILSEND_OUTBOX_DIR); make it writable for the user the relay runs as.",
    });
  }
  return outbox;
}

/** A recipient at RCPT TO: refused when not valid, or when it is this machine's yet goes nowhere. */
async function checkLocalRecipient(address: string, aliasesNow: () => Promise<AliasTable | undefined>): Promise<void> {
  // Not valid (`u@intranet`, not fully qualified): refused here (553), not with the whole message at DATA.
  if (!atThisMachine(address)) return void parseMailbox1(address, "recipient");
  // A broken file holds up only names that are this machine's whatever it says; one at a
  // host name with dots (the mail domain's own name) is sent as written meanwhile.
  const aliases = await aliasesNow().catch((e: unknown) => {
    if (isLocalName(address)) throw e;
    return undefined;
  });
  if (relayLocal(address, aliases)) {
    try {
      expandLocal(aliases, address);
    } catch (e) {
      // No aliases file at all is this machine's setup, not a recipient that does not exist:
      // 451 4.3.5, as for such a sender at DATA, so an MTA in front (Postfix with this relay as
      // its relayhost: cron's mail to root@<this host>) keeps the mail until one is set. 550
      // bounced it, and the bounce to root with it. A name an existing file does not map
      // stays 550, as Postfix answers a user it does not know.
      if (!aliases && e instanceof MailsendError)
        throw new MailsendError(e.code, e.message, { ...(e.hint ? { hint: e.hint } : {}), local: true });
      throw e;
    }
  } else if (isLocalName(address)) {
    // At localhost or the dot-less machine name, yet no user name (jörg@localhost): nowhere to go.
    throw new MailsendError(
      "invalid_address",
      `"${address}" is at this machine but is not a user name the aliases file could map`,
    );
  }
}

/**
 * Local names (RCPT TO:<root@localhost>, From: root@<this host>) through the aliases file, as
 * sendmail maps them; read at each use, as sendmail reads it. A message without Date or
 * Message-ID gets them, as an MTA stamps what local clients submit.
 */
async function localNames(opts: RelayStartOptions, stampedIds: WeakSet<Buffer>) {
  // The sender and aliases settings as sendmail reads them: the environment, with the profile's.
  // A profile the runner cannot open yet is its to report (it keeps the mail until fixed): the
  // relay then maps with the environment alone.
  let localEnv = opts.env;
  try {
    const settings = loadSettings(opts.profile, opts.env);
    localEnv = withProfileAliases({ ...settings.env }, opts.env, settings.profile);
  } catch {}
  // One that cannot be read or parsed is a fault of this machine: mail to local names waits (451)
  // until it is fixed; other mail is not concerned. Said at start too, without refusing to start for it.
  const aliasesNow = async () => {
    try {
      return await loadAliases(localEnv);
    } catch (e) {
      throw new MailsendError(
        "temporary_failure",
        `local names cannot be mapped now: ${e instanceof Error ? e.message : String(e)}`,
        { cause: e },
      );
    }
  };
  let aliasesTrouble: string | undefined;
  try {
    await loadAliases(localEnv);
  } catch (e) {
    aliasesTrouble = e instanceof Error ? e.message : String(e);
  }
  const hooks: Pick<RelayOptions, "checkRecipient" | "prepare"> = {
    checkRecipient: (address: string) => checkLocalRecipient(address, aliasesNow),
    async prepare(raw: Buffer, envelope: Envelope) {
      const aliases = mentionsThisMachine(raw, envelope)
        ? await aliasesNow().catch((e: unknown) => {
            if (mentionsThisMachine(raw, envelope, (a) => isLocalName(a))) throw e;
            return undefined;
          })
        : undefined;
      const mapped = mapRelayedLocalNames(raw, envelope, {
        ...(aliases ? { aliases } : {}),
        ...(localEnv.MAILSEND_FROM ? { defaultFrom: localEnv.MAILSEND_FROM } : {}),
      });
      for (const n of mapped.notes) opts.onMapped?.(n);
      const stamped = addMissingStamps(mapped.raw, mapped.envelope.from);
      if (stamped.added.some((l) => /^Message-ID:/i.test(l))) stampedIds.add(stamped.raw);
      return { raw: stamped.raw, envelope: mapped.envelope };
    },
  };
  return { hooks, ...(aliasesTrouble !== undefined ? { aliasesTrouble } : {}) };
}

/**
 * What delivery will need (the key, a channel), checked once now: a relay that cannot deliver
 * still takes mail and keeps it queued (that is what it is for), but its user hears it at start,
 * not from the first deferral in a log. Under --no-deliver the `queue run` that delivers may
 * run with other settings.
 */
async function deliveryTrouble(opts: RelayStartOptions): Promise<string | undefined> {
  if (!opts.deliver) return undefined;
  try {
    await (await import("../outbox/deliver.js")).profileChannels(opts.env, opts.profile, true);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/** Everything the relay needs before it listens; throws what keeps it from starting. */
export async function prepareRelayStart(opts: RelayStartOptions): Promise<RelayStart> {
  checkExposure(opts);
  const { tls, caFile } = await relayTls(opts);
  const users = opts.authFile !== undefined ? await RelayUsers.load(opts.authFile) : undefined;
  const outbox = openOutbox(opts.env);
  /** Messages whose Message-ID the relay added (as an MTA does): the program's own is kept by SMTP, not these. */
  const stampedIds = new WeakSet<Buffer>();
  const local = await localNames(opts, stampedIds);
  const delivery = await deliveryTrouble(opts);
  // Mail these settings can never deliver unchanged (a text-only body with REST alone) is refused
  // at the end of DATA (554), not answered 250 and failed later. Also under --no-deliver: the
  // `queue run` that delivers then is meant to run with the relay's settings.
  const deliverable = intakeCheck(opts.env, opts.profile);
  // What taking and delivering mail loads later, loaded now: an upgrade can replace dist/ under
  // a relay that runs for weeks (src/outbox/preload.ts).
  await preloadDelivery(opts.env);
  const { profile, transport } = opts;
  return {
    outbox,
    ...(users ? { users } : {}),
    ...(tls ? { tls } : {}),
    ...(caFile ? { caFile } : {}),
    ...(delivery !== undefined ? { deliveryTrouble: delivery } : {}),
    ...(local.aliasesTrouble !== undefined ? { aliasesTrouble: local.aliasesTrouble } : {}),
    hooks: {
      ...local.hooks,
      async validate(raw: Buffer, envelope: Envelope) {
        await deliverable(await prepareMessage(raw, envelope));
      },
      store(raw: Buffer, envelope: Envelope, gate: Promise<void>) {
        return outbox.add({
          gate,
          raw,
          envelope,
          idempotencyKey: randomUUID(),
          source: "relay",
          ...(stampedIds.has(raw) ? { stampedMessageId: true } : {}),
          ...(profile !== undefined ? { profile } : {}),
          ...(transport !== undefined ? { transport } : {}),
          ...summaryHeaders(raw),
        });
      },
    },
  };
}
