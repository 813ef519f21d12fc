import { describe, expect, test } from "vitest";
import { checkProxyFlag, proxyFor, smtpProxyFrom } from "../../src/settings/proxy.js";

const https = new URL("https://api.example.com/send");
const http = new URL("http://10.1.2.3:8080/send");

describe("which proxy, as curl reads the environment", () => {
  test("https:// takes https_proxy before HTTPS_PROXY, then ALL_PROXY; http:// takes http_proxy / HTTP_PROXY", () => {
    expect(
      proxyFor(https, undefined, { HTTPS_PROXY: "http://a:3128", https_proxy: "http://b:3128" }).proxy,
    ).toMatchObject({ host: "b", source: "https_proxy" });
    expect(proxyFor(https, undefined, { HTTP_PROXY: "http://a:3128" }).proxy).toBeUndefined();
    expect(proxyFor(https, undefined, { ALL_PROXY: "http://c:3128" }).proxy).toMatchObject({
      host: "c",
      source: "ALL_PROXY",
    });
    expect(
      proxyFor(http, undefined, { HTTP_PROXY: "http://a:3128", HTTPS_PROXY: "http://b:3128" }).proxy,
    ).toMatchObject({ host: "a", source: "HTTP_PROXY" });
  });

  test("--proxy, then MAILSEND_PROXY, override the environment; none goes direct", () => {
    expect(
      proxyFor(https, "http://f:1", { HTTPS_PROXY: "http://a:3128", MAILSEND_PROXY: "http://m:1" }).proxy,
    ).toMatchObject({ host: "f", source: "--proxy" });
    expect(
      proxyFor(https, undefined, { HTTPS_PROXY: "http://a:3128", MAILSEND_PROXY: "http://m:1" }).proxy,
    ).toMatchObject({ host: "m", source: "MAILSEND_PROXY" });
    expect(proxyFor(https, "none", { HTTPS_PROXY: "http://a:3128" })).toEqual({ bypass: "--proxy none" });
  });

  test("no scheme is http://; the default port is curl's (1080, 443 for https://); credentials become Proxy-Authorization, never the label", () => {
    const p = proxyFor(https, undefined, { HTTPS_PROXY: "u%40x:p%3Ass@proxy.corp" }).proxy!;
    expect(p).toMatchObject({
      protocol: "http:",
      host: "proxy.corp",
      port: 1080,
      label: "http://proxy.corp:1080",
      user: "u@x",
    });
    expect(p.authorization).toBe(`Basic ${Buffer.from("u@x:p:ss").toString("base64")}`);
    expect(proxyFor(https, undefined, { HTTPS_PROXY: "https://proxy.corp" }).proxy).toMatchObject({
      port: 443,
      label: "https://proxy.corp:443",
    });
  });

  test("a lone % in the proxy's user or password: a configuration error (78) that does not print the value, not an internal error", () => {
    for (const value of [
      "http://alice:s3cr%3tPX@127.0.0.1:3128",
      "http://al%ice:pw@127.0.0.1:3128",
      "http://alice:pw%@127.0.0.1:3128",
    ]) {
      let err: unknown;
      try {
        proxyFor(https, undefined, { HTTPS_PROXY: value });
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: "config_invalid", exitCode: 78 });
      expect((err as Error).message).toMatch(/badly %-encoded (password|user name)/);
      expect((err as Error).message).not.toMatch(/s3cr|pw%|al%ice/);
      expect((err as { hint: string }).hint).toContain("%25");
    }
  });

  test("NO_PROXY: names and their subdomains, a leading dot, *, IPs, CIDR ranges, :port", () => {
    const via = (noProxy: string, url = https) =>
      proxyFor(url, undefined, { HTTPS_PROXY: "http://p:1", HTTP_PROXY: "http://p:1", NO_PROXY: noProxy });
    expect(via("example.com").bypass).toBe("NO_PROXY (example.com)");
    expect(via(".example.com").bypass).toBeDefined();
    expect(via("xample.com").proxy).toBeDefined();
    expect(via("other.org, api.example.com").bypass).toBeDefined();
    expect(via("*").bypass).toBeDefined();
    expect(via("api.example.com:443").bypass).toBeDefined();
    expect(via("api.example.com:8443").proxy).toBeDefined();
    expect(via("10.0.0.0/8", http).bypass).toBe("NO_PROXY (10.0.0.0/8)");
    expect(via("10.1.2.3", http).bypass).toBeDefined();
    expect(via("10.1.2.4", http).proxy).toBeDefined();
    expect(via("11.0.0.0/8", http).proxy).toBeDefined();
    expect(via("::1/128", new URL("http://[::1]:9/")).bypass).toBeDefined();
    expect(via("fd00::/8", new URL("http://[fd12::5]/")).bypass).toBeDefined();
    expect(via("fd00::/8", new URL("http://[fe80::1]/")).proxy).toBeDefined();
    expect(
      proxyFor(https, undefined, { HTTPS_PROXY: "http://p:1", no_proxy: "example.com", NO_PROXY: "" }).bypass,
    ).toBe("no_proxy (example.com)");
  });

  test("what cannot be a REST proxy is a config error that does not print the value", () => {
    for (const bad of ["socks5://u:secret@h:1", "http://u:secret@h:1/path", "http://u:secret@[zz"]) {
      let err: { code?: string; message?: string } | undefined;
      try {
        proxyFor(https, undefined, { HTTPS_PROXY: bad });
      } catch (e) {
        err = e as typeof err;
      }
      expect(err?.code, bad).toBe("config_invalid");
      expect(err?.message).not.toContain("secret");
    }
  });

  test("--proxy with a password is refused; SMTP proxies come only from --smtp-proxy / MAILSEND_SMTP_PROXY", () => {
    expect(() => checkProxyFlag("http://u:p@h:1", "--proxy", "MAILSEND_PROXY")).toThrow(/must not hold a password/);
    expect(() => checkProxyFlag("u:p@h:1", "--proxy", "MAILSEND_PROXY")).toThrow();
    expect(() => checkProxyFlag("http://h:3128", "--proxy", "MAILSEND_PROXY")).not.toThrow();
    expect(smtpProxyFrom(undefined, { HTTPS_PROXY: "http://p:1", ALL_PROXY: "socks5://s:1" })).toBeUndefined();
    expect(smtpProxyFrom(undefined, { MAILSEND_SMTP_PROXY: "socks5://u:pw@s" })).toMatchObject({
      protocol: "socks5:",
      port: 1080,
      user: "u",
      password: "pw",
      label: "socks5://s:1080",
    });
    expect(smtpProxyFrom("socks://s:9", {})).toMatchObject({ protocol: "socks5:" });
  });
});
