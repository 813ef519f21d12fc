/**
 * The web inbox handler over a real node:http server and an in-memory store:
 * routes, escaping of hostile message fields, the CSP on the message-HTML
 * route, 404s, server-sent events and byte-exact downloads.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contentDisposition, createInboxHandler, hostAllowed } from "../../src/sandbox/web.js";
import { composeEml, MemoryStore } from "../helpers/memory-store.js";
import { until } from "../helpers/until.js";

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

let server: http.Server;
let base: string;
let port: number;
const store = new MemoryStore();

function request(path: string, opts: { method?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path, method: opts.method ?? "GET", headers: opts.headers ?? {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString("utf8") });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const HOSTILE_SUBJECT = `"><script>alert('subject')</script><img src=x onerror=alert(1)>`;
const INJECTING_NAME = 'résumé "final"\r\nX-Injected: 1.pdf';
const binary = randomBytes(70_000);
const png = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

let plain: Awaited<ReturnType<MemoryStore["add"]>>;
let hostile: Awaited<ReturnType<MemoryStore["add"]>>;
let withFiles: Awaited<ReturnType<MemoryStore["add"]>>;
let htmlOnly: Awaited<ReturnType<MemoryStore["add"]>>;

beforeAll(async () => {
  const handler = createInboxHandler(store);
  server = http.createServer((req, res) => {
    handler(req, res).then(
      (handled) => {
        if (!handled) {
          res.statusCode = 404;
          res.setHeader("X-Fallthrough", "1");
          res.end("server 404");
        }
      },
      (e: unknown) => {
        res.statusCode = 500;
        res.end(String(e));
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;

  plain = await store.add(
    await composeEml({
      from: "Ann <ann@example.com>",
      to: "bob@example.com",
      subject: "Plain hello",
      text: "Hello Bob,\nplain text here.",
    }),
    { channel: "smtp" },
  );
  hostile = await store.add(
    await composeEml({
      from: '"Eve <script>" <eve@example.com>',
      to: "victim@example.com",
      subject: HOSTILE_SUBJECT,
      text: "</pre><script>alert('text')</script>",
      html: `<h1>Hi</h1><script>parent.postMessage('pwned','*')</script><img src="http://127.0.0.1:9/x.png" onerror="alert(2)">`,
      headers: { "X-Evil": "<b>bold</b>" },
    }),
    // The store keeps what the sender gave; a hostile envelope address too.
    { meta: { from: `eve@example.com"><script>alert('from')</script>` } },
  );
  withFiles = await store.add(
    await composeEml({
      from: "files@example.com",
      to: ["a@example.com", "b@example.com"],
      subject: "Files",
      text: "see attached",
      html: '<p>logo: <img src="cid:logo@mailsend.test"></p>',
      attachments: [
        { filename: "data.bin", content: binary, contentType: "application/octet-stream" },
        { filename: INJECTING_NAME, content: Buffer.from("pdf bytes"), contentType: "application/pdf" },
        { filename: "<b>x</b>.txt", content: "hi there", contentType: "text/plain" },
        { filename: "отчёт 2024.pdf", content: Buffer.from("отчёт"), contentType: "application/pdf" },
        { filename: "logo.png", content: png, contentType: "image/png", cid: "logo@mailsend.test" },
      ],
    }),
  );
  htmlOnly = await store.add(
    await composeEml({
      from: "h@example.com",
      to: "x@example.com",
      subject: "Only HTML",
      html: "<p>only <b>html</b></p>",
    }),
  );
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

describe("list", () => {
  it("serves the list page newest first with a strict CSP", async () => {
    const r = await request("/");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
    const csp = String(r.headers["content-security-policy"]);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
    const order = [htmlOnly, withFiles, hostile, plain].map((m) => r.text.indexOf(`data-id="${m.id}"`));
    expect(order.every((i) => i > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(r.text).toContain("Plain hello");
    expect(r.text).toMatch(/<span class="chan">smtp<\/span>/);
  });

  it("escapes hostile subjects and addresses", async () => {
    const r = await request("/");
    // Only our own script tag; nothing from a message becomes markup.
    expect(r.text.match(/<script/g)).toHaveLength(1);
    expect(r.text).not.toContain("<img src=x");
    expect(r.text).toContain("&quot;&gt;&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;");
    expect(r.text).toContain("eve@example.com&quot;&gt;&lt;script&gt;alert(&#39;from&#39;)&lt;/script&gt;");
  });

  it("serves a JSON list, with a limit", async () => {
    const r = await request("/api/messages");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/json; charset=utf-8");
    const body = JSON.parse(r.text);
    expect(body.messages.map((m: { id: string }) => m.id)).toEqual([htmlOnly.id, withFiles.id, hostile.id, plain.id]);
    expect(body.messages[1]).toMatchObject({
      subject: "Files",
      to: ["a@example.com", "b@example.com"],
      url: `/messages/${withFiles.id}`,
    });
    expect(body.messages[1].attachments).toHaveLength(5);
    const limited = JSON.parse((await request("/api/messages?limit=2")).text);
    expect(limited.messages).toHaveLength(2);
  });

  it("serves its script and stylesheet", async () => {
    const js = await request("/assets/inbox.js");
    expect(js.status).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.text).toContain("EventSource");
    expect(js.text).not.toContain("innerHTML");
    const css = await request("/assets/inbox.css");
    expect(css.headers["content-type"]).toBe("text/css; charset=utf-8");
  });

  it("answers HEAD without a body and refuses other methods", async () => {
    const head = await request("/", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    const post = await request("/", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe("GET, HEAD");
  });
});

describe("one message", () => {
  it("renders headers and sections, the HTML only through a sandboxed iframe src", async () => {
    const r = await request(`/messages/${hostile.id}`);
    expect(r.status).toBe(200);
    expect(r.headers["content-security-policy"]).toContain("script-src 'self'");
    const iframes = r.text.match(/<iframe[^>]*>/g) ?? [];
    expect(iframes).toHaveLength(1);
    const iframe = iframes[0]!;
    expect(iframe).toContain(`src="/messages/${hostile.id}/html"`);
    expect(iframe).toMatch(/sandbox="[^"]*"/);
    expect(iframe).not.toContain("allow-scripts");
    expect(iframe).not.toContain("allow-same-origin");
    expect(r.text).not.toContain("srcdoc");
    expect(r.text.match(/<script/g)).toHaveLength(1);
    expect(r.text).not.toContain("<img src=");
    // Text, raw and header values are escaped.
    expect(r.text).toContain("&lt;/pre&gt;&lt;script&gt;alert(&#39;text&#39;)&lt;/script&gt;");
    expect(r.text).toContain("<th>X-Evil</th><td>&lt;b&gt;bold&lt;/b&gt;</td>");
    expect(r.text).toContain("&quot;Eve &lt;script&gt;&quot; &lt;eve@example.com&gt;");
    for (const tab of ["html", "text", "raw", "attachments"]) expect(r.text).toContain(`data-panel="${tab}"`);
  });

  it("shows the envelope as sent, an A-label address's Unicode form beside it", async () => {
    const idn = await store.add(
      await composeEml({ from: "ci@example.com", to: "user@xn--bcher-kva.example", subject: "IDN", text: "hallo" }),
      {
        channel: "smtp",
        meta: {
          envelope: { from: "ci@example.com", to: ["user@xn--bcher-kva.example", "plain@example.com"] },
          envelopeUnicode: { from: "ci@example.com", to: ["user@bücher.example", "plain@example.com"] },
        },
      },
    );
    const r = await request(`/messages/${idn.id}`);
    expect(r.status).toBe(200);
    expect(r.text).toContain("<th>Envelope from</th><td>ci@example.com</td>");
    expect(r.text).toContain(
      "<th>Envelope to</th><td>user@xn--bcher-kva.example (user@bücher.example), plain@example.com</td>",
    );
  });

  it("serves the message HTML with a CSP that forbids script and remote loads", async () => {
    const r = await request(`/messages/${hostile.id}/html`);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
    const csp = String(r.headers["content-security-policy"]);
    const directives = new Map(
      csp
        .split(";")
        .map((d) => d.trim().split(/\s+/))
        .map(([k, ...v]) => [k!, v]),
    );
    expect(directives.get("default-src")).toEqual(["'none'"]);
    expect(directives.get("img-src")).toEqual(["data:"]);
    expect(directives.has("script-src")).toBe(false);
    expect(directives.get("sandbox")).toBeDefined();
    expect(directives.get("sandbox")).not.toContain("allow-scripts");
    expect(directives.get("sandbox")).not.toContain("allow-same-origin");
    expect(r.text).toContain("<h1>Hi</h1>");
    expect(r.text.startsWith('<base target="_blank">')).toBe(true);
  });

  it("embeds cid: images as data: URLs (the CSP allows no other images)", async () => {
    const r = await request(`/messages/${withFiles.id}/html`);
    expect(r.text).toContain(`<img src="data:image/png;base64,${png.toString("base64")}">`);
    expect(r.text).not.toContain("cid:");
  });

  it("has no HTML route for a message without HTML, and a text section", async () => {
    expect((await request(`/messages/${plain.id}/html`)).status).toBe(404);
    const page = await request(`/messages/${plain.id}`);
    expect(page.text).not.toContain("<iframe");
    expect(page.text).toContain("Hello Bob,\nplain text here.");
  });

  it("serves the raw source exactly, as inert text or as a download", async () => {
    const stored = (await store.raw(withFiles.id))!;
    const r = await request(`/messages/${withFiles.id}/raw`);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(r.headers["content-security-policy"]).toContain("sandbox");
    expect(r.body.equals(stored)).toBe(true);
    const dl = await request(`/messages/${withFiles.id}/raw?download=1`);
    expect(dl.headers["content-type"]).toBe("message/rfc822");
    expect(dl.headers["content-disposition"]).toContain(`filename="${withFiles.id}.eml"`);
    expect(dl.body.equals(stored)).toBe(true);
  });

  it("serves JSON details parsed from the .eml", async () => {
    const r = await request(`/api/messages/${withFiles.id}`);
    expect(r.status).toBe(200);
    const d = JSON.parse(r.text);
    expect(d).toMatchObject({
      id: withFiles.id,
      subject: "Files",
      text: "see attached\n",
      hasHtml: true,
      htmlUrl: `/messages/${withFiles.id}/html`,
    });
    expect(d.headers.find((h: { name: string }) => h.name.toLowerCase() === "subject")?.value).toBe("Files");
    // Document order: the inline logo sits in the multipart/related part before the attachments.
    expect(d.attachments.map((a: { filename: string }) => a.filename)).toEqual([
      "logo.png",
      "data.bin",
      INJECTING_NAME,
      "<b>x</b>.txt",
      "отчёт 2024.pdf",
    ]);
    expect(d.attachments[0]).toMatchObject({
      index: 0,
      contentId: "<logo@mailsend.test>",
      inline: true,
      contentType: "image/png",
    });
    expect(d.attachments[1]).toMatchObject({
      index: 1,
      size: binary.length,
      inline: false,
      url: `/messages/${withFiles.id}/attachments/1`,
    });
  });
});

describe("attachments", () => {
  /** The attachment URL by file name (postal-mime lists parts in document order: the inline logo first). */
  async function attachmentUrl(filename: string): Promise<string> {
    const d = JSON.parse((await request(`/api/messages/${withFiles.id}`)).text);
    const a = d.attachments.find((x: { filename: string }) => x.filename === filename);
    if (!a) throw new Error(`no attachment ${filename}`);
    return a.url;
  }

  it("downloads the exact bytes", async () => {
    const r = await request(await attachmentUrl("data.bin"));
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/octet-stream");
    expect(r.headers["content-disposition"]).toBe(`attachment; filename="data.bin"; filename*=UTF-8''data.bin`);
    expect(r.headers["content-length"]).toBe(String(binary.length));
    expect(r.body.equals(binary)).toBe(true);
  });

  it("never lets a filename inject a header", async () => {
    const r = await request(await attachmentUrl(INJECTING_NAME));
    expect(r.status).toBe(200);
    expect(r.headers["x-injected"]).toBeUndefined();
    const cd = String(r.headers["content-disposition"]);
    expect(cd).toBe(
      `attachment; filename="r_sum_ _final_X-Injected: 1.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22X-Injected%3A%201.pdf`,
    );
    expect(r.body.toString()).toBe("pdf bytes");
  });

  it("gives non-ASCII names in filename* (RFC 5987)", async () => {
    const r = await request(await attachmentUrl("отчёт 2024.pdf"));
    const cd = String(r.headers["content-disposition"]);
    const star = /filename\*=UTF-8''([^;]+)/.exec(cd)?.[1];
    expect(decodeURIComponent(star!)).toBe("отчёт 2024.pdf");
    expect(cd).toContain('filename="_____ 2024.pdf"');
    expect(r.body.toString("utf8")).toBe("отчёт");
  });

  it("lists attachments with escaped names", async () => {
    const r = await request(`/messages/${withFiles.id}`);
    expect(r.text).toContain(`<a href="${await attachmentUrl("<b>x</b>.txt")}" download>&lt;b&gt;x&lt;/b&gt;.txt</a>`);
    expect(r.text).not.toContain("<b>x</b>");
  });

  it("builds Content-Disposition safely from any name", () => {
    for (const name of ['a"b\\c/d\u0000\n.txt', "\ud800lone", "", "100%.txt", "it's (1)*.txt"]) {
      const cd = contentDisposition(name);
      expect(cd).toMatch(
        /^attachment; filename="[\x20-\x21\x23-\x5b\x5d-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9!#$&+\-.^_`|~%]+$/,
      );
    }
    expect(contentDisposition("../../etc/passwd")).toContain('filename=".._.._etc_passwd"');
  });
});

