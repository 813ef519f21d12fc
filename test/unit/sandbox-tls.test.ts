/**
 * The sandbox's (and the relay's --tls-self-signed) CA and certificate are made once and kept:
 * a restart finds them valid for the same hosts (::1 among them) and reuses them, so clients that
 * trust the CA keep trusting the server. Another host set makes new ones.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureTls } from "../../src/sandbox/tls.js";
import { scratch } from "../helpers/tmp.js";

const tmp = scratch("mailsend-sandbox-tls-");
afterAll(() => tmp.remove());

describe("ensureTls", () => {
  it("reuses the CA and certificate it made, for localhost, 127.0.0.1 and ::1", async () => {
    const dir = join(tmp.dir, "tls");
    const first = await ensureTls(dir);
    const again = await ensureTls(dir);
    expect(again.ca).toBe(first.ca);
    expect(again.cert).toBe(first.cert);
    expect(readFileSync(join(dir, "ca.pem"), "utf8")).toBe(first.ca);
  });

  it("makes new ones when a host is not in the certificate (127.0.0.10 is not 127.0.0.1)", async () => {
    const dir = join(tmp.dir, "tls2");
    const first = await ensureTls(dir, ["localhost", "127.0.0.1"]);
    const other = await ensureTls(dir, ["localhost", "127.0.0.10"]);
    expect(other.ca).not.toBe(first.ca);
    const v6 = await ensureTls(dir, ["localhost", "127.0.0.10", "::1"]);
    expect(v6.ca).not.toBe(other.ca);
    expect((await ensureTls(dir, ["::1", "localhost"])).ca).toBe(v6.ca);
  });
});
