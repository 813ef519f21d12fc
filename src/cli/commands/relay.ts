/**
 * `mailsend relay`: the local SMTP relay (src/relay/server.ts) in front of the
 * outbox, with the outbox's runner in this process delivering what it takes;
 * and `mailsend relay hash-password` for the --auth-file.
 */
import type { Command } from "commander";
import { MailsendError } from "../../core/errors.js";
import { hostPort, type ListenAddress } from "../../relay/listen.js";
import type { AcceptedInfo, Relay, RelayOptions } from "../../relay/server.js";
import type { RelayStart, RelayStartOptions } from "../../relay/start.js";
import type { RunnerSupervisor } from "../../relay/supervise.js";
import type { RunnerEvent } from "../../outbox/runner.js";
import type { CommandContext } from "../command.js";
import { colorsFor, type CliIO, type Colors } from "../io.js";
import { RELAY_OPTIONS } from "../options.js";
import { addOptions } from "../flags.js";
import { parseSize } from "../values.js";
import { reportError } from "../report.js";

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

type Log = (line: string, obj: Record<string, unknown>) => void;

/** What the runner's deliveries say in the relay's log: failures always, each message sent only under -v. */
function runnerEventLog(log: Log, c: Colors, verbose: boolean): (ev: RunnerEvent) => void {
  return (ev) => {
    if (ev.type === "sent") {
      if (verbose)
        log(`sent ${ev.id} over ${ev.transport} (${ev.reason}; ${ev.messageId}) to ${ev.recipients.join(", ")}`, {
          event: "sent",
          id: ev.id,
          transport: ev.transport,
          reason: ev.reason,
          message_id: ev.messageId,
          recipients: ev.recipients,
          attempts: ev.attempts,
        });
    } else if (ev.type === "deferred") {
      log(
        c.yellow(
          `deferred ${ev.id} (attempt ${ev.attempts}): ${ev.error.message}; next try ${new Date(ev.nextAttemptAt).toISOString()}`,
        ),
        {
          event: "deferred",
          id: ev.id,
          error: ev.error.toJSON(),
          attempts: ev.attempts,
          next_attempt_at: new Date(ev.nextAttemptAt).toISOString(),
        },
      );
    } else if (ev.type === "failed") {
      log(
        c.red(
          `failed ${ev.id} after ${ev.attempts} attempt(s): ${ev.error.message} (kept in the outbox's failed/: mailsend queue --failed)`,
        ),
        { event: "failed", id: ev.id, error: ev.error.toJSON(), attempts: ev.attempts },
      );
    } else if (ev.type === "notice") {
      log(`notice about ${ev.id} queued as ${ev.noticeId} to ${ev.to.join(", ")}`, {
        event: "notice",
        id: ev.id,
        notice_id: ev.noticeId,
        to: ev.to,
      });
    } else {
      log(c.yellow(`warning: ${ev.id ? `${ev.id}: ` : ""}${ev.message}`), {
        event: "warning",
        ...(ev.id ? { id: ev.id } : {}),
        message: ev.message,
      });
    }
  };
}

/** The runner that delivers what the relay queues, through the budget, in this process. */
async function startRunner(io: CliIO, flags: RelayFlags, log: Log, c: Colors): Promise<RunnerSupervisor> {
  const { superviseRunner } = await import("../../relay/supervise.js");
  return superviseRunner({
    env: io.env,
    ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
    onEvent: runnerEventLog(log, c, flags.verbose ?? false),
    onBusy: (outbox) =>
      log(`another runner delivers from ${outbox}; the relay queues, and takes over delivery when that runner stops`, {
        event: "runner_busy",
        outbox,
      }),
  });
}

/** The relay's settings from its flags: the checks a flag alone can fail. */
export function relayOptions(
  flags: RelayFlags,
  env: CliIO["env"],
  listen: ListenAddress,
): RelayStartOptions & { maxSize: number; maxClients: number } {
  const maxSize = flags.maxSize !== undefined ? parseSize(flags.maxSize) : RELAY_DEFAULT_MAX_SIZE;
  const maxClients = flags.maxClients ?? RELAY_DEFAULT_MAX_CLIENTS;
  if (maxClients < 1) throw new MailsendError("usage", "--max-clients must be at least 1");
  if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) {
    throw new MailsendError(
      "usage",
      `${flags.tlsCert === undefined ? "--tls-key" : "--tls-cert"} needs ${flags.tlsCert === undefined ? "--tls-cert" : "--tls-key"} too`,
    );
  }
  if (flags.tlsSelfSigned && flags.tlsCert !== undefined)
    throw new MailsendError("usage", "give --tls-cert/--tls-key or --tls-self-signed, not both");
  return {
    listen,
    maxSize,
    maxClients,
    deliver: flags.deliver !== false,
    env,
    ...(flags.authFile !== undefined ? { authFile: flags.authFile } : {}),
    ...(flags.tlsCert !== undefined ? { tlsCert: flags.tlsCert } : {}),
    ...(flags.tlsKey !== undefined ? { tlsKey: flags.tlsKey } : {}),
    ...(flags.tlsSelfSigned ? { tlsSelfSigned: true } : {}),
    ...(flags.profile !== undefined ? { profile: flags.profile } : {}),
    ...(flags.transport !== undefined ? { transport: flags.transport } : {}),
  };
}

