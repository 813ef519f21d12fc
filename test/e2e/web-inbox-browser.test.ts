/**
 * The web inbox in a real browser: Debian's chromium driven by
 * playwright-core, against a real sandbox (in this process, free ports) fed
 * by the built CLI over REST and SMTP. The list picks up a message sent a
 * moment ago without a reload; the message view renders its HTML in the
 * sandboxed iframe; hostile HTML (script, event handlers, remote loads, meta
 * refresh, forms, javascript: links) does nothing. Screenshots go to the
 * test's temp dir (kept with MAILSEND_KEEP_SCREENSHOTS=1).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";
import { inProcessSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { chromium as chromiumTool, lacks } from "../helpers/tools.js";

/** A server that records every request: any hit means the message HTML reached out. */
async function startTrap(): Promise<{ port: number; hits: string[]; server: http.Server }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.end("trap");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, hits, server };
}

describe.skipIf(lacks(chromiumTool))("web inbox in chromium", () => {
  let dir: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let trap: Awaited<ReturnType<typeof startTrap>>;
  let sandbox: TestSandbox;
  let base: string;
  /**
   * Every request the browser started, from any page or frame, and how it
   * ended. Chromium reports loads that CSP refuses as requests that fail
   * with net::ERR_BLOCKED_BY_CSP before anything is sent.
   */
  const requests: string[] = [];
  const failed = new Map<string, string>();
  const answered: string[] = [];
  const pageErrors: string[] = [];

  /** Requests to the trap server: refused by CSP in the browser, or not (escaped). */
  function trapRequests(): { blocked: string[]; escaped: string[] } {
    const all = requests.filter((u) => u.startsWith(`http://127.0.0.1:${trap.port}/`));
    const blocked = all.filter((u) => failed.get(u) === "csp" && !answered.includes(u));
    return { blocked, escaped: all.filter((u) => !blocked.includes(u)) };
  }

  /** `mailsend send` (the built CLI) to the sandbox; returns the stored message's id. */
  async function send(args: string[]): Promise<string> {
    const before = new Set((await sandbox.sb.store.list()).map((m) => m.id));
    const r = await runCli(["send", "--json", ...args], { env: sandbox.env });
    expect(r.exitCode, r.stderr).toBe(0);
    const added = (await sandbox.sb.store.list()).filter((m) => !before.has(m.id));
    expect(added).toHaveLength(1);
    return added[0]!.id;
  }

  beforeAll(async () => {
    sandbox = await inProcessSandbox({}, undefined);
    dir = sandbox.scratch.dir;
    base = sandbox.sb.urls.baseUrl;
    trap = await startTrap();
    browser = await chromium.launch({
      executablePath: chromiumTool.path,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
      ],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // Fail fast: a hijacked frame shows up as an element that never appears.
    context.setDefaultTimeout(10_000);
    context.on("request", (r) => requests.push(r.url()));
    context.on("requestfailed", (r) => failed.set(r.url(), r.failure()?.errorText ?? "?"));
    context.on("response", (r) => answered.push(r.url()));
    page = await context.newPage();
    page.on("pageerror", (e) => pageErrors.push(e.message));
    // Anything a message frame posts to its parent would land here.
    // (Browser-side code is given as strings: this project's TS config has no DOM types.)
    await page.addInitScript(
      'window.__posted = []; window.addEventListener("message", (e) => window.__posted.push(e.data));',
    );
  });

  afterAll(async () => {
    await browser?.close();
    await sandbox?.stop();
    if (trap) {
      trap.server.closeAllConnections();
      await new Promise<void>((r) => trap.server.close(() => r()));
    }
    // Keep the screenshots when asked to (MAILSEND_KEEP_SCREENSHOTS=1), else clean up.
    if (process.env.MAILSEND_KEEP_SCREENSHOTS === "1") console.log(`web-inbox-browser: screenshots in ${dir}`);
    else sandbox?.scratch.remove();
  });

  it("shows a message stored a moment ago without a reload", async () => {
    await send([
      "--from",
      "Ann Example <ann@example.com>",
      "--to",
      "bob@example.com",
      "--subject",
      "Earlier message",
      "--html",
      "<p>Older.</p>",
    ]);
    await page.goto(`${base}/`);
    await expect.poll(() => page.locator("#status").textContent()).toBe("live");
    await expect.poll(() => page.locator("#rows tr[data-id]").count()).toBe(1);
    // A marker that a reload would wipe.
    await page.evaluate("window.__sameDocument = true");

    // Over SMTP (STARTTLS): text, HTML and an attachment.
    const htmlFile = sandbox.scratch.file(
      "build.html",
      `<!doctype html><html><body style="font-family: sans-serif">
          <h1 style="color:#0a7d32">Build #42 passed</h1>
          <p>All <b>318</b> tests passed in 2m 14s.</p>
          <table style="border-collapse:collapse"><tr><td style="padding:4px 8px;border:1px solid #ccc">Branch</td><td style="padding:4px 8px;border:1px solid #ccc">main</td></tr></table>
          <p><a href="https://example.com/builds/42">Open the build</a></p></body></html>`,
    );
    const report = sandbox.scratch.file("report.txt", "ok\n");
    const freshId = await send([
      "--transport",
      "smtp",
      "--from",
      "Release Bot <bot@example.com>",
      "--to",
      "team@example.com, qa@example.com",
      "--subject",
      "Your build #42 is ready",
      "--text",
      "Build 42 passed.",
      "--html-file",
      htmlFile,
      "--attach",
      report,
    ]);
    const fresh = { id: freshId };

    const row = page.locator(`#rows tr[data-id="${fresh.id}"]`);
    await expect.poll(() => row.count(), { timeout: 5000 }).toBe(1);
    expect(await row.textContent()).toContain("Your build #42 is ready");
    // Newest first, and still the same document.
    expect(await page.locator("#rows tr[data-id]").first().getAttribute("data-id")).toBe(fresh.id);
    expect(await page.evaluate("window.__sameDocument")).toBe(true);
    expect(await page.locator("#count").textContent()).toBe("2");
    await page.waitForTimeout(2600); // let the highlight fade for the screenshot
    await page.screenshot({ path: join(dir, "inbox-list.png") });
  });

  it("renders the message HTML in the sandboxed iframe", async () => {
    await page.locator("#rows tr[data-id]").first().click();
    await page.waitForURL(/\/messages\/[0-9a-z-]+$/);
    expect(await page.locator("h2.subject").textContent()).toBe("Your build #42 is ready");
    const iframe = page.locator("iframe.body");
    expect(await iframe.getAttribute("sandbox")).not.toContain("allow-scripts");
    expect(await iframe.getAttribute("srcdoc")).toBeNull();
    const frame = page.frameLocator("iframe.body");
    await expect.poll(() => frame.locator("h1").textContent()).toBe("Build #42 passed");
    expect(await frame.locator("b").textContent()).toBe("318");
    // The other tabs are there and switch.
    await page.locator('nav.tabs a[data-panel="text"]').click();
    expect(await page.locator("#text pre").textContent()).toContain("Build 42 passed.");
    await page.locator('nav.tabs a[data-panel="attachments"]').click();
    expect(await page.locator("#attachments a[download]").textContent()).toBe("report.txt");
    await page.locator('nav.tabs a[data-panel="html"]').click();
    await page.screenshot({ path: join(dir, "inbox-message.png"), fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it("runs no script and loads nothing remote from hostile HTML", async () => {
    const t = `http://127.0.0.1:${trap.port}`;
    // Over REST: the hostile HTML is the request's html field.
    const evilHtml = sandbox.scratch.file(
      "evil.html",
      `<html><head>
          <meta http-equiv="refresh" content="0;url=${t}/refresh">
          <link rel="stylesheet" href="${t}/style.css">
          <style>@import url("${t}/import.css"); body { background: url("${t}/bg.png"); }</style>
          </head><body onload="parent.postMessage('body-onload','*')">
          <h1 id="visible">Hostile but inert</h1>
          <script>document.title = 'pwned'; document.body.setAttribute('data-pwned', '1'); parent.postMessage('script', '*'); fetch('${t}/fetch');</script>
          <img src="x" onerror="parent.postMessage('onerror', '*'); document.body.setAttribute('data-pwned', '2')">
          <img src="${t}/pixel.png">
          <svg onload="parent.postMessage('svg', '*')"></svg>
          <iframe src="${t}/frame"></iframe>
          <object data="${t}/object"></object>
          <a id="js" href="javascript:parent.postMessage('js-link','*')">js link</a>
          <form action="${t}/form"><button id="submit">go</button></form>
          </body></html>`,
    );
    const evil = {
      id: await send([
        "--from",
        "mallory@example.com",
        "--to",
        "victim@example.com",
        "--subject",
        `<img src=x onerror="document.title='pwned-subject'">Hostile`,
        "--html-file",
        evilHtml,
        // The hostile <img src="x"> stays as written (it is no local image to embed).
        "--no-embed",
      ]),
    };
    await page.goto(`${base}/messages/${evil.id}`);
    const frame = page.frameLocator("iframe.body");
    await expect.poll(() => frame.locator("#visible").textContent()).toBe("Hostile but inert");
    // Clicks on the javascript: link and the form button do nothing either.
    await frame.locator("#js").click();
    await frame.locator("#submit").click();
    await page.waitForTimeout(1500);

    // The title is the subject as text: neither the frame's script nor the subject's markup ran.
    expect(await page.title()).toBe(`<img src=x onerror="document.title='pwned-subject'">Hostile · mailsend sandbox`);
    expect(await page.locator("h2.subject").textContent()).toBe(
      `<img src=x onerror="document.title='pwned-subject'">Hostile`,
    );
    expect(await page.evaluate("window.__posted")).toEqual([]);
    expect(await frame.locator("body").getAttribute("data-pwned")).toBeNull();
    // The frame was not navigated away by the meta refresh, the form or the link.
    const messageFrame = page.frames().find((f) => f.url().endsWith(`/messages/${evil.id}/html`));
    expect(
      messageFrame,
      page
        .frames()
        .map((f) => f.url())
        .join(", "),
    ).toBeDefined();
    // Chromium saw the remote references and CSP refused each one; nothing reached the trap.
    expect(trapRequests().blocked).toEqual(expect.arrayContaining([`${t}/pixel.png`, `${t}/bg.png`, `${t}/style.css`]));
    expect(trapRequests().escaped).toEqual([]);
    expect(trap.hits).toEqual([]);
    await page.screenshot({ path: join(dir, "inbox-hostile.png"), fullPage: true });

    // Opened directly (not in the iframe) the route's own CSP still sandboxes it.
    await page.goto(`${base}/messages/${evil.id}/html`);
    await expect.poll(() => page.locator("#visible").textContent()).toBe("Hostile but inert");
    await page.waitForTimeout(1000);
    expect(await page.title()).not.toContain("pwned");
    expect(await page.locator("body").getAttribute("data-pwned")).toBeNull();
    expect(await page.evaluate("window.__posted ?? []")).toEqual([]);
    expect(trapRequests().escaped).toEqual([]);
    expect(trap.hits).toEqual([]);
  });
});
