/**
 * The BUILT library, imported by its name ("mailsend" resolves to dist/
 * through package.json's self-referencing `exports`): in this process, and
 * in a child process that must print nothing of ours and end by itself
 * (no server, socket, timer or worker left open).
 */
import { execa } from "execa";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { mailsendCommand, ROOT } from "../helpers/cli.js";
import { scratch } from "../helpers/tmp.js";

type Api = typeof import("../../src/index.js");
const PACKAGE = "mailsend";

const tmp = scratch("mailsend-api-e2e-");
let api: Api;

beforeAll(async () => {
  // By name, not by path: what `import { send } from "mailsend"` gets.
  api = (await import(/* @vite-ignore */ PACKAGE)) as Api;
});
afterAll(() => tmp.remove());

describe('import { send, sendBatch, createSandbox } from "mailsend"', () => {
  it("is the built bundle, with the package's version", async () => {
    const resolved = import.meta.resolve(PACKAGE);
    expect(resolved).toBe(new URL("../../dist/index.js", import.meta.url).href);
    const pkg = JSON.parse((await import("node:fs")).readFileSync(join(ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    expect(api.VERSION).toBe(pkg.version);
    expect(Object.keys(api).sort()).toEqual([
      "EXIT",
      "EXIT_MEANING",
      "MailsendError",
      "VERSION",
      "createSandbox",
      "exitCodeFor",
      "isMailsendError",
      "send",
      "sendBatch",
    ]);
  });

  it("sends over REST and SMTP to its own sandbox, and fails with exit classes, printing nothing", async () => {
    const out = vi.spyOn(process.stdout, "write");
    const err = vi.spyOn(process.stderr, "write");
    const listeners = process.listenerCount("SIGINT") + process.listenerCount("SIGTERM");
    const sb = await api.createSandbox();
    try {
      const stateDir = join(tmp.dir, "state");
      const r = await api.send(
        { from: "ci@example.com", to: "dev@example.com", subject: "built", html: "<p>ok</p>" },
        { ...sb.options(), stateDir },
      );
      expect(r).toMatchObject({ transport: "rest", attempts: 1 });
      const s = await api.send(
        {
          from: "ci@example.com",
          to: "dev@example.com",
          bcc: "audit@example.com",
          subject: "built smtp",
          text: "ok",
          attachments: [{ filename: "log.txt", content: Buffer.from("log") }],
        },
        { ...sb.options("smtp"), stateDir },
      );
      expect(s.recipients).toEqual(["dev@example.com", "audit@example.com"]);
      const b = await api.sendBatch([{ to: "a@example.com" }, { to: "b@example.com" }], {
        ...sb.options(),
        stateDir,
        template: { from: "ci@example.com", subject: "hi {{to}}", text: "hello" },
      });
      expect(b.summary).toMatchObject({ total: 2, sent: 2, exitCode: 0 });
      expect((await sb.messages()).length).toBe(4);

      const failures: Array<[() => Promise<unknown>, string, number]> = [
        [
          () =>
            api.send(
              { from: "ci@example.com", to: "dev@example.com", subject: "x", html: "x" },
              { ...sb.options(), stateDir, apiKey: "msk_wrong" },
            ),
          "auth_failed",
          77,
        ],
        [
          () =>
            api.send({ from: "ci@example.com", to: "nobody", subject: "x", html: "x" }, { ...sb.options(), stateDir }),
          "invalid_address",
          65,
        ],
        [
          () => api.send({ from: "ci@example.com", to: "dev@example.com", subject: "x", html: "x" }, {}),
          "config_missing",
          78,
        ],
        [
          () =>
            api.send(
              { from: "ci@example.com", to: "dev@example.com", subject: "x", html: "x" },
              { ...sb.options(), stateDir, smtp: { host: "h", port: 465, tls: "starttls" }, transport: "smtp" },
            ),
          "tls_mismatch",
          78,
        ],
      ];
      for (const [p, code, exit] of failures) {
        const e = await p().then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e).toBeInstanceOf(api.MailsendError);
        expect(api.isMailsendError(e)).toBe(true);
        expect(e).toMatchObject({
          code,
          exitCode: exit,
          exitClass: Object.entries(api.EXIT).find(([, v]) => v === exit)![0],
        });
      }
      expect(out).not.toHaveBeenCalled();
      expect(err).not.toHaveBeenCalled();
      expect(process.listenerCount("SIGINT") + process.listenerCount("SIGTERM")).toBe(listeners);
    } finally {
      out.mockRestore();
      err.mockRestore();
      await sb.close();
    }
  });

  it("a program using it prints only its own output and ends by itself", async () => {
    const program = `
      import { send, sendBatch, createSandbox } from "mailsend";
      const sb = await createSandbox();
      const stateDir = ${JSON.stringify(join(tmp.dir, "child-state"))};
      const m = { from: "ci@example.com", to: "dev@example.com", subject: "child", html: "<p>x</p>" };
      const a = await send(m, { ...sb.options(), stateDir });
      const b = await send({ ...m, cc: "c@example.com" }, { ...sb.options("smtps"), stateDir });
      let code;
      try { await send(m, { ...sb.options(), stateDir, apiKey: "msk_bad" }); } catch (e) { code = e.exitCode; }
      const batch = await sendBatch([m, m], { ...sb.options("smtp"), stateDir, concurrency: 2 });
      const stored = (await sb.messages()).length;
      await sb.close();
      process.stdout.write(JSON.stringify({ a: a.transport, b: b.transport, code, sent: batch.summary.sent, stored }) + "\\n");
    `;
    // cwd inside the package: "mailsend" resolves through its own exports, as a dependency's would.
    const r = await execa(process.execPath, ["--input-type=module", "-e", program], {
      cwd: ROOT,
      reject: false,
      timeout: 30_000,
      env: { NO_COLOR: "1" },
    });
    expect(r.timedOut).toBe(false);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ a: "rest", b: "smtp", code: 77, sent: 2, stored: 4 });
  });

  it("a throw-away sandbox's clients keep their state in its dir, not the user's (library sends and a child mailsend with sb.env)", async () => {
    const home = join(tmp.dir, "home");
    const xdgState = join(tmp.dir, "xdg-state");
    mkdirSync(home);
    mkdirSync(xdgState);
    // As the README shows it: sb.options() alone, then the CLI with sb.env (no stateDir anywhere).
    const program = `
      import { execFile } from "node:child_process";
      import { promisify } from "node:util";
      import { existsSync } from "node:fs";
      import { send, sendBatch, createSandbox } from "mailsend";
      const sb = await createSandbox();
      const m = { from: "ci@example.com", to: "dev@example.com", subject: "hermetic", text: "x" };
      await send(m, sb.options());
      await send(m, sb.options("smtp"));
      const batch = await sendBatch([m, m], sb.options());
      // Not execFileSync: the sandbox runs in this process and must answer the child.
      await promisify(execFile)(...${JSON.stringify(mailsendCommand(["send", "--from", "ci@example.com", "--to", "dev@example.com", "--subject", "child", "--text", "x"]))}, { env: { ...process.env, ...sb.env } });
      const stored = (await sb.messages()).length;
      const inDir = existsSync(sb.options().stateDir ?? "none") && sb.env.MAILSEND_STATE_DIR === sb.options().stateDir;
      await sb.close();
      process.stdout.write(JSON.stringify({ sent: batch.summary.sent, stored, inDir }) + "\\n");
    `;
    const env = {
      PATH: process.env.PATH ?? "",
      HOME: home,
      XDG_STATE_HOME: xdgState,
      XDG_CACHE_HOME: join(tmp.dir, "cache"),
      NO_COLOR: "1",
      MAILSEND_CONFIG: join(tmp.dir, "no-config.json"),
    };
    const r = await execa(process.execPath, ["--input-type=module", "-e", program], {
      cwd: ROOT,
      reject: false,
      timeout: 60_000,
      env,
      extendEnv: false,
    });
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    // A sandbox's throwaway keys leave no ratelimit/<hash of the key>.json behind in the user's state.
    expect(readdirSync(xdgState, { recursive: true })).toEqual([]);
    expect(readdirSync(home, { recursive: true })).toEqual([]);
    expect(JSON.parse(r.stdout)).toEqual({ sent: 2, stored: 5, inDir: true });
  }, 90_000);
});
