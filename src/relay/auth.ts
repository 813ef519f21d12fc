/**
 * The relay's users: a text file of `user:scrypt$N$r$p$salt$hash` lines
 * (salt and hash in base64), made with `mailsend relay hash-password`.
 * Blank lines and lines starting with # are skipped. Passwords are compared
 * by their scrypt hashes with timingSafeEqual; an unknown user costs the same
 * scrypt as a known one, so timing does not tell which names exist.
 */
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { localFileError, MailsendError } from "../core/errors.js";

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

interface ScryptHash {
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

function derive(password: string, salt: Buffer, n: number, r: number, p: number, keylen: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // maxmem: N=2^20 would need 1 GiB; 128 * N * r * 2 leaves room for what we write (and a little more).
    scrypt(password.normalize("NFC"), salt, keylen, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 }, (e, key) =>
      e ? reject(e) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, N, R, P, KEYLEN);
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

function parseHash(s: string): ScryptHash | undefined {
  const m = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(s);
  if (!m) return undefined;
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // A power of two, and not so large that checking one password takes the machine down.
  if (n < 2 || n > 1 << 20 || (n & (n - 1)) !== 0 || r < 1 || r > 32 || p < 1 || p > 16) return undefined;
  const salt = Buffer.from(m[4]!, "base64");
  const hash = Buffer.from(m[5]!, "base64");
  if (salt.length < 8 || hash.length < 16 || hash.length > 128) return undefined;
  return { n, r, p, salt, hash };
}

export class RelayUsers {
  private readonly dummy: ScryptHash;

  private constructor(private readonly users: Map<string, ScryptHash>) {
    this.dummy = { n: N, r: R, p: P, salt: Buffer.alloc(16, 7), hash: Buffer.alloc(KEYLEN) };
  }

  get size(): number {
    return this.users.size;
  }

  /** Parse the file's text; a bad line is a configuration error naming its line number (never its content). */
  static parse(text: string, path: string): RelayUsers {
    const users = new Map<string, ScryptHash>();
    const lines = text.split(/\r?\n/);
    lines.forEach((line, i) => {
      const t = line.trim();
      if (t === "" || t.startsWith("#")) return;
      const colon = t.indexOf(":");
      const user = colon > 0 ? t.slice(0, colon).trim() : "";
      const h = colon > 0 ? parseHash(t.slice(colon + 1).trim()) : undefined;
      if (!user || /\s/.test(user) || !h) {
        throw new MailsendError(
          "config_invalid",
          `${path} line ${i + 1} is not "user:scrypt$..." as made by \`mailsend relay hash-password\``,
          {
            hint: `Make each line with: printf '%s' 'the password' | mailsend relay hash-password USER >> ${path}`,
          },
        );
      }
      if (users.has(user))
        throw new MailsendError(
          "config_invalid",
          `${path} line ${i + 1}: the user ${JSON.stringify(user)} is listed twice`,
        );
      users.set(user, h);
    });
    if (users.size === 0) {
      throw new MailsendError("config_invalid", `${path} lists no users`, {
        hint: `Add one with: printf '%s' 'the password' | mailsend relay hash-password USER >> ${path}`,
      });
    }
    return new RelayUsers(users);
  }

  static async load(path: string): Promise<RelayUsers> {
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        throw new MailsendError("config_invalid", `the auth file ${path} does not exist`, {
          hint: `Make it with: printf '%s' 'the password' | mailsend relay hash-password USER > ${path}`,
        });
      }
      throw localFileError(e, path, "read", "auth file");
    }
    return RelayUsers.parse(text, path);
  }

  async verify(user: string | undefined, password: string | undefined): Promise<boolean> {
    const known = user !== undefined ? this.users.get(user) : undefined;
    const h = known ?? this.dummy;
    const got = await derive(password ?? "", h.salt, h.n, h.r, h.p, h.hash.length);
    return timingSafeEqual(got, h.hash) && known !== undefined && password !== undefined;
  }
}
