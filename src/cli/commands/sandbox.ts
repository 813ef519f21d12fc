/**
 * `mailsend sandbox`: run the local emulator until SIGINT/SIGTERM, and
 * `mailsend sandbox keys add|list|revoke`.
 */
import type { Command } from "commander";
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { localFileError, MailsendError } from "../../core/errors.js";
import { parseExpiry, KeyStore, type KeyInfo } from "../../sandbox/keys.js";
import { defaultSandboxDir, sandboxPaths } from "../../sandbox/paths.js";
import type { Sandbox, SandboxOptions, SANDBOX_DEFAULTS } from "../../sandbox/server.js";
import type { StoredMessage } from "../../sandbox/types.js";
import { writeFileAtomic } from "../../core/atomic.js";
import { colorsFor, shellWord, type CliIO, type Colors } from "../io.js";
import { reportError } from "../report.js";
import type { CommandContext } from "../command.js";
import { examples } from "../help-examples.js";
import { addSandboxOptions, DIR_OPTION, JSON_OPTION, SANDBOX_OPTIONS } from "../sandbox-options.js";

/** The flags of `mailsend sandbox`: the library's options by their names, each fault by its own, and --json. */
export type SandboxFlags = Partial<Omit<SandboxOptions, "faults" | "token">> &
  Omit<NonNullable<SandboxOptions["faults"]>, "latencyMs"> & {
    /** --latency: milliseconds added before each answer (the faults' latencyMs). */
    latency?: number;
    json?: boolean;
  };

/** Waits for the signal that ends the sandbox; injectable for tests. */
export type StopSignal = () => Promise<string>;

export function processStopSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(sig);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

export function sandboxDir(flags: { dir?: string }, env: CliIO["env"]): string {
  return flags.dir ?? defaultSandboxDir(env);
}

/**
 * The environment to point clients at the sandbox. A shell that already trusts CAs of its own
 * through NODE_EXTRA_CA_CERTS (a company proxy's, a private registry's) would lose them to the
 * sandbox's line, and Node programs in it would then fail TLS: there, the line names a bundle of
 * that file and the sandbox's CA, written beside the CA. `bundled` names the user's file then.
 */
export function clientEnv(sb: Sandbox, env: CliIO["env"]): { env: Record<string, string>; bundled?: string } {
  const theirs = env.NODE_EXTRA_CA_CERTS?.trim();
  const bundle = join(dirname(sb.tls.caPath), "ca-bundle.pem");
  const same = (a: string, b: string) => {
    try {
      return realpathSync(a) === realpathSync(b);
    } catch {
      return resolve(a) === resolve(b);
    }
  };
  if (!theirs || same(theirs, sb.tls.caPath)) return { env: sb.env };
  // A shell that pasted the bundle's line at an earlier start: it keeps naming the bundle.
  if (same(theirs, bundle) && existsSync(bundle)) return { env: { ...sb.env, NODE_EXTRA_CA_CERTS: bundle } };
  let pem: string;
  try {
    pem = readFileSync(theirs, "utf8");
  } catch {
    // Node itself skips a file it cannot read (with a warning): there is nothing of theirs to keep.
    return { env: sb.env };
  }
  try {
    writeFileSync(bundle, `${pem.trimEnd()}\n${sb.tls.ca.trimEnd()}\n`, { mode: 0o644 });
  } catch {
    return { env: sb.env };
  }
  return { env: { ...sb.env, NODE_EXTRA_CA_CERTS: bundle }, bundled: theirs };
}

