/**
 * `mailsend relay`: the local SMTP relay (src/relay/server.ts) in front of the
 * outbox, with the outbox's runner in this process delivering what it takes;
 * and `mailsend relay hash-password` for the --auth-file.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { MailsendError, localFileError } from "../../core/errors.js";
import type { Envelope } from "../../outbox/types.js";
import type { Relay } from "../../relay/server.js";
import { colorsFor, type CliIO } from "../io.js";
import { reportError } from "../report.js";
import { parseSize } from "../flags.js";

// The relay's --max-size parser, imported by its tests with the command.
export { parseSize };

/** What sendmail takes (the service's 10 MiB less room for the headers delivery adds): more would get 250 here and fail later. */
export const RELAY_DEFAULT_MAX_SIZE = 10 * 1024 * 1024 - 4096;
export const RELAY_DEFAULT_MAX_CLIENTS = 50;

export interface RelayFlags {
  listen?: string;
  authFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsSelfSigned?: boolean;
  maxSize?: string;
  maxClients?: number;
  deliver?: boolean;
  concurrency?: number;
  json?: boolean;
  verbose?: boolean;
  profile?: string;
  transport?: "rest" | "smtp" | "auto";
  [other: string]: unknown;
}

export type StopSignal = () => Promise<string>;

/**
 * The first SIGINT/SIGTERM starts the shutdown. The handlers stay installed
 * until the process ends: proper-lockfile's signal-exit re-sends a signal
 * that no other handler listens to, which would kill the relay mid-shutdown.
 */
