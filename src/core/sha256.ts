/**
 * SHA-256 of a short string (its UTF-8 bytes), as lowercase hex: the same digest as
 * `createHash("sha256").update(text).digest("hex")`.
 *
 * Why not node:crypto: loading it costs a one-shot `mailsend send` about 8 ms of its start-up
 * (more than the whole request to a local server), and the budget needs only one digest of a
 * string of a few dozen bytes per run (the name of the key's rate-limit state). @noble/hashes is an
 * audited, dependency-free implementation, bundled (its SHA-2 code is a few KB of the core chunk).
 * The digest is the same (a unit test compares the two), so state files and Redis keys keep their
 * names.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

export function sha256Hex(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text)));
}
