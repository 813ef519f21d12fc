/**
 * Scratch directories for a test file, and the sandbox's TLS material made
 * fresh inside one (a private CA + a cert for localhost/127.0.0.1), so
 * parallel test files never share or race on certificate files.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureTls, type TlsMaterial } from "../../src/sandbox/tls.js";

export interface Scratch {
  dir: string;
  /** Write a file under the scratch dir and return its path. */
  file(name: string, content: string | Buffer): string;
  tls(): Promise<TlsMaterial>;
  remove(): void;
}

export function scratch(prefix = "mailsend-test-"): Scratch {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let tls: Promise<TlsMaterial> | undefined;
  return {
    dir,
    file(name, content) {
      const p = join(dir, name);
      writeFileSync(p, content);
      return p;
    },
    tls() {
      tls ??= ensureTls(join(dir, "tls"));
      return tls;
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