describe("not found and bad input", () => {
  it("404s unknown ids on every message route", async () => {
    for (const path of [
      "/messages/zzzzzzzz-000000",
      "/messages/zzzzzzzz-000000/html",
      "/messages/zzzzzzzz-000000/raw",
      "/messages/zzzzzzzz-000000/attachments/0",
      "/api/messages/zzzzzzzz-000000",
    ]) {
      const r = await request(path);
      expect(r.status, path).toBe(404);
      expect(r.headers["x-fallthrough"], path).toBeUndefined();
    }
    const api = await request("/api/messages/zzzzzzzz-000000");
    expect(JSON.parse(api.text).error.code).toBe("not_found");
  });

  it("404s ids outside the store's characters without asking the store, and unknown attachments", async () => {
    for (const path of [
      "/messages/..%2F..%2Fetc%2Fpasswd",
      "/messages/a.b",
      "/messages/%3Cscript%3E",
      `/messages/${"a".repeat(200)}`,
    ]) {
      const r = await request(path);
      expect(r.status, path).toBe(404);
      expect(r.text).not.toContain("<script>");
    }
    expect((await request(`/messages/${withFiles.id}/attachments/99`)).status).toBe(404);
    expect((await request(`/messages/${withFiles.id}/attachments/-1`)).status).toBe(404);
  });

  it("leaves other paths to the server", async () => {
    const r = await request("/favicon.ico");
    expect(r.status).toBe(404);
    expect(r.headers["x-fallthrough"]).toBe("1");
  });

  it("refuses dotted host names (DNS rebinding) but not localhost or IPs", async () => {
    expect((await request("/", { headers: { host: "attacker.example.com" } })).status).toBe(403);
    expect((await request("/", { headers: { host: `localhost:${port}` } })).status).toBe(200);
    for (const h of ["127.0.0.1:8025", "[::1]:8025", "localhost", "app.localhost", "mailsend", "192.168.1.20"])
      expect(hostAllowed(h), h).toBe(true);
    for (const h of ["evil.com", "127.0.0.1.nip.io:8025", "[::1]evil"]) expect(hostAllowed(h), h).toBe(false);
  });
});

