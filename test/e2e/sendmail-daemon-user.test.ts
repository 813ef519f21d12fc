/**
 * A daemon's user calls sendmail: PHP-FPM runs as www-data, whose home (/var/www) belongs to root,
 * so the state dir under the home cannot be made. The built binary, run as such a user (under
 * root: `setpriv` to nobody; otherwise this user with a home it cannot write), delivers to the
 * sandbox and keeps its state in a private /var/tmp/mailsend-<uid> instead of failing with 73.
 */
import { execa } from "execa";
import { chmodSync, chownSync, existsSync, lstatSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, copyMailsend, mailsendArgv, mailsendCommand } from "../helpers/cli.js";
import { useSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch, type Scratch } from "../helpers/tmp.js";

const AS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

let t: TestSandbox;
let s: Scratch;
useSandbox((sb) => (t = sb));
beforeAll(async () => {
  s = scratch("mailsend-daemon-user-");
});
afterAll(async () => {
  s?.remove();
});

describe.skipIf(process.platform === "win32")("sendmail from a user who cannot write its home", () => {
  it("the message is delivered; the state lives in /var/tmp/mailsend-<uid> (0700, this user's)", async () => {
    const uid = AS_ROOT ? NOBODY : process.getuid!();
    const fallback = join("/var/tmp", `mailsend-${uid}`);
    const existed = existsSync(fallback);
    // A home like www-data's: there, but not writable by its user.
    const home = join(s.dir, "home");
    const key = s.file("api-key", `${t.key}\n`);
    await execa("mkdir", ["-p", home]);
    chmodSync(home, 0o555);
    chmodSync(key, 0o644);
    chmodSync(s.dir, 0o755);
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: home,
      NO_COLOR: "1",
      MAILSEND_BASE_URL: t.env.MAILSEND_BASE_URL!,
      MAILSEND_API_KEY_FILE: key,
      MAILSEND_TRANSPORT: "rest",
      MAILSEND_QUEUE: "never",
      MAILSEND_RATE_LIMIT: "60",
      MAILSEND_CONFIG: join(s.dir, "no-config.json"),
    };
    const drop = AS_ROOT ? ["setpriv", "--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups"] : [];
    const runs = async (argv: string[]) => (await execa(argv[0]!, argv.slice(1), { reject: false })).exitCode === 0;
    // This Node, unless nobody may not run it (CI's Node 24 lives under root's home): then the
    // system's. The state dir's choice does not depend on the version.
    let node = process.execPath;
    if (AS_ROOT && !(await runs([...drop, node, "-e", "0"]))) {
      node = ["/usr/bin/node", "/usr/local/bin/node"].find((p) => existsSync(p)) ?? node;
    }
    // The checkout may sit where nobody cannot read it (a private CI workspace): then a copy of the
    // program in the scratch dir is run (a REST send needs nothing of node_modules).
    let file = BIN;
    if (AS_ROOT && !(await runs([...drop, ...mailsendArgv(["--version"], file, node)]))) {
      file = copyMailsend(join(s.dir, "cli"));
    }
    /** `mailsend <args>` as that user. */
    const asUser = (args: string[]): [string, string[]] => {
      const [cmd, ...rest] = [...drop, ...mailsendArgv(args, file, node)];
      return [cmd!, rest];
    };
    const message =
      "From: www@example.com\nTo: dev@example.com\nSubject: daemon user\nContent-Type: text/html\n\n<p>from php</p>\n";
    let added: string[] = [];
    try {
      const r = await execa(...asUser(["sendmail", "-t"]), {
        env,
        extendEnv: false,
        input: message,
        reject: false,
        timeout: 60_000,
      });
      expect(r.exitCode, `${r.stderr}`).toBe(0);
      const got = (await t.sb.store.list({ limit: 100 })).filter((m) => m.subject === "daemon user");
      expect(got).toHaveLength(1);
      // The budget's state went to the private fallback, never under the home.
      const st = lstatSync(fallback);
      expect(st.isDirectory()).toBe(true);
      expect(st.uid).toBe(uid);
      expect(st.mode & 0o777).toBe(0o700);
      expect(readdirSync(fallback)).toContain("ratelimit");
      expect(readdirSync(home)).toEqual([]);

      // doctor, as that user, names the dir it uses.
      const d = await execa(...asUser(["doctor", "--json"]), { env, extendEnv: false, reject: false, timeout: 60_000 });
      expect(`${d.stdout}${d.stderr}`).toContain(fallback);

      // A message queued there; then the home becomes writable (a chown by a deploy): mailsend now
      // keeps its state under the home, and `mailsend queue` says what still waits in /var/tmp.
      // /var/tmp/mailsend-<uid> is the machine's, not this test's: another run may have left mail in it.
      const queuedThere = () => {
        try {
          return readdirSync(join(fallback, "outbox", "queue")).filter((f) => f.endsWith(".msg"));
        } catch {
          return [];
        }
      };
      const before = queuedThere();
      const q = await execa(...asUser(["sendmail", "-t"]), {
        env: { ...env, MAILSEND_QUEUE: "always", MAILSEND_QUEUE_AUTORUN: "0" },
        extendEnv: false,
        input: message.replace("daemon user", "daemon user queued"),
        reject: false,
        timeout: 60_000,
      });
      expect(q.exitCode, q.stderr).toBe(0);
      added = queuedThere().filter((f) => !before.includes(f));
      expect(added).toHaveLength(1);
      const waiting = before.length + 1;
      if (AS_ROOT) chownSync(home, uid, uid);
      chmodSync(home, 0o755);
      const list = await execa(...asUser(["queue"]), {
        env,
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
      expect(list.exitCode, list.stderr).toBe(0);
      expect(list.stdout).toContain(join(home, ".local", "state", "mailsend", "outbox"));
      expect(list.stderr).toContain(
        `${waiting} message${waiting === 1 ? "" : "s"} also wait${waiting === 1 ? "s" : ""} in ${join(fallback, "outbox", "queue")}`,
      );
      expect(list.stderr).toContain(`MAILSEND_STATE_DIR=${fallback} mailsend queue run`);
      // doctor says the same: the outbox it uses now, and the mail left in /var/tmp.
      const doc = await execa(...asUser(["doctor", "--json"]), {
        env,
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
      const outboxCheck = (
        JSON.parse(doc.stdout) as { checks: { name: string; ok: boolean; detail: string; hint?: string }[] }
      ).checks.find((c) => c.name === "outbox");
      expect(outboxCheck, doc.stderr).toMatchObject({
        ok: true,
        detail: `nothing queued, in ${join(home, ".local", "state", "mailsend", "outbox")}`,
      });
      expect(outboxCheck!.hint).toContain(
        `${waiting} message${waiting === 1 ? "" : "s"} also wait${waiting === 1 ? "s" : ""} in ${join(fallback, "outbox", "queue")}`,
      );
      expect(outboxCheck!.hint).toContain(`MAILSEND_STATE_DIR=${fallback} mailsend queue run`);
    } finally {
      if (!existed) rmSync(fallback, { recursive: true, force: true });
      // What this test queued there is removed even when the dir was there before.
      else
        for (const f of added)
          for (const ext of [".msg", ".state"])
            rmSync(join(fallback, "outbox", "queue", f.replace(/\.msg$/, ext)), { force: true });
    }
  });

  it("a home that does not exist (nobody's /nonexistent, run as root or not) is never made: the state goes to /var/tmp", async () => {
    const uid = process.getuid!();
    const fallback = join("/var/tmp", `mailsend-${uid}`);
    const existed = existsSync(fallback);
    const home = join(s.dir, "nonexistent");
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: home,
      NO_COLOR: "1",
      MAILSEND_BASE_URL: t.env.MAILSEND_BASE_URL!,
      MAILSEND_API_KEY_FILE: s.file("api-key-2", `${t.key}\n`),
      MAILSEND_TRANSPORT: "rest",
      MAILSEND_QUEUE: "always",
      MAILSEND_QUEUE_AUTORUN: "0",
      MAILSEND_CONFIG: join(s.dir, "no-config.json"),
    };
    const message =
      "From: cron@example.com\nTo: dev@example.com\nSubject: no home\nContent-Type: text/html\n\n<p>x</p>\n";
    // A fallback dir this user already has keeps what it held: only what this test queues goes.
    const queueDir = join(fallback, "outbox", "queue");
    const before = new Set(existed && existsSync(queueDir) ? readdirSync(queueDir) : []);
    try {
      const q = await execa(...mailsendCommand(["sendmail", "-t"]), {
        env,
        extendEnv: false,
        input: message,
        reject: false,
        timeout: 60_000,
      });
      expect(q.exitCode, q.stderr).toBe(0);
      expect(existsSync(home)).toBe(false);
      expect(
        readdirSync(join(fallback, "outbox", "queue")).filter((f) => f.endsWith(".msg")).length,
      ).toBeGreaterThanOrEqual(1);
      // The home made later (an admin's mkdir): the state dir is there from now on, and the mail
      // queued before is named, with how to deliver it.
      await execa("mkdir", ["-p", home]);
      const list = await execa(...mailsendCommand(["queue"]), {
        env,
        extendEnv: false,
        reject: false,
        timeout: 60_000,
      });
      expect(list.exitCode, list.stderr).toBe(0);
      expect(list.stderr).toMatch(/also wait.* in .*mailsend-\d+\/outbox\/queue.*did not exist/);
    } finally {
      if (!existed) rmSync(fallback, { recursive: true, force: true });
      else if (existsSync(queueDir))
        for (const f of readdirSync(queueDir))
          if (!before.has(f)) rmSync(join(queueDir, f), { recursive: true, force: true });
    }
  });
});