function readyJson(sb: Sandbox, env: Record<string, string>): Record<string, unknown> {
  return {
    ready: true,
    pid: process.pid,
    dir: sb.dir,
    base_url: sb.urls.baseUrl,
    inbox_url: sb.urls.inbox,
    http_port: sb.ports.http,
    smtp: { host: sb.host, port: sb.ports.smtp, tls: "starttls" },
    smtps: { host: sb.host, port: sb.ports.smtps, tls: "implicit" },
    ca_file: sb.tls.caPath,
    api_key_file: sb.apiKeyFile ?? null,
    key_created: sb.createdKey ? sb.createdKey.id : null,
    rate_limit: { limit: sb.limiter.limit, window_ms: sb.limiter.windowMs },
    // Beyond loopback: the token of /_sandbox/* and the inbox, given only here, once.
    exposed: sb.exposed,
    token: sb.token ?? null,
    env,
  };
}

/** Beyond loopback: anyone who reaches the ports can send, so the control API and the inbox need the token. */
function exposedLines(sb: Sandbox, c: Colors, listenHost: string): string[] {
  if (!sb.exposed) return [];
  return [
    "",
    c.yellow(
      `warning: listening on ${listenHost}${listenHost === "0.0.0.0" || listenHost === "::" ? " (every interface)" : ""}, beyond this machine: anyone who can reach these ports can send with a key, so the control API (/_sandbox/*) and the inbox require this token, shown only this once:`,
    ),
    `  ${sb.token}`,
    c.dim(
      `  curl: -H 'Authorization: Bearer <token>'   browser: open the inbox once as ${sb.urls.inbox}?token=<token>`,
    ),
  ];
}

/** The key made at this start (shown only here), or how to make one when there is no key file. */
function keyLines(sb: Sandbox, c: Colors): string[] {
  if (sb.createdKey)
    return [
      `New API key ${sb.createdKey.id}, shown only this once (also saved in ${sb.apiKeyFile}, mode 0600):`,
      `  ${sb.createdKey.key}`,
      "",
    ];
  if (sb.apiKeyFile) return [];
  return [
    c.yellow(
      `No key file in ${sb.dir}: make a key with \`mailsend sandbox keys add --save --dir ${shellWord(sb.dir)}\`.`,
    ),
    "",
  ];
}

/** The environment to paste into a shell, so that mailsend there sends to the sandbox. */
function clientLines(sb: Sandbox, c: Colors, client: ReturnType<typeof clientEnv>): string[] {
  const lines = ["Point mailsend at it (paste into your shell):"];
  for (const [k, v] of Object.entries(client.env)) lines.push(`  export ${k}=${shellWord(v)}`);
  if (client.bundled)
    lines.push(
      c.dim(
        `  # NODE_EXTRA_CA_CERTS names your ${client.bundled} and the sandbox's CA together, so nothing you trusted is lost`,
      ),
    );
  lines.push(c.dim(`  # implicit TLS instead: export MAILSEND_SMTP_PORT=${sb.ports.smtps} MAILSEND_SMTP_TLS=implicit`));
  return lines;
}

function banner(sb: Sandbox, io: CliIO, listenHost: string, client: ReturnType<typeof clientEnv>): string {
  const c = colorsFor(io.stdout, io.env);
  const lines: string[] = [];
  lines.push(`${c.green("mailsend sandbox is running")} ${c.dim(`(data in ${sb.dir})`)}`);
  lines.push("");
  lines.push(`  REST    POST ${sb.urls.baseUrl}/send`);
  lines.push(
    `  SMTP    ${sb.host}:${sb.ports.smtp} (STARTTLS required)   ${sb.host}:${sb.ports.smtps} (implicit TLS)   user ${sb.env.MAILSEND_SMTP_USER ?? "mailsend"}`,
  );
  lines.push(`  Inbox   ${sb.urls.inbox}`);
  lines.push(
    `  Limit   ${sb.limiter.limit} requests per ${sb.limiter.windowMs / 1000} s per key, REST and SMTP together`,
  );
  lines.push(...exposedLines(sb, c, listenHost));
  const f = sb.faults.config;
  if (f.failRate > 0 || f.dropRate > 0 || f.latencyMs > 0) {
    lines.push(
      `  Faults  ${c.yellow(`fail ${f.failRate * 100}% (HTTP ${f.failStatus} / SMTP ${f.failSmtpCode}), drop ${f.dropRate * 100}% (${f.dropWhen} storing), +${f.latencyMs} ms`)}`,
    );
  }
  lines.push("");
  lines.push(...keyLines(sb, c));
  lines.push(...clientLines(sb, c, client));
  lines.push("");
  lines.push("Press Ctrl+C to stop.");
  return `${lines.join("\n")}\n`;
}

