/**
 * The sandbox answers only by its own name, on every route (the control API
 * and POST /send too, not only the web inbox); bound beyond loopback, its
 * control API and inbox need the token it printed at start. Real HTTP
 * requests carrying a foreign Host header.
 */
import { execa } from "execa";
import http from "node:http";
import { createInterface } from "node:readline";
import { describe, expect, test } from "vitest";
import { baseEnv, mailsendCommand, ROOT } from "../helpers/cli.js";
import { childSandbox, sendRequest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** A request to 127.0.0.1:port with the Host header we choose (fetch would not let us). */
function request(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: { ...headers, ...(body ? { "Content-Length": String(Buffer.byteLength(body)) } : {}) },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
        );
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error("no answer in 10 s")));
    req.on("error", reject);
    req.end(body);
  });
}

describe("on loopback: only its own names", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = sb));

  test("a foreign Host (DNS rebinding) is refused on /_sandbox/*, /send and the inbox; nothing changes", async () => {
    const port = t.sb.ports.http;
    const evil = { Host: `rebind.attacker.example:${port}` };
    const stats = await request(port, "GET", "/_sandbox/stats", evil);
    expect(stats.status).toBe(403);
    expect(stats.text).not.toMatch(/"rest"/);
    const faults = await request(
      port,
      "POST",
      "/_sandbox/faults",
      { ...evil, "Content-Type": "application/json" },
      JSON.stringify({ failRate: 1 }),
    );
    expect(faults.status).toBe(403);
    expect(t.sb.faults.config.failRate).toBe(0);
    const send = await request(
      port,
      "POST",
      "/send",
      { ...evil, "Content-Type": "application/json", Authorization: `Bearer ${t.key}` },
      JSON.stringify(sendRequest()),
    );
    expect(send.status).toBe(403);
    expect(await t.sb.store.list()).toHaveLength(0);
    expect((await request(port, "GET", "/", evil)).status).toBe(403);
    // Its own names are answered.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "localhost"]) {
      expect((await request(port, "GET", "/_sandbox/stats", { Host: host })).status, host).toBe(200);
    }
    const ok = await request(
      port,
      "POST",
      "/send",
      { Host: `127.0.0.1:${port}`, "Content-Type": "application/json", Authorization: `Bearer ${t.key}` },
      JSON.stringify(sendRequest()),
    );
    expect(ok.status, ok.text).toBe(200);
  });
});

describe("beyond loopback (--host 0.0.0.0): a token", () => {
  let t: TestSandbox;
  useSandbox((sb) => (t = sb), { host: "0.0.0.0" });

  test("the control API and the inbox need it (Bearer, or a cookie the inbox sets from ?token=); /send needs only the key", async () => {
    const port = t.sb.ports.http;
    const token = t.sb.token!;
    expect(t.sb.exposed).toBe(true);
    expect(token).toMatch(/^sbt_/);
    const host = { Host: `127.0.0.1:${port}` };
    const none = await request(port, "GET", "/_sandbox/stats", host);
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toMatch(/Bearer/);
    expect((await request(port, "GET", "/_sandbox/stats", { ...host, Authorization: "Bearer sbt_wrong" })).status).toBe(
      401,
    );
    expect(
      (
        await request(
          port,
          "POST",
          "/_sandbox/faults",
          { ...host, "Content-Type": "application/json" },
          JSON.stringify({ failRate: 1 }),
        )
      ).status,
    ).toBe(401);
    expect(t.sb.faults.config.failRate).toBe(0);
    expect((await request(port, "GET", "/_sandbox/stats", { ...host, Authorization: `Bearer ${token}` })).status).toBe(
      200,
    );
    // With the token, a name of this machine on the network is fine (a page cannot know the token).
    expect(
      (
        await request(port, "GET", "/_sandbox/stats", {
          Host: `devbox.example.lan:${port}`,
          Authorization: `Bearer ${token}`,
        })
      ).status,
    ).toBe(200);

    expect((await request(port, "GET", "/", host)).status).toBe(401);
    const entry = await request(port, "GET", `/?token=${encodeURIComponent(token)}`, host);
    expect(entry.status).toBe(303);
    expect(entry.headers.location).toBe("/");
    const cookie = String(entry.headers["set-cookie"]).split(";")[0]!;
    expect(entry.headers["set-cookie"]!.join(" ")).toMatch(/HttpOnly/);
    expect((await request(port, "GET", "/", { ...host, Cookie: cookie })).status).toBe(200);
    expect((await request(port, "GET", `/?token=sbt_wrong`, host)).status).toBe(401);

    const send = await request(
      port,
      "POST",
      "/send",
      { ...host, "Content-Type": "application/json", Authorization: `Bearer ${t.key}` },
      JSON.stringify(sendRequest()),
    );
    expect(send.status, send.text).toBe(200);
  });

  test("`mailsend sandbox --host 0.0.0.0` warns in its banner and shows the token once; --json gives it in the ready line", async () => {
    const s = scratch("mailsend-exposed-");
    try {
      const child = execa(
        ...mailsendCommand([
          "sandbox",
          "--dir",
          s.dir,
          "--host",
          "0.0.0.0",
          "--http-port",
          "0",
          "--smtp-port",
          "0",
          "--smtps-port",
          "0",
        ]),
        {
          env: { ...baseEnv(), MAILSEND_SANDBOX_TOKEN: "sbt_known-to-the-clients-0123456789" },
          extendEnv: false,
          cwd: ROOT,
          stdin: "ignore",
          reject: false,
          timeout: 60_000,
        },
      );
      let out = "";
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no banner in 20 s: ${out}`)), 20_000);
        createInterface({ input: child.stdout! }).on("line", (l) => {
          out += `${l}\n`;
          if (l.startsWith("Press Ctrl+C")) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      child.kill("SIGTERM");
      await child;
      expect(out).toMatch(/warning: listening on 0\.0\.0\.0 \(every interface\), beyond this machine/);
      expect(out.split("sbt_known-to-the-clients-0123456789").length - 1).toBe(1);

      const json = await childSandbox(s.dir, ["--host", "0.0.0.0"]);
      try {
        const ready = json.ready as unknown as { exposed: boolean; token: string | null };
        expect(ready.exposed).toBe(true);
        expect(ready.token).toMatch(/^sbt_/);
      } finally {
        await json.stop();
      }
      const local = await childSandbox(s.dir);
      try {
        expect((local.ready as unknown as { token: string | null }).token).toBeNull();
      } finally {
        await local.stop();
      }
    } finally {
      s.remove();
    }
  });
});
