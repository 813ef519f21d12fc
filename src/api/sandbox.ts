/**
 * createSandbox(): the local emulator of `mailsend sandbox`, in this
 * process, on free ports, with a throw-away data dir unless one is given.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MailsendError } from "../core/errors.js";
import type { Sandbox } from "../sandbox/server.js";
import { asMailsendError } from "./send.js";
import type { searchMethods } from "./sandbox-search.js";
import type { MailSandbox, SandboxMessage, SandboxOptions, SendOptions } from "./types.js";

/** The first key: made on this start, or kept in the data dir's key file from an earlier one. */
async function firstKey(sb: Sandbox): Promise<string> {
  try {
    return (
      sb.createdKey?.key ??
      (existsSync(sb.paths.apiKeyFile)
        ? readFileSync(sb.paths.apiKeyFile, "utf8").trim()
        : sb.keys.add({ label: "api" }).key)
    );
  } catch (e) {
    await sb.close();
    throw e;
  }
}

/** The caller's handle on a started sandbox: where to reach it, send options for it, its messages. */
function sandboxHandle(
  sb: Sandbox,
  apiKey: string,
  search: ReturnType<typeof searchMethods>,
  tempDir: string | undefined,
): MailSandbox {
  const limits = { rateLimit: sb.limiter.limit, rateWindowMs: sb.limiter.windowMs };
  // The clients' state (the budget's file of this sandbox's key; a child mailsend's outbox) in
  // the data dir, not the user's state dir: a throw-away sandbox's key is new on every start, so
  // each test run would leave another budget file behind in ~/.local/state/mailsend.
  const stateDir = join(sb.dir, "client-state");
  const smtp = { host: sb.host, port: sb.ports.smtp, tls: "starttls" as const };
  const smtps = { host: sb.host, port: sb.ports.smtps, tls: "implicit" as const };
  let closing: Promise<void> | undefined;
  return {
    dir: sb.dir,
    baseUrl: sb.urls.baseUrl,
    inboxUrl: sb.urls.inbox,
    smtp,
    smtps,
    apiKey,
    caFile: sb.tls.caPath,
    env: { ...sb.env, MAILSEND_STATE_DIR: stateDir },
    options(transport = "rest"): SendOptions {
      const common = { apiKey, caFile: sb.tls.caPath, stateDir, ...limits };
      if (transport === "rest") return { transport: "rest", baseUrl: sb.urls.baseUrl, ...common };
      const s = transport === "smtps" ? smtps : smtp;
      return { transport: "smtp", smtp: { host: s.host, port: s.port, tls: s.tls }, ...common };
    },
    async messages(): Promise<SandboxMessage[]> {
      return (await sb.store.list()).map(({ keyId: _keyId, ...m }) => m);
    },
    ...search,
    close: () =>
      (closing ??= (async () => {
        await sb.close();
        if (tempDir) await rm(tempDir, { recursive: true, force: true });
      })()),
  };
}

export async function createSandbox(options: SandboxOptions = {}): Promise<MailSandbox> {
  let tempDir: string | undefined;
  try {
    if (options.dir !== undefined && typeof options.dir !== "string")
      throw new MailsendError("usage", "options.dir must be a path");
    const dir = options.dir ?? (tempDir = await mkdtemp(join(tmpdir(), "mailsend-sandbox-")));
    // Loaded only here: a program that only sends never loads the SMTP server.
    const [{ startSandbox }, { searchMethods }] = await Promise.all([
      import("../sandbox/server.js"),
      import("./sandbox-search.js"),
    ]);
    const sb = await startSandbox({
      dir,
      host: options.host ?? "127.0.0.1",
      httpPort: options.httpPort ?? 0,
      smtpPort: options.smtpPort ?? 0,
      smtpsPort: options.smtpsPort ?? 0,
      ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
      ...(options.rateWindowMs !== undefined ? { rateWindowMs: options.rateWindowMs } : {}),
      ...(options.maxSize !== undefined ? { maxSize: options.maxSize } : {}),
    });
    const apiKey = await firstKey(sb);
    return sandboxHandle(sb, apiKey, searchMethods(sb.store), tempDir);
  } catch (e) {
    if (tempDir) await rm(tempDir, { recursive: true, force: true });
    throw asMailsendError(e instanceof MailsendError ? e.in("api") : e);
  }
}
