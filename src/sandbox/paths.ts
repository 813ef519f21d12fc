/**
 * Where a sandbox keeps its state. One directory holds everything, so that
 * `--dir` (or MAILSEND_SANDBOX_DIR) moves all of it and a test's temp dir
 * is a whole, isolated service.
 */
import { expandHome } from "../core/home.js";
import { homedir } from "node:os";
import { join } from "node:path";

export interface SandboxPaths {
  dir: string;
  /** Hashed keys (never the keys themselves). */
  keys: string;
  /** The first key in clear, mode 0600, for MAILSEND_API_KEY_FILE. */
  apiKeyFile: string;
  messages: string;
  index: string;
  tls: string;
  lock: string;
  /** The HTTP base URL of the sandbox running on this dir, while it runs (for `mailsend inbox wait`). */
  url: string;
}

export function sandboxPaths(dir: string): SandboxPaths {
  return {
    dir,
    keys: join(dir, "keys.json"),
    apiKeyFile: join(dir, "api-key"),
    messages: join(dir, "messages"),
    index: join(dir, "index.jsonl"),
    tls: join(dir, "tls"),
    lock: join(dir, "sandbox.lock"),
    url: join(dir, "sandbox.url"),
  };
}

/** MAILSEND_SANDBOX_DIR, else $XDG_DATA_HOME/mailsend/sandbox, else ~/.local/share/mailsend/sandbox. */
export function defaultSandboxDir(env: Record<string, string | undefined>): string {
  if (env.MAILSEND_SANDBOX_DIR) return expandHome(env.MAILSEND_SANDBOX_DIR, env);
  const base = env.XDG_DATA_HOME || join(env.HOME || homedir(), ".local", "share");
  return join(base, "mailsend", "sandbox");
}