/** The relay's events as lines: JSON on stdout under --json, else text on stderr. */
function relayLog(io: CliIO, json: boolean): Log {
  return (line, obj) => {
    if (json) io.stdout.write(`${JSON.stringify(obj)}\n`);
    else io.stderr.write(`${line}\n`);
  };
}

function logAccepted(log: Log, info: AcceptedInfo): void {
  log(
    `queued ${info.id} from <${info.envelope.from}> to ${info.envelope.to.map((a) => `<${a}>`).join(", ")} (${info.size} bytes${info.user ? `, user ${info.user}` : ""})`,
    {
      event: "queued",
      id: info.id,
      from: info.envelope.from,
      to: info.envelope.to,
      size: info.size,
      ...(info.user ? { user: info.user } : {}),
    },
  );
}

type RefusedInfo = Parameters<NonNullable<RelayOptions["onRefused"]>>[0];

function logRefused(log: Log, c: Colors, info: RefusedInfo, verbose: boolean): void {
  // A fault of this machine is worth a line without -v; a client's bad message only with it.
  const ours = info.code === 452 || info.code === 451;
  if (!ours && !verbose) return;
  log(
    `${ours ? c.yellow("refused") : "refused"}${info.rcpt ? ` RCPT TO:<${info.rcpt}>` : ""} ${info.code} ${info.reply} (from <${info.envelope.from}>, ${info.remote})`,
    {
      event: "refused",
      ...(info.rcpt ? { stage: "rcpt" } : {}),
      code: info.code,
      reply: info.reply,
      from: info.envelope.from,
      to: info.envelope.to,
    },
  );
}

/** What the listener's events say in the log; each queued message also wakes the runner. */
async function listenerReports(
  log: Log,
  c: Colors,
  verbose: boolean,
  runner: RunnerSupervisor | undefined,
): Promise<Pick<RelayOptions, "onAccepted" | "onRefused" | "onAuthFailed">> {
  const { loggedUser } = await import("../../relay/guard.js");
  return {
    onAccepted(info) {
      runner?.wake();
      if (verbose) logAccepted(log, info);
    },
    onRefused: (info) => logRefused(log, c, info, verbose),
    // Always, in one fixed form a fail2ban filter matches (docs/sendmail.md); never the password.
    onAuthFailed: ({ address, user, closing }) =>
      log(
        `mailsend relay: authentication failed for user "${loggedUser(user)}" from ${address}${closing ? "; connection closed" : ""}`,
        { event: "auth_failed", address, user: loggedUser(user), closing },
      ),
  };
}

/** The line that says the relay listens: what a service manager's log or a test waits for. */
function writeReady(
  io: CliIO,
  json: boolean,
  relay: Relay,
  start: RelayStart,
  opts: { maxSize: number; maxClients: number },
  delivering: boolean,
): void {
  const { users, tls, outbox } = start;
  if (json) {
    io.stdout.write(
      `${JSON.stringify({
        ready: true,
        pid: process.pid,
        host: relay.host,
        port: relay.port,
        outbox: outbox.dir,
        auth: users !== undefined,
        tls: tls ? "starttls" : null,
        ...(start.caFile ? { ca_file: start.caFile } : {}),
        max_size: opts.maxSize,
        max_clients: opts.maxClients,
        deliver: delivering,
      })}\n`,
    );
    return;
  }
  const security = users
    ? `AUTH required (${users.size} user${users.size === 1 ? "" : "s"})${tls ? ", STARTTLS" : ""}`
    : tls
      ? "STARTTLS, no AUTH"
      : "no TLS, no AUTH (loopback only)";
  io.stdout.write(
    `mailsend relay listening on ${hostPort(relay.host, relay.port)} (${security}); outbox ${outbox.dir}; ${delivering ? "delivering" : "not delivering (--no-deliver): run mailsend queue run"}\n`,
  );
}

function warnTroubles(log: Log, c: Colors, start: RelayStart): void {
  if (start.deliveryTrouble) {
    const message = `${start.deliveryTrouble}; mail is taken and kept in the outbox until this is fixed`;
    log(`${c.yellow("warning")}: ${message}`, { event: "warning", message });
  }
  if (start.aliasesTrouble) {
    log(
      `${c.yellow("warning")}: ${start.aliasesTrouble}; mail to local names (root@localhost) is answered 451 until it is fixed`,
      {
        event: "warning",
        message: `${start.aliasesTrouble}; mail to local names is answered 451 until it is fixed`,
      },
    );
  }
}

