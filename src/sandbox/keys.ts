/**
 * API keys of the sandbox. The file holds only a sha256 of each key, with an
 * id to name it by (in the inbox, in `keys list`, in `keys revoke`); the key
 * itself is shown once, when it is made.
 *
 * A running sandbox re-reads the file when it changes, so `mailsend sandbox
 * keys revoke` from another terminal takes effect on the next request.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { durationMs } from "../core/duration.js";
import { MailsendError } from "../core/errors.js";
import { writeFileAtomic } from "../core/atomic.js";

export interface KeyRecord {
  id: string;
  label: string;
  /** Hex sha256 of the key. */
  hash: string;
  created: string;
  expires?: string;
  revoked: boolean;
  revokedAt?: string;
}

/** What `keys list` shows: everything but the hash. */
export type KeyInfo = Omit<KeyRecord, "hash"> & { state: "active" | "revoked" | "expired" };

export type KeyCheck =
  | { ok: true; key: KeyRecord }
  | { ok: false; reason: "missing" | "invalid" | "revoked" | "expired"; key?: KeyRecord };

interface KeysFile {
  version: 1;
  keys: KeyRecord[];
}

const KEY_PREFIX = "msk_";
const REFRESH_MS = 50;

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

function newKey(): string {
  return KEY_PREFIX + randomBytes(24).toString("base64url");
}

/** "90s", "15m", "12h", "30d", "2w", or an ISO date / date-time. */
export function parseExpiry(spec: string, now = Date.now()): Date {
  const ms = durationMs(spec, { unit: "required" });
  let at: number;
  if (ms !== undefined) at = now + ms;
  else if (/^\d{4}-\d{2}-\d{2}/.test(spec.trim())) at = Date.parse(spec.trim());
  else at = Number.NaN;
  if (Number.isNaN(at)) {
    throw new MailsendError(
      "usage",
      `--expires ${JSON.stringify(spec)}: expected a duration (90s, 15m, 12h, 30d, 2w) or a date (2027-01-31, 2027-01-31T12:00:00Z)`,
    );
  }
  if (at <= now) throw new MailsendError("usage", `--expires ${JSON.stringify(spec)} is not in the future`);
  return new Date(at);
}

export function keyState(k: KeyRecord, now = Date.now()): KeyInfo["state"] {
  if (k.revoked) return "revoked";
  if (k.expires && Date.parse(k.expires) <= now) return "expired";
  return "active";
}

export class KeyStore {
  readonly path: string;
  #keys: KeyRecord[] = [];
  #byHash = new Map<string, KeyRecord>();
  #stamp = "";
  #checkedAt = 0;

  private constructor(path: string) {
    this.path = path;
  }

  /** Open the keys file (an absent file is an empty store). */
  static open(path: string): KeyStore {
    const s = new KeyStore(path);
    s.reload();
    return s;
  }

  #fileStamp(): string {
    try {
      const st = statSync(this.path);
      return `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch {
      return "absent";
    }
  }

  reload(): void {
    this.#stamp = this.#fileStamp();
    if (this.#stamp === "absent") {
      this.#set([]);
      return;
    }
    let parsed: KeysFile;
    try {
      parsed = JSON.parse(readFileSync(this.path, "utf8")) as KeysFile;
      if (!Array.isArray(parsed.keys)) throw new Error("no keys array");
    } catch (e) {
      throw new MailsendError(
        "config_invalid",
        `the sandbox keys file ${this.path} is damaged (${(e as Error).message})`,
        {
          hint: "Move it away; the sandbox makes a new one with a new key on its next start.",
        },
      );
    }
    this.#set(parsed.keys);
  }

  /**
   * Picks up changes made by another process (`keys revoke` in another
   * terminal): one stat at most every REFRESH_MS, so a request under load
   * does not pay for it.
   */
  refresh(now = Date.now()): void {
    if (now - this.#checkedAt < REFRESH_MS) return;
    this.#checkedAt = now;
    if (this.#fileStamp() !== this.#stamp) this.reload();
  }

  #set(keys: KeyRecord[]): void {
    this.#keys = keys;
    this.#byHash = new Map(keys.map((k) => [k.hash, k]));
  }

  #save(): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const file: KeysFile = { version: 1, keys: this.#keys };
    writeFileAtomic(this.path, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    this.#stamp = this.#fileStamp();
  }

  get size(): number {
    return this.#keys.length;
  }

  verify(key: string | undefined, now = Date.now()): KeyCheck {
    if (!key) return { ok: false, reason: "missing" };
    this.refresh();
    const hash = hashKey(key);
    const found = this.#byHash.get(hash);
    // The map lookup already matched; the constant-time compare is belt and braces.
    if (!found || !timingSafeEqual(Buffer.from(found.hash, "hex"), Buffer.from(hash, "hex")))
      return { ok: false, reason: "invalid" };
    const state = keyState(found, now);
    if (state !== "active") return { ok: false, reason: state, key: found };
    return { ok: true, key: found };
  }

  /** The state of a key by id now (a session authenticated earlier may outlive its key). */
  stateOf(id: string, now = Date.now()): KeyInfo["state"] | "unknown" {
    this.refresh();
    const k = this.#keys.find((r) => r.id === id);
    return k ? keyState(k, now) : "unknown";
  }

  /** Make a key. The returned `key` is the only time it exists in clear. */
  add(opts: { label?: string; expires?: Date } = {}): { record: KeyRecord; key: string } {
    this.reload();
    const key = newKey();
    let id: string;
    do id = `key_${randomBytes(4).toString("hex")}`;
    while (this.#keys.some((k) => k.id === id));
    const record: KeyRecord = {
      id,
      label: opts.label ?? "",
      hash: hashKey(key),
      created: new Date().toISOString(),
      ...(opts.expires ? { expires: opts.expires.toISOString() } : {}),
      revoked: false,
    };
    this.#set([...this.#keys, record]);
    this.#save();
    return { record, key };
  }

  list(now = Date.now()): KeyInfo[] {
    this.refresh();
    return this.#keys.map(({ hash: _hash, ...rest }) => ({ ...rest, state: keyState({ ...rest, hash: "" }, now) }));
  }

  revoke(id: string): KeyInfo {
    this.reload();
    const k = this.#keys.find((r) => r.id === id);
    if (!k) {
      throw new MailsendError("usage", `no key with id ${id}`, { hint: "`mailsend sandbox keys list` shows the ids." });
    }
    if (!k.revoked) {
      k.revoked = true;
      k.revokedAt = new Date().toISOString();
      this.#set([...this.#keys]);
      this.#save();
    }
    return this.list().find((r) => r.id === id)!;
  }

  exists(): boolean {
    return existsSync(this.path);
  }
}