function logLine(m: StoredMessage): string {
  const att = m.attachments.length ? `, ${m.attachments.length} attachment(s)` : "";
  return `${m.receivedAt} ${m.channel.padEnd(4)} ${m.id} ${m.from} -> ${m.to.join(", ")} ${JSON.stringify(m.subject)} (${m.size} bytes${att})\n`;
}

/** The sandbox's options from its flags: the checks a flag alone can fail. */
function sandboxOptions(flags: SandboxFlags, env: CliIO["env"], defaults: typeof SANDBOX_DEFAULTS): SandboxOptions {
  const faults: NonNullable<SandboxOptions["faults"]> = {
    ...(flags.failRate !== undefined ? { failRate: flags.failRate } : {}),
    ...(flags.failStatus !== undefined ? { failStatus: flags.failStatus } : {}),
    ...(flags.failSmtpCode !== undefined ? { failSmtpCode: flags.failSmtpCode } : {}),
    ...(flags.latency !== undefined ? { latencyMs: flags.latency } : {}),
    ...(flags.dropRate !== undefined ? { dropRate: flags.dropRate } : {}),
    ...(flags.dropWhen !== undefined ? { dropWhen: flags.dropWhen } : {}),
  };
  if (flags.rateLimit === 0) throw new MailsendError("usage", "--rate-limit must be at least 1");
  for (const [name, v] of [
    ["--http-port", flags.httpPort],
    ["--smtp-port", flags.smtpPort],
    ["--smtps-port", flags.smtpsPort],
  ] as const) {
    if (v !== undefined && v > 65535) throw new MailsendError("usage", `${name} must be from 0 to 65535`);
  }
  return {
    dir: sandboxDir(flags, env),
    host: flags.host ?? defaults.host,
    httpPort: flags.httpPort ?? defaults.httpPort,
    smtpPort: flags.smtpPort ?? defaults.smtpPort,
    smtpsPort: flags.smtpsPort ?? defaults.smtpsPort,
    ...(flags.rateLimit !== undefined ? { rateLimit: flags.rateLimit } : {}),
    ...(flags.rateWindowMs !== undefined ? { rateWindowMs: Math.max(1, flags.rateWindowMs) } : {}),
    ...(flags.maxSize !== undefined ? { maxSize: flags.maxSize } : {}),
    ...(flags.writerThreads !== undefined ? { writerThreads: flags.writerThreads } : {}),
    ...(flags.smtpUser !== undefined ? { smtpUser: flags.smtpUser } : {}),
    // A token the clients already know (a compose file, a CI service): else a new one per start.
    ...(env.MAILSEND_SANDBOX_TOKEN ? { token: env.MAILSEND_SANDBOX_TOKEN } : {}),
    faults,
  };
}

/** A full or read-only data dir is this machine's fault (73), named by the dir when the error names no file. */
function dataDirError(e: unknown, dir: string): unknown {
  const errno = e as NodeJS.ErrnoException;
  const local =
    !(e instanceof MailsendError) &&
    typeof errno?.code === "string" &&
    ["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EIO"].includes(errno.code);
  if (!local) return e;
  return localFileError(
    e,
    errno.path ?? dir,
    errno.code === "EIO" ? "read" : "write",
    errno.path ? "file" : "sandbox data dir",
  );
}