export async function runRelay(flags: RelayFlags, io: CliIO, stop: StopSignal = processStopSignal): Promise<number> {
  const json = flags.json ?? false;
  const verbose = flags.verbose ?? false;
  let relay: Relay | undefined;
  let runner: { wake(): void; stop(): void } | undefined;
  try {
    const { DEFAULT_LISTEN, parseListen } = await import("../../relay/listen.js");
    const opts = relayOptions(flags, io.env, flags.listen !== undefined ? parseListen(flags.listen) : DEFAULT_LISTEN);
    const c = colorsFor(io.stderr, io.env);
    const log = relayLog(io, json);
    const { prepareRelayStart } = await import("../../relay/start.js");
    const start = await prepareRelayStart({
      ...opts,
      ...(verbose ? { onMapped: (n: string) => log(`local names: ${n}`, { event: "mapped", note: n }) } : {}),
    });
    const stopped = stop();

    const supervisor = opts.deliver ? await startRunner(io, flags, log, c) : undefined;
    runner = supervisor;
    const runDone: Promise<{ error?: unknown }> = supervisor
      ? supervisor.done.then(
          () => ({}),
          (e: unknown) => ({ error: e }),
        )
      : new Promise(() => {});

    const { startRelay } = await import("../../relay/server.js");
    relay = await startRelay({
      host: opts.listen.host,
      port: opts.listen.port,
      maxSize: opts.maxSize,
      maxClients: opts.maxClients,
      ...(start.users ? { users: start.users } : {}),
      ...(start.tls ? { tls: start.tls } : {}),
      ...start.hooks,
      ...(await listenerReports(log, c, verbose, supervisor)),
    });
    writeReady(io, json, relay, start, opts, runner !== undefined);
    warnTroubles(log, c, start);

    const ended = await Promise.race([stopped.then((sig) => ({ sig })), runDone]);
    if ("sig" in ended && !json)
      io.stderr.write(`${ended.sig}: stopping: no new mail; finishing the deliveries in flight\n`);
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
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

export async function runRelayHashPassword(
  user: string | undefined,
  flags: { json?: boolean },
  io: CliIO,
): Promise<number> {
  const json = flags.json ?? false;
  try {
    if (user !== undefined && (user === "" || /[\s:]/.test(user)))
      throw new MailsendError("usage", `the user name ${JSON.stringify(user)} must not be empty or hold spaces or ":"`);
    const password = await readPassword(io);
    if (password === "")
      throw new MailsendError("usage", "the password is empty", {
        hint: "Pipe it in: printf '%s' 'the password' | mailsend relay hash-password USER",
      });
    if (/[\r\n]/.test(password))
      throw new MailsendError("usage", "the password holds a line break; give one line on stdin");
    const { hashPassword } = await import("../../relay/auth.js");
    const hash = await hashPassword(password);
    if (json) io.stdout.write(`${JSON.stringify({ ...(user !== undefined ? { user } : {}), hash })}\n`);
    else io.stdout.write(`${user !== undefined ? `${user}:` : ""}${hash}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

const RELAY_HELP = `
Apps (Jenkins, Grafana, Gitea, a printer) are given host 127.0.0.1, port 2525,
no TLS and no authentication. Each message is answered "250 2.0.0 queued as
<id>" only once it is on disk; the relay then delivers it through the key's
budget (mailsend queue shows what waits). SIGTERM/SIGINT: no new mail, the
deliveries in flight finish, the rest stays queued for the next start.
Replies: 552 over --max-size, 554 a message that cannot be delivered as it is,
451 this machine's settings cannot deliver it (e.g. a text-only body with REST
only), 553 at RCPT a recipient that is not a valid address, 452 the outbox
cannot be written (disk full), 421 over --max-clients.

Examples:
  mailsend relay                                   # 127.0.0.1:2525
  mailsend relay --listen [::1]:2525 -v            # IPv6 loopback, one line per message
  printf '%s' 'a long password' | mailsend relay hash-password grafana >> /etc/mailsend/relay-users
  mailsend relay --listen 0.0.0.0:2525 --auth-file /etc/mailsend/relay-users \\
    --tls-cert /etc/ssl/relay.pem --tls-key /etc/ssl/relay.key
  swaks --server 127.0.0.1:2525 --from ci@example.com --to dev@example.com
`;

/** `mailsend relay` and `mailsend relay hash-password`, as the program defines them. */
export function register(program: Command, { io, setExit }: CommandContext): void {
  const relay = program
    .command("relay")
    .description(
      "a local SMTP server for apps that only speak SMTP: each message is queued in the outbox (fsynced) before 250, then delivered",
    )
    .addHelpText("after", RELAY_HELP);
  addOptions(relay, RELAY_OPTIONS);
  relay.action(async (opts: Record<string, unknown>) => setExit(await runRelay(opts, io)));
  relay
    .command("hash-password")
    .description(
      "read a password on stdin (or the terminal, not echoed) and print the user:scrypt$... line for --auth-file",
    )
    .argument("[user]", "the user name to put in front of the hash")
    .option("--json", 'print {"user","hash"}')
    .addHelpText(
      "after",
      "\nExamples:\n  printf '%s' 'a long password' | mailsend relay hash-password jenkins >> relay-users\n  mailsend relay hash-password gitea >> relay-users      # asks for it\n",
    )
    .action(async (user: string | undefined, opts: Record<string, unknown>) =>
      setExit(await runRelayHashPassword(user, opts, io)),
    );
}