describe("events", () => {
  it("streams each newly stored message and unsubscribes when the client leaves", async () => {
    const before = store.subscriberCount;
    const got = await new Promise<{
      data: Record<string, unknown>;
      headers: http.IncomingHttpHeaders;
      req: http.ClientRequest;
    }>((resolve, reject) => {
      const req = http.get(`${base}/events`, (res) => {
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          buf += chunk;
          const m = /^data: (.+)$/m.exec(buf);
          if (m) resolve({ data: JSON.parse(m[1]!), headers: res.headers, req });
        });
        // Connected: store a message now.
        const wait = setInterval(() => {
          if (store.subscriberCount > before) {
            clearInterval(wait);
            composeEml({ from: "live@example.com", to: "x@example.com", subject: "Live <one>", text: "x" })
              .then((eml) => store.add(eml))
              .catch(reject);
          }
        }, 5);
      });
      req.on("error", reject);
      setTimeout(() => reject(new Error("no event within 5 s")), 5000);
    });
    expect(got.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(got.data).toMatchObject({ subject: "Live <one>", from: "live@example.com", to: ["x@example.com"] });
    expect(String(got.data.url)).toMatch(/^\/messages\/[A-Za-z0-9_-]+$/);
    got.req.destroy();
    await until(() => store.subscriberCount <= before, {
      what: "the closed stream's subscription to end",
      timeoutMs: 2000,
      everyMs: 10,
    });
    expect(store.subscriberCount).toBe(before);
  });
});

describe("sizes: one unit everywhere", () => {
  it("the page script's size() is the server's and the CLI's formatSize", async () => {
    const { INBOX_JS } = await import("../../src/sandbox/web/assets.js");
    const { formatSize } = await import("../../src/core/size.js");
    const src = /var size = ([\s\S]*?\n\s*\});\n/.exec(INBOX_JS)?.[1];
    expect(src, "the script defines size()").toBeDefined();
    const size = new Function(`return (${src});`)() as (n: number) => string;
    for (const n of [0, 1023, 1024, 3000, 1024 * 1024 - 1, 5 * 1024 * 1024 + 7]) expect(size(n)).toBe(formatSize(n));
    expect(formatSize(3000)).toBe("2.9 KiB");
    expect(formatSize(5 * 1024 * 1024)).toBe("5.0 MiB");
  });
});