export async function runSandbox(
  flags: SandboxFlags,
  io: CliIO,
  stop: StopSignal = processStopSignal,
): Promise<number> {
  const json = flags.json ?? false;
  let sb: Sandbox | undefined;
  try {
    const { startSandbox, SANDBOX_DEFAULTS } = await import("../../sandbox/server.js");
    const options = sandboxOptions(flags, io.env, SANDBOX_DEFAULTS);
    const stopped = stop();
    sb = await startSandbox(options);
    const running = sb;
    const client = clientEnv(running, io.env);
    if (json) io.stdout.write(`${JSON.stringify(readyJson(running, client.env))}\n`);
    else {
      io.stdout.write(banner(running, io, flags.host ?? SANDBOX_DEFAULTS.host, client));
      const c = colorsFor(io.stderr, io.env);
      running.store.subscribe((m) => io.stderr.write(c.dim(logLine(m))));
    }
    const sig = await stopped;
    if (!json) io.stderr.write(`\n${sig}: stopping the sandbox\n`);
    await running.close();
    return 0;
  } catch (e) {
    await sb?.close().catch(() => {});
    return reportError(dataDirError(e, sandboxDir(flags, io.env)), io, { json });
  }
}

interface KeysFlags {
  dir?: string;
  json?: boolean;
  label?: string;
  expires?: string;
  save?: boolean;
}

function openKeys(flags: KeysFlags, io: CliIO): { store: KeyStore; dir: string } {
  const dir = sandboxDir(flags, io.env);
  return { store: KeyStore.open(sandboxPaths(dir).keys), dir };
}

