/**
 * The proxy's refusals read the same after the printing redactor (which
 * strips a URL's userinfo): a hint that says where the credentials go must
 * not be cut to nonsense on its way out, and never holds the password.
 */
import { describe, expect, test } from "vitest";
import { redactForPrint } from "../../src/core/redact.js";
import { parseProxyUrl } from "../../src/settings/proxy.js";
import { proxyFailure, proxyStatusError } from "../../src/transports/proxy.js";

const proxies = [
  parseProxyUrl("http://proxy.corp:3128", "HTTPS_PROXY"),
  parseProxyUrl("http://alice:pr0xy-secret@proxy.corp:3128", "--proxy (or MAILSEND_PROXY)"),
];

describe("proxy errors survive the printing redactor unchanged", () => {
  for (const proxy of proxies) {
    for (const status of [407, 403, 502, 503]) {
      test(`${proxy.label}: HTTP ${status}`, () => {
        const e = proxyStatusError(status, proxy, "api.example.com:443");
        expect(redactForPrint(e.message)).toBe(e.message);
        if (e.hint !== undefined) expect(redactForPrint(e.hint)).toBe(e.hint);
        expect(`${e.message} ${e.hint ?? ""}`).not.toContain("pr0xy-secret");
      });
    }
    for (const code of ["ECONNREFUSED", "ENOTFOUND", "ECONNRESET", "ETIMEDOUT"]) {
      test(`${proxy.label}: ${code}`, () => {
        const e = proxyFailure(Object.assign(new Error(code), { code }), proxy, "api.example.com:443");
        if (!e) return;
        expect(redactForPrint(e.message)).toBe(e.message);
        if (e.hint !== undefined) expect(redactForPrint(e.hint)).toBe(e.hint);
        expect(`${e.message} ${e.hint ?? ""}`).not.toContain("pr0xy-secret");
      });
    }
  }
});
