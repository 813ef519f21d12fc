/**
 * State directories another user can write: refused (78) before anything is written there, with
 * the path, owner, mode and the chmod/chown that fixes it, as OpenSSH's StrictModes and Postfix's
 * queue do. The other user is real (nobody, through setpriv), and so are the links it plants.
 */
import { execa } from "execa";
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Outbox } from "../../src/outbox/store.js";
import { mailsendArgv, runCli } from "../helpers/cli.js";
import { inProcessSandbox, type TestSandbox } from "../helpers/sandbox.js";

const AS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

let t: TestSandbox;
beforeAll(async () => {
  t = await inProcessSandbox();
  // nobody, the other user, must be able to reach the directories it is given.
  chmodSync(t.scratch.dir, 0o755);
});
afterAll(async () => {
  await t?.stop();
  t?.scratch.remove();
});

let n = 0;
/** A fresh state dir of root's (0700) inside the scratch dir. */
function stateDir(mode = 0o700): string {
  const d = join(t.scratch.dir, `state-${n++}`);
  mkdirSync(d);
  chmodSync(d, mode);
  return d;
}

const env = (state: string) => ({
  ...t.env,
  MAILSEND_STATE_DIR: state,
  MAILSEND_QUEUE: "always",
  MAILSEND_QUEUE_AUTORUN: "0",
});
const message = "From: cron@example.com\nTo: dev@example.com\nSubject: trust\n\nhello\n";

/** Runs a shell command as nobody: the other local user. */
async function asNobody(script: string): Promise<void> {
  const r = await execa(
    "setpriv",
    ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", "sh", "-c", script],
    { reject: false },
  );
  expect(r.exitCode, r.stderr).toBe(0);
}

function raw(subject: string): Buffer {
  return Buffer.from(
    `From: Mallory <mallory@example.com>\r\nTo: dev@example.com\r\nSubject: ${subject}\r\nMessage-ID: <${subject}@example.com>\r\n\r\n<p>${subject}</p>\r\n`,
  );
}