function processStopSignal(): Promise<string> {
  return new Promise((resolve) => {
    let first = true;
    const on = (sig: string) => {
      if (!first) return;
      first = false;
      resolve(sig);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
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

type Log = (line: string, obj: Record<string, unknown>) => void;

/**
 * The outbox's runner in watch mode, for as long as the relay runs. Only one
 * runner holds an outbox: while another one does (a `queue run --watch`
 * service), the relay only queues and tries again to take over every few
 * seconds, so mail never waits for a runner that has gone.
 */
async function superviseRunner(io: CliIO, verbose: boolean, concurrency: number | undefined, log: Log, c: ReturnType<typeof colorsFor>) {
  const { QueueRunner } = await import("../../outbox/runner.js");
  type Runner = InstanceType<typeof QueueRunner>;
  let current: Runner | undefined;
  let stopping = false;
  let wakeSleep: (() => void) | undefined;
  const onEvent = (ev: import("../../outbox/runner.js").RunnerEvent) => {
    if (ev.type === "sent") {
      if (verbose) log(`sent ${ev.id} over ${ev.transport} (${ev.reason}; ${ev.messageId}) to ${ev.recipients.join(", ")}`, { event: "sent", id: ev.id, transport: ev.transport, reason: ev.reason, message_id: ev.messageId, recipients: ev.recipients, attempts: ev.attempts });
    } else if (ev.type === "deferred") {
      log(c.yellow(`deferred ${ev.id} (attempt ${ev.attempts}): ${ev.error.message}; next try ${new Date(ev.nextAttemptAt).toISOString()}`), {
        event: "deferred",
        id: ev.id,
        error: ev.error.toJSON(),
        attempts: ev.attempts,
        next_attempt_at: new Date(ev.nextAttemptAt).toISOString(),
      });
    } else if (ev.type === "failed") {
      log(c.red(`failed ${ev.id} after ${ev.attempts} attempt(s): ${ev.error.message} (kept in the outbox's failed/: mailsend queue --failed)`), { event: "failed", id: ev.id, error: ev.error.toJSON(), attempts: ev.attempts });
    } else {
      log(c.yellow(`warning: ${ev.id ? `${ev.id}: ` : ""}${ev.message}`), { event: "warning", ...(ev.id ? { id: ev.id } : {}), message: ev.message });
    }
  };
  const done = (async () => {
    let told = false;
    while (!stopping) {
      const r: Runner = new QueueRunner({ env: io.env, mode: "watch", onEvent, ...(concurrency !== undefined ? { concurrency } : {}) });
      current = r;
      const summary = await r.run();
      current = undefined;
      if (stopping) break;
      if (!summary.ran && !told) {
        told = true;
        log(`another runner delivers from ${r.outbox.dir}; the relay queues, and takes over delivery when that runner stops`, { event: "runner_busy", outbox: r.outbox.dir });
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 3000);
        wakeSleep = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wakeSleep = undefined;
    }
  })();
  return {
    done,
    wake: () => current?.wake(),
    stop: () => {
      stopping = true;
      current?.stop();
      wakeSleep?.();
    },
  };
}

export async function runRelay(flags: RelayFlags, io: CliIO, stop: StopSignal = processStopSignal): Promise<number> {
  const json = flags.json ?? false;
  const verbose = flags.verbose ?? false;
  let relay: Relay | undefined;
  let runner: { wake(): void; stop(): void } | undefined;
  try {
    const { DEFAULT_LISTEN, isLoopback, parseListen } = await import("../../relay/listen.js");
    const listen = flags.listen !== undefined ? parseListen(flags.listen) : DEFAULT_LISTEN;
    const maxSize = flags.maxSize !== undefined ? parseSize(flags.maxSize) : RELAY_DEFAULT_MAX_SIZE;
    const maxClients = flags.maxClients ?? RELAY_DEFAULT_MAX_CLIENTS;
    if (maxClients < 1) throw new MailsendError("usage", "--max-clients must be at least 1");
    if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) {
      throw new MailsendError("usage", `${flags.tlsCert === undefined ? "--tls-key" : "--tls-cert"} needs ${flags.tlsCert === undefined ? "--tls-cert" : "--tls-key"} too`);
    }
    if (flags.tlsSelfSigned && flags.tlsCert !== undefined) throw new MailsendError("usage", "give --tls-cert/--tls-key or --tls-self-signed, not both");

    const loopback = isLoopback(listen.host);
    const wantsTls = flags.tlsCert !== undefined || flags.tlsSelfSigned === true;
    if (!loopback && (flags.authFile === undefined || !wantsTls)) {
      const missing = [flags.authFile === undefined ? "--auth-file (who may send)" : "", !wantsTls ? "TLS (--tls-cert and --tls-key, or --tls-self-signed)" : ""].filter(Boolean);
      throw new MailsendError(
        "config_invalid",
        `refusing to listen on ${hostPort(listen.host, listen.port)} without ${missing.join(" and ")}: it is not a loopback address, so other machines could send mail with your key`,
        {
          hint: "Listen on 127.0.0.1 or [::1] for programs on this machine, or give both. Users: printf '%s' 'the password' | mailsend relay hash-password USER > relay-users",
        },
      );
    }

    const { stateDir } = await import("../../limits/budget.js");
    let tls: { key: string; cert: string } | undefined;
    let caFile: string | undefined;
    if (flags.tlsCert !== undefined && flags.tlsKey !== undefined) {
      tls = { cert: await readPem(flags.tlsCert, "TLS certificate file"), key: await readPem(flags.tlsKey, "TLS key file") };
    } else if (flags.tlsSelfSigned) {
      const { ensureTls } = await import("../../sandbox/tls.js");
      const hosts = ["localhost", "127.0.0.1", "::1"];
      if (isIP(listen.host) && !hosts.includes(listen.host) && listen.host !== "0.0.0.0" && listen.host !== "::") hosts.push(listen.host);
      const m = await ensureTls(join(stateDir(io.env), "relay-tls"), hosts);
      tls = { cert: m.cert, key: m.key };
      caFile = m.caPath;
    }
    const { RelayUsers } = await import("../../relay/auth.js");
    const users = flags.authFile !== undefined ? await RelayUsers.load(flags.authFile) : undefined;

    const { Outbox } = await import("../../outbox/store.js");
    const outbox = Outbox.fromEnv(io.env);
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
    const { prepareMessage } = await import("../../outbox/message.js");
    // A message without Date or Message-ID gets them, as an MTA stamps what local clients submit.
    const { addMissingStamps, mapRelayedLocalNames, mentionsThisMachine, relayLocal } = await import("../../input/sendmail-message.js");
    const { atThisMachine, expandLocal, isLocalName, loadAliases, withProfileAliases } = await import("../../input/aliases.js");
    const { loadSettings } = await import("../../input/profile.js");
    const { parseMailbox1 } = await import("../../core/address.js");
    // The sender and aliases settings as sendmail reads them: the environment, with the profile's.
    // A profile the runner cannot open yet is its to report (it keeps the mail until fixed): the
    // relay then maps with the environment alone.
    let localEnv = io.env;
    try {
      const settings = loadSettings(flags.profile, io.env);
      localEnv = withProfileAliases({ ...settings.env }, io.env, settings.profile);
    } catch {}
    // The aliases file, read at each use as sendmail reads it. One that cannot be read or parsed is a
    // fault of this machine: mail to local names waits (451) until it is fixed; other mail is not
    // concerned. Said at start too, without refusing to start for it.
    const aliasesNow = async () => {
      try {
        return await loadAliases(localEnv);
      } catch (e) {
        throw new MailsendError("temporary_failure", `local names cannot be mapped now: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    };
    let aliasesTrouble: string | undefined;
    try {
      await loadAliases(localEnv);
    } catch (e) {
      aliasesTrouble = e instanceof Error ? e.message : String(e);
    }
    // What delivery will need (the key, a channel), checked once now: a relay that cannot deliver
    // still takes mail and keeps it queued (that is what it is for), but its user hears it at start,
    // not from the first deferral in a log. Under --no-deliver the `queue run` that delivers may
    // run with other settings.
    let deliveryTrouble: string | undefined;
    if (flags.deliver !== false) {
      try {
        await (await import("../../outbox/deliver.js")).profileChannels(io.env, flags.profile, true);
      } catch (e) {
        deliveryTrouble = e instanceof Error ? e.message : String(e);
      }
    }
    const { startRelay, summaryHeaders } = await import("../../relay/server.js");
    // Mail these settings can never deliver unchanged (a text-only body with REST alone) is refused
    // at the end of DATA (554), not answered 250 and failed later. Also under --no-deliver: the
    // `queue run` that delivers then is meant to run with the relay's settings.
    const deliverable = (await import("../../relay/intake.js")).intakeCheck(io.env, flags.profile);
    // What taking and delivering mail loads later, loaded now: an upgrade can replace dist/ under
    // a relay that runs for weeks (src/outbox/preload.ts).
    await (await import("../../outbox/preload.js")).preloadDelivery(io.env);

    const c = colorsFor(io.stderr, io.env);
    const log = (line: string, obj: Record<string, unknown>) => {
      if (json) io.stdout.write(`${JSON.stringify(obj)}\n`);
      else io.stderr.write(`${line}\n`);
    };
    const stopped = stop();

    // The runner: delivers what the relay queues, through the budget, in this process.
    const supervisor = flags.deliver === false ? undefined : await superviseRunner(io, verbose, flags.concurrency, log, c);
    runner = supervisor;
    const runDone: Promise<{ error?: unknown }> = supervisor ? supervisor.done.then(() => ({}), (e: unknown) => ({ error: e })) : new Promise(() => {});

    const transport = flags.transport;
    /** Messages whose Message-ID the relay added (as an MTA does): the program's own is kept by SMTP, not these. */
    const stampedIds = new WeakSet<Buffer>();
    relay = await startRelay({
      host: listen.host,
      port: listen.port,
      maxSize,
      maxClients,
      ...(users ? { users } : {}),
      ...(tls ? { tls } : {}),
      // Local names (RCPT TO:<root@localhost>, From: root@<this host>) through the aliases file, as
      // sendmail maps them; read at each use, as sendmail reads it.
      async checkRecipient(address: string) {
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
            if (!aliases && e instanceof MailsendError) throw new MailsendError(e.code, e.message, { ...(e.hint ? { hint: e.hint } : {}), local: true });
            throw e;
          }
        } else if (isLocalName(address)) {
          // At localhost or the dot-less machine name, yet no user name (jörg@localhost): nowhere to go.
          throw new MailsendError("invalid_address", `"${address}" is at this machine but is not a user name the aliases file could map`);
        }
      },
      async prepare(raw: Buffer, envelope: Envelope) {
        const aliases = mentionsThisMachine(raw, envelope)
          ? await aliasesNow().catch((e: unknown) => {
              if (mentionsThisMachine(raw, envelope, (a) => isLocalName(a))) throw e;
              return undefined;
            })
          : undefined;
        const mapped = mapRelayedLocalNames(raw, envelope, { ...(aliases ? { aliases } : {}), ...(localEnv.MAILSEND_FROM ? { defaultFrom: localEnv.MAILSEND_FROM } : {}) });
        if (verbose) for (const n of mapped.notes) log(`local names: ${n}`, { event: "mapped", note: n });
        const stamped = addMissingStamps(mapped.raw, mapped.envelope.from);
        if (stamped.added.some((l) => /^Message-ID:/i.test(l))) stampedIds.add(stamped.raw);
        return { raw: stamped.raw, envelope: mapped.envelope };
      },
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
          ...(flags.profile !== undefined ? { profile: flags.profile } : {}),
          ...(transport !== undefined ? { transport } : {}),
          ...summaryHeaders(raw),
        });
      },
      onAccepted(info) {
        runner?.wake();
        if (verbose) {
          log(`queued ${info.id} from <${info.envelope.from}> to ${info.envelope.to.map((a) => `<${a}>`).join(", ")} (${info.size} bytes${info.user ? `, user ${info.user}` : ""})`, {
            event: "queued",
            id: info.id,
            from: info.envelope.from,
            to: info.envelope.to,
            size: info.size,
            ...(info.user ? { user: info.user } : {}),
          });
        }
      },
      onRefused(info) {
        // A fault of this machine is worth a line without -v; a client's bad message only with it.
        if (info.code === 452 || info.code === 451 || verbose) {
          log(`${info.code === 452 || info.code === 451 ? c.yellow("refused") : "refused"}${info.rcpt ? ` RCPT TO:<${info.rcpt}>` : ""} ${info.code} ${info.reply} (from <${info.envelope.from}>, ${info.remote})`, {
            event: "refused",
            ...(info.rcpt ? { stage: "rcpt" } : {}),
            code: info.code,
            reply: info.reply,
            from: info.envelope.from,
            to: info.envelope.to,
          });
        }
      },
    });

    const where = hostPort(listen.host, relay.port);
    if (json) {
      io.stdout.write(
        `${JSON.stringify({
          ready: true,
          pid: process.pid,
          host: listen.host,
          port: relay.port,
          outbox: outbox.dir,
          auth: users !== undefined,
          tls: tls ? "starttls" : null,
          ...(caFile ? { ca_file: caFile } : {}),
          max_size: maxSize,
          max_clients: maxClients,
          deliver: runner !== undefined,
        })}\n`,
      );
    } else {
      const security = users ? `AUTH required (${users.size} user${users.size === 1 ? "" : "s"})${tls ? ", STARTTLS" : ""}` : tls ? "STARTTLS, no AUTH" : "no TLS, no AUTH (loopback only)";
      io.stdout.write(
        `mailsend relay listening on ${where} (${security}); outbox ${outbox.dir}; ${runner ? "delivering" : "not delivering (--no-deliver): run mailsend queue run"}\n`,
      );
    }

    if (deliveryTrouble) {
      const message = `${deliveryTrouble}; mail is taken and kept in the outbox until this is fixed`;
      log(`${c.yellow("warning")}: ${message}`, { event: "warning", message });
    }
    if (aliasesTrouble) {
      log(`${c.yellow("warning")}: ${aliasesTrouble}; mail to local names (root@localhost) is answered 451 until it is fixed`, { event: "warning", message: `${aliasesTrouble}; mail to local names is answered 451 until it is fixed` });
    }

    const ended = await Promise.race([stopped.then((sig) => ({ sig })), runDone]);
    if ("sig" in ended && !json) io.stderr.write(`${ended.sig}: stopping: no new mail; finishing the deliveries in flight\n`);
    await relay.close();
    relay = undefined;
    if (runner) {
      runner.stop();
      const r = await runDone;
      runner = undefined;
      if (r.error !== undefined) throw r.error;
    }
    return 0;
  } catch (e) {
    await relay?.close().catch(() => {});
    runner?.stop();
    return reportError(e, io, { json, verbose });
  }
}

/** Read the password: from a pipe as is (one trailing newline dropped), from a terminal without echo. */
async function readPassword(io: CliIO): Promise<string> {
  const stdin = io.stdin as NodeJS.ReadStream;
  if (stdin.isTTY && typeof stdin.setRawMode === "function") {
    io.stderr.write("Password: ");
    stdin.setRawMode(true);
    stdin.resume();
    try {
      return await new Promise<string>((resolve, reject) => {
        let pw = "";
        const onData = (d: Buffer) => {
          for (const ch of d.toString("utf8")) {
            if (ch === "\r" || ch === "\n" || ch === "\u0004") {
              stdin.off("data", onData);
              io.stderr.write("\n");
              return resolve(pw);
            }
            if (ch === "\u0003") {
              stdin.off("data", onData);
              io.stderr.write("\n");
              return reject(new MailsendError("usage", "cancelled"));
            }
            if (ch === "\u007f" || ch === "\b") pw = [...pw].slice(0, -1).join("");
            else pw += ch;
          }
        };
        stdin.on("data", onData);
      });
    } finally {
      stdin.setRawMode(false);
      stdin.pause();
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "");
}

export async function runRelayHashPassword(user: string | undefined, flags: { json?: boolean }, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    if (user !== undefined && (user === "" || /[\s:]/.test(user))) throw new MailsendError("usage", `the user name ${JSON.stringify(user)} must not be empty or hold spaces or ":"`);
    const password = await readPassword(io);
    if (password === "") throw new MailsendError("usage", "the password is empty", { hint: "Pipe it in: printf '%s' 'the password' | mailsend relay hash-password USER" });
    if (/[\r\n]/.test(password)) throw new MailsendError("usage", "the password holds a line break; give one line on stdin");
    const { hashPassword } = await import("../../relay/auth.js");
    const hash = await hashPassword(password);
    if (json) io.stdout.write(`${JSON.stringify({ ...(user !== undefined ? { user } : {}), hash })}\n`);
    else io.stdout.write(`${user !== undefined ? `${user}:` : ""}${hash}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}
