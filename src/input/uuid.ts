/**
 * A random (version 4) UUID, as `crypto.randomUUID()` makes one: a message's idempotency key.
 *
 * Why not node:crypto: loading it costs a one-shot `mailsend send` (and a dry run) about 8 ms of
 * its start-up, for 16 random bytes. Where the system has /dev/urandom (the kernel's CSPRNG, the
 * source OpenSSL itself draws on), they are read from it; anywhere else, or if it cannot be read,
 * from crypto.randomUUID() (loaded only then).
 */
import { randomUUID as cryptoUUID } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";

let urandom = process.platform !== "win32";

function randomBytes16(): Buffer | undefined {
  if (!urandom) return undefined;
  const buf = Buffer.alloc(16);
  let fd: number | undefined;
  try {
    fd = openSync("/dev/urandom", "r");
    for (let off = 0; off < 16; ) {
      const n = readSync(fd, buf, off, 16 - off, null);
      if (n <= 0) throw new Error("short read");
      off += n;
    }
    return buf;
  } catch {
    urandom = false;
    return undefined;
  } finally {
    if (fd !== undefined) {
      try {
        closeSync(fd);
      } catch {}
    }
  }
}

export function randomUuid(): string {
  const b = randomBytes16();
  if (!b) return cryptoUUID();
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = b.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