describe.skipIf(!AS_ROOT)("a state dir another user can write", () => {
  it("1777 state dir: sendmail refuses with 78, naming path, mode and the fix; nothing is written there", async () => {
    const state = stateDir(0o1777);
    const r = await runCli(["sendmail", "-t"], { env: env(state), input: message });
    expect(r.exitCode, r.stderr).toBe(78);
    expect(r.stderr).toContain(`the state directory ${state} can be written by any user (mode 1777, owner uid 0)`);
    expect(r.stderr).toContain(`chmod go-w '${state}'`);
    expect(readdirSync(state)).toEqual([]);
    const list = await runCli(["queue"], { env: env(state) });
    expect(list.exitCode).toBe(78);
  });

  it("an outbox/ another user made 0777 in a shared dir: root's sendmail refuses (mode and owner said), nothing of root's lands there", async () => {
    const shared = join(t.scratch.dir, `shared-${n++}`);
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    await asNobody(`umask 0; mkdir -m 0777 ${shared}/outbox`);
    const outbox = join(shared, "outbox");
    const r = await runCli(["sendmail", "-t"], {
      env: { ...env(stateDir()), MAILSEND_OUTBOX_DIR: outbox },
      input: message,
    });
    expect(r.exitCode, r.stderr).toBe(78);
    expect(r.stderr).toContain(
      `the outbox directory ${outbox} can be written by any user (mode 0777, owner uid ${NOBODY})`,
    );
    expect(readdirSync(outbox)).toEqual([]);
    // Made by nobody 0700: a daemon user's outbox, where root may work (and what it writes is nobody's).
    await asNobody(`chmod 700 ${outbox}`);
    const ok = await runCli(["sendmail", "-t"], {
      env: { ...env(stateDir()), MAILSEND_OUTBOX_DIR: outbox },
      input: message,
    });
    expect(ok.exitCode, ok.stderr).toBe(0);
    const queued = readdirSync(join(outbox, "queue"));
    expect(queued).toHaveLength(1);
    expect(lstatSync(join(outbox, "queue", queued[0]!)).uid).toBe(NOBODY);
  });

  it("a non-root user's state dir owned by another user: refused with the chown that fixes it", async () => {
    const state = stateDir(0o755);
    chownSync(state, 1, 1);
    const r = await execa(
      "setpriv",
      ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", ...mailsendArgv(["queue"])],
      {
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: "/nonexistent",
          NO_COLOR: "1",
          MAILSEND_STATE_DIR: state,
        },
        extendEnv: false,
        reject: false,
      },
    );
    expect(r.exitCode, r.stderr).toBe(78);
    expect(r.stderr).toContain(`the state directory ${state} is owned by uid 1, not this user (uid ${NOBODY})`);
    expect(r.stderr).toContain(`chown ${NOBODY} '${state}'`);
  });

  it("a message another user drops in a queue/ it can write is never sent with root's key", async () => {
    const state = stateDir();
    const box = Outbox.fromEnv({ MAILSEND_STATE_DIR: state });
    box.ensureDirs();
    chmodSync(state, 0o711);
    chmodSync(box.dir, 0o711);
    chmodSync(box.queueDir, 0o777);
    // What nobody writes: a message file in the outbox's own format, made elsewhere and copied in.
    const elsewhere = join(t.scratch.dir, `planted-${n++}`);
    mkdirSync(elsewhere);
    const id = await new Outbox(elsewhere).add({
      raw: raw("planted"),
      envelope: { from: "mallory@example.com", to: ["dev@example.com"] },
      idempotencyKey: "planted",
      source: "sendmail",
      subject: "planted",
    });
    chmodSync(join(elsewhere, "queue", `${id}.msg`), 0o644);
    chmodSync(t.scratch.dir, 0o755);
    chmodSync(elsewhere, 0o755);
    chmodSync(join(elsewhere, "queue"), 0o755);
    await asNobody(`cp ${elsewhere}/queue/${id}.msg ${box.queueDir}/`);
    const run = await runCli(["queue", "run"], { env: env(state), timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(78);
    expect(run.stderr).toContain(
      `the outbox directory ${box.queueDir} can be written by any user (mode 0777, owner uid 0)`,
    );
    expect((await t.sb.store.list()).filter((m) => m.subject === "planted")).toEqual([]);
    // The doctor says the same, in its outbox check.
    const doc = await runCli(["doctor", "--json"], { env: env(state) });
    const outbox = (
      JSON.parse(doc.stdout) as { checks: { name: string; ok: boolean; detail: string; hint?: string }[] }
    ).checks.find((c) => c.name === "outbox");
    expect(outbox?.ok).toBe(false);
    expect(outbox?.detail).toContain(`${box.queueDir} can be written by any user`);
    expect(outbox?.hint).toContain(`chmod go-w '${box.queueDir}'`);
  });

  it("root in nobody's state dir: a failed/ that is a link to a root-only dir is refused, nothing is renamed or written through it", async () => {
    const state = stateDir();
    chownSync(state, NOBODY, NOBODY);
    chmodSync(t.scratch.dir, 0o755);
    const box = Outbox.fromEnv({ MAILSEND_STATE_DIR: state });
    const id = await box.add({
      raw: raw("linked"),
      envelope: { from: "a@example.com", to: ["dev@example.com"] },
      idempotencyKey: "linked",
      source: "sendmail",
      subject: "linked",
    });
    // Made by root for nobody: nobody's, so nobody's own runner goes on using them.
    expect(lstatSync(box.failedDir).uid).toBe(NOBODY);
    const rootOnly = join(t.scratch.dir, `root-only-${n++}`);
    mkdirSync(rootOnly, { mode: 0o700 });
    await asNobody(
      `rmdir ${box.failedDir} && ln -s ${rootOnly} ${box.failedDir} && printf 'junk\\n' > ${box.queueDir}/${id}.msg`,
    );
    const run = await runCli(["queue", "run"], { env: env(state), timeoutMs: 60_000 });
    expect(run.exitCode, run.stderr).toBe(78);
    expect(run.stderr).toContain(`the outbox directory ${box.failedDir} is a symbolic link`);
    expect(readdirSync(rootOnly)).toEqual([]);
    expect(readFileSync(join(box.queueDir, `${id}.msg`), "utf8")).toBe("junk\n");
    // The same refusal for a plain listing, and for a queue/ that is a link.
    expect((await runCli(["queue", "--json"], { env: env(state) })).exitCode).toBe(78);
  });

  it("root in nobody's own (0700) state dir still works: what it makes there is nobody's", async () => {
    const state = stateDir();
    chownSync(state, NOBODY, NOBODY);
    const r = await runCli(["sendmail", "-t"], { env: env(state), input: message });
    expect(r.exitCode, r.stderr).toBe(0);
    const queue = join(state, "outbox", "queue");
    const files = readdirSync(queue);
    expect(files.length).toBe(1);
    expect(lstatSync(join(queue, files[0]!)).uid).toBe(NOBODY);
  });

  it("the lower layer alone (src/core/owned.ts): a dir others can write, or a link, is never one whose owner gets root's files", async () => {
    const { dirOwner } = await import("../../src/core/owned.js");
    const shared = join(t.scratch.dir, `shared-${n++}`);
    mkdirSync(shared);
    chownSync(shared, NOBODY, NOBODY);
    chmodSync(shared, 0o1777);
    expect(dirOwner(shared)).toBeUndefined();
    chmodSync(shared, 0o700);
    expect(dirOwner(shared)).toEqual({ uid: NOBODY, gid: NOBODY });
    const link = `${shared}-link`;
    symlinkSync(shared, link);
    expect(dirOwner(link)).toBeUndefined();
  });
});