export async function runKeysAdd(flags: KeysFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    const expires = flags.expires !== undefined ? parseExpiry(flags.expires) : undefined;
    const { store, dir } = openKeys(flags, io);
    const { record, key } = store.add({
      ...(flags.label !== undefined ? { label: flags.label } : {}),
      ...(expires ? { expires } : {}),
    });
    const saved = flags.save ? sandboxPaths(dir).apiKeyFile : undefined;
    if (saved) writeFileAtomic(saved, `${key}\n`, { mode: 0o600 });
    const { hash: _hash, ...info } = record;
    if (json) io.stdout.write(`${JSON.stringify({ ...info, key, ...(saved ? { saved_to: saved } : {}) })}\n`);
    else {
      io.stdout.write(`${key}\n`);
      const c = colorsFor(io.stderr, io.env);
      io.stderr.write(
        c.dim(
          `key ${record.id}${record.label ? ` (${record.label})` : ""}${record.expires ? `, expires ${record.expires}` : ""}: shown only this once${
            saved
              ? `; saved in ${saved}`
              : "; keep it in a 0600 file and point MAILSEND_API_KEY_FILE at it (or `--save` writes the sandbox's key file)"
          }\n`,
        ),
      );
    }
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

function keyRow(k: KeyInfo): string[] {
  return [k.id, k.state, k.label || "-", k.created, k.expires ?? "-"];
}

export function table(rows: string[][], header: string[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return `${all.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n")}\n`;
}

export async function runKeysList(flags: KeysFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    const { store, dir } = openKeys(flags, io);
    const keys = store.list();
    if (json) io.stdout.write(`${JSON.stringify(keys)}\n`);
    else if (keys.length === 0) io.stderr.write(`no keys in ${dir} (the sandbox makes one on its first start)\n`);
    else io.stdout.write(table(keys.map(keyRow), ["ID", "STATE", "LABEL", "CREATED", "EXPIRES"]));
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

export async function runKeysRevoke(id: string, flags: KeysFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    const { store } = openKeys(flags, io);
    const info = store.revoke(id);
    if (json) io.stdout.write(`${JSON.stringify(info)}\n`);
    else io.stdout.write(`revoked ${info.id}${info.label ? ` (${info.label})` : ""}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

const SANDBOX_HELP = `
While it runs: POST /_sandbox/faults {"failRate":0.5,"failStatus":503} changes the faults,
DELETE /_sandbox/faults clears them, GET /_sandbox/stats counts answers per channel.

Examples:
  mailsend sandbox                              # ports 8025 (HTTP), 2587 (STARTTLS), 2465 (TLS)
  mailsend sandbox --http-port 0 --smtp-port 0 --smtps-port 0 --json   # free ports, one JSON line
  mailsend sandbox --rate-limit 5 --fail-rate 0.2 --latency 300        # test a script's retries
  mailsend sandbox keys add --label ci --expires 30d
  mailsend inbox && mailsend inbox show <id> --raw
`;

/** `mailsend sandbox` and its `keys` sub-commands. */
export function register(program: Command, { io, setExit }: CommandContext): void {
  const sandbox = program
    .command("sandbox")
    .description("run a local copy of the service: REST, SMTP, keys, limits, stored mail, web inbox")
    .addHelpText("after", SANDBOX_HELP);
  addSandboxOptions(sandbox, SANDBOX_OPTIONS);
  sandbox.action(async (opts: SandboxFlags) => setExit(await runSandbox(opts, io)));
  registerKeys(sandbox, { io, setExit });
}

// --dir may come before `keys` (the sandbox's option) or after it.
const keyOpts = (cmd: Command) => cmd.optsWithGlobals() as KeysFlags;

/** `mailsend sandbox keys add`: its options say what the new key is for, how long it lives, where it is saved. */
function registerKeysAdd(keys: Command, io: CliIO, setExit: CommandContext["setExit"]): void {
  const add = keys
    .command("add")
    .description("make a key and print it (the only time it is shown)")
    .addHelpText(
      "after",
      examples([
        "mailsend sandbox keys add                               # prints the new key once",
        "mailsend sandbox keys add --label ci --expires 30d --json",
        "mailsend sandbox keys add --save   # also to <dir>/api-key, for MAILSEND_API_KEY_FILE",
      ]),
    );
  addSandboxOptions(add, [
    DIR_OPTION,
    { flags: "--label <text>", description: "what the key is for" },
    { flags: "--expires <when>", description: "a duration (90s, 15m, 12h, 30d, 2w) or a date (2027-01-31)" },
    {
      flags: "--save",
      description: "also write it to <dir>/api-key (mode 0600), the file MAILSEND_API_KEY_FILE points at",
    },
    JSON_OPTION,
  ]);
  add.action(async (_opts: unknown, cmd: Command) => setExit(await runKeysAdd(keyOpts(cmd), io)));
}

function registerKeys(sandbox: Command, { io, setExit }: Pick<CommandContext, "io" | "setExit">): void {
  const keys = sandbox
    .command("keys")
    .description("manage the sandbox's API keys (stored hashed)")
    .addHelpText(
      "after",
      examples([
        "mailsend sandbox keys add --label ci --expires 30d",
        "mailsend sandbox keys list",
        "mailsend sandbox keys revoke key_3f9a2c1d",
      ]),
    );
  registerKeysAdd(keys, io, setExit);
  const list = keys
    .command("list")
    .description("list keys: id, state, label, dates (never the keys)")
    .addHelpText(
      "after",
      examples([
        "mailsend sandbox keys list",
        "mailsend sandbox keys list --json | jq -r '.[] | select(.state == \"active\") | .id'",
      ]),
    );
  addSandboxOptions(list, [DIR_OPTION, JSON_OPTION]);
  list.action(async (_opts: unknown, cmd: Command) => setExit(await runKeysList(keyOpts(cmd), io)));
  const revoke = keys
    .command("revoke")
    .description("revoke a key by id; it fails on REST and SMTP from then on")
    .argument("<id>")
    .addHelpText(
      "after",
      examples([
        "mailsend sandbox keys revoke key_3f9a2c1d      # the id from `mailsend sandbox keys list`",
        "mailsend sandbox keys revoke key_3f9a2c1d --dir ./sandbox-data --json",
      ]),
    );
  addSandboxOptions(revoke, [DIR_OPTION, JSON_OPTION]);
  revoke.action(async (id: string, _opts: unknown, cmd: Command) => setExit(await runKeysRevoke(id, keyOpts(cmd), io)));
}
