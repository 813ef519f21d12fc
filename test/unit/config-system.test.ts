/**
 * The system's config file (/etc/mailsend/config.json; here a path in a scratch dir, passed in):
 * read whole by a user who has no file of their own, only when root alone can change it and its
 * directory, and never written by `config set`. The ownership cases use a real second uid
 * (nobody) when the tests run as root, as the outbox's do.
 */
import { chmodSync, chownSync, lchownSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { runConfigPath, runConfigSet, runConfigUnset } from "../../src/cli/commands/config.js";
import {
  configSource,
  loadSettings,
  readConfig,
  readProfileKey,
  type ActiveProfile,
} from "../../src/settings/profile.js";
import { failure, failureOf } from "../helpers/failure.js";
import { scratch } from "../helpers/tmp.js";

const s = scratch("mailsend-config-system-");
afterAll(() => s.remove());

const AS_ROOT = process.geteuid?.() === 0;
const NOBODY = 65534;
/** A uid that is not root: nobody as root, else this user. */
const OTHER = AS_ROOT ? NOBODY : process.geteuid!();

const SYSTEM = {
  profile: "system",
  profiles: { system: { base_url: "https://system.example", from: "s@example.com" } },
};
const USER = { profiles: { default: { base_url: "https://user.example" } } };

let n = 0;
/** A fresh /etc/mailsend-like directory (0755, this user's) holding config.json (0644). */
function systemFile(content: unknown = SYSTEM): { dir: string; path: string } {
  const dir = join(s.dir, `etc-${++n}`, "mailsend");
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  chmodSync(dir, 0o755);
  const path = join(dir, "config.json");
  writeFileSync(path, JSON.stringify(content), { mode: 0o644 });
  chmodSync(path, 0o644);
  return { dir, path };
}

/** A home with no config file (or, with `content`, with one). */
function home(content?: unknown): { HOME: string; XDG_CONFIG_HOME: string } {
  const h = join(s.dir, `home-${++n}`);
  const xdg = join(h, ".config");
  mkdirSync(join(xdg, "mailsend"), { recursive: true });
  if (content !== undefined) writeFileSync(join(xdg, "mailsend", "config.json"), JSON.stringify(content));
  return { HOME: h, XDG_CONFIG_HOME: xdg };
}

function memoryIO(env: Record<string, string>) {
  const out = { stdout: "", stderr: "" };
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  stdout.on("data", (d) => (out.stdout += d));
  stderr.on("data", (d) => (out.stderr += d));
  return { io: { stdout, stderr, stdin: new PassThrough(), env }, out };
}

describe.skipIf(process.platform === "win32")("which config file is read", () => {
  it("this user's file, when there is one, even with a system file there", () => {
    const sys = systemFile();
    const env = home(USER);
    const source = configSource(env, sys.path);
    expect(source).toEqual({ path: source.userPath, system: false, userPath: source.userPath });
    expect(loadSettings(undefined, env, sys.path).env.MAILSEND_BASE_URL).toBe("https://user.example");
  });

  it("MAILSEND_CONFIG, even when it names no file: the system's is not read then", () => {
    const sys = systemFile();
    const env = { ...home(), MAILSEND_CONFIG: join(s.dir, "none.json") };
    expect(configSource(env, sys.path)).toMatchObject({ path: env.MAILSEND_CONFIG, system: false });
    expect(loadSettings(undefined, env, sys.path).profile).toBeUndefined();
  });

  it("this user's path when neither exists; never the system's on Windows", () => {
    const env = home();
    const none = join(s.dir, "no-etc", "config.json");
    expect(configSource(env, none)).toMatchObject({
      system: false,
      path: join(env.XDG_CONFIG_HOME, "mailsend", "config.json"),
    });
    expect(configSource(env, systemFile().path, "win32").system).toBe(false);
  });

  it.skipIf(!AS_ROOT)("the system's, whole, when this user has none; its paths relative to it", () => {
    const sys = systemFile({ profile: "system", profiles: { system: { from: "s@example.com", aliases: "aliases" } } });
    const env = home();
    expect(configSource(env, sys.path)).toEqual({
      path: sys.path,
      system: true,
      userPath: join(env.XDG_CONFIG_HOME, "mailsend", "config.json"),
    });
    const settings = loadSettings(undefined, env, sys.path);
    expect(settings.profile).toMatchObject({ name: "system", file: sys.path, system: true });
    expect(settings.env.MAILSEND_FROM).toBe("s@example.com");
    expect(settings.env.MAILSEND_ALIASES).toBe(join(sys.dir, "aliases"));
    // An empty file of the user's own is still the user's: nothing of the system's is merged in.
    const own = home({ profiles: {} });
    expect(loadSettings(undefined, own, sys.path).profile).toBeUndefined();
  });

  it.skipIf(!AS_ROOT)("a link root made to a file root owns is followed (as for a conffile)", () => {
    const target = systemFile();
    const dir = join(s.dir, "etc-link", "mailsend");
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
    const link = join(dir, "config.json");
    symlinkSync(target.path, link);
    expect(readConfig(home(), link)).toMatchObject({ system: true, defaultProfile: "system" });
  });
});

describe.skipIf(process.platform === "win32")("a system file another user could change: 78 with the fix", () => {
  it("the file owned by a user other than root", () => {
    const sys = systemFile();
    chownSync(sys.path, OTHER, OTHER);
    const e = failureOf(() => loadSettings(undefined, home(), sys.path));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(
      `the system config file ${sys.path} is owned by uid ${OTHER}, not root (mode 0644): mailsend does not read it`,
    );
    expect(e.hint).toContain(`chown root: '${sys.path}'`);
  });

  it.skipIf(!AS_ROOT)("the file writable by its group or by anyone", () => {
    const sys = systemFile();
    chmodSync(sys.path, 0o664);
    const e = failureOf(() => loadSettings(undefined, home(), sys.path));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(
      `the system config file ${sys.path} can be written by its group (mode 0664, owner uid 0): mailsend does not read it`,
    );
    expect(e.hint).toContain(`chmod go-w '${sys.path}'`);
    chmodSync(sys.path, 0o646);
    expect(failureOf(() => loadSettings(undefined, home(), sys.path)).message).toContain("can be written by any user");
  });

  it.skipIf(!AS_ROOT)("its directory writable by others, or not root's", () => {
    const sys = systemFile();
    chmodSync(sys.dir, 0o777);
    const e = failureOf(() => readConfig(home(), sys.path));
    expect(e.exitCode).toBe(78);
    expect(e.message).toContain(`the directory of the system config file ${sys.dir} can be written by any user`);
    expect(e.hint).toContain(`chmod go-w '${sys.dir}'`);
    chmodSync(sys.dir, 0o755);
    chownSync(sys.dir, NOBODY, NOBODY);
    const owner = failureOf(() => readConfig(home(), sys.path));
    expect(owner.message).toContain(`${sys.dir} is owned by uid ${NOBODY}, not root (mode 0755)`);
    expect(owner.hint).toContain(`chown root: '${sys.dir}'`);
  });

  it.skipIf(!AS_ROOT)("a link to a file another user owns, or a link another user made", () => {
    const target = systemFile();
    chownSync(target.path, NOBODY, NOBODY);
    const dir = join(s.dir, "etc-badlink", "mailsend");
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
    const link = join(dir, "config.json");
    symlinkSync(target.path, link);
    // Judged by the file opened, not by the link's name.
    expect(failureOf(() => readConfig(home(), link)).message).toContain(
      `the system config file ${link} is owned by uid ${NOBODY}`,
    );
    chownSync(target.path, 0, 0);
    lchownSync(link, NOBODY, NOBODY);
    const e = failureOf(() => readConfig(home(), link));
    expect(e.message).toContain(`the symbolic link to the system config file ${link} is owned by uid ${NOBODY}`);
    expect(e.hint).toContain(`chown -h root: '${link}'`);
  });
});

describe.skipIf(process.platform === "win32" || !AS_ROOT)("config commands with the system file in use", () => {
  it("config path prints it, and says on stderr that it is the system's and where this user's would be", async () => {
    const sys = systemFile();
    const env = home();
    const { io, out } = memoryIO(env);
    expect(await runConfigPath({}, io, sys.path)).toBe(0);
    expect(out.stdout).toBe(`${sys.path}\n`);
    expect(out.stderr).toContain("is the system's config file");
    expect(out.stderr).toContain(join(env.XDG_CONFIG_HOME, "mailsend", "config.json"));
  });

  it("config set writes this user's file, never the system's, and says the system's is no longer read", async () => {
    const sys = systemFile();
    const before = readFileSync(sys.path, "utf8");
    const env = home();
    const { io, out } = memoryIO(env);
    expect(await runConfigSet("from", "me@example.com", {}, io, sys.path)).toBe(0);
    expect(readFileSync(sys.path, "utf8")).toBe(before);
    const user = join(env.XDG_CONFIG_HOME, "mailsend", "config.json");
    expect(JSON.parse(readFileSync(user, "utf8"))).toEqual({ profiles: { default: { from: "me@example.com" } } });
    expect(out.stderr).toContain(`the system's ${sys.path} is no longer read for this user`);
    expect(out.stderr).toContain(`MAILSEND_CONFIG=${sys.path}`);
    expect(configSource(env, sys.path).system).toBe(false);
  });

  it("config unset with no file of this user's changes nothing, and says where the settings come from", async () => {
    const sys = systemFile();
    const before = readFileSync(sys.path, "utf8");
    const { io, out } = memoryIO(home());
    expect(await runConfigUnset("from", { profile: "system" }, io, sys.path)).toBe(0);
    expect(readFileSync(sys.path, "utf8")).toBe(before);
    expect(out.stderr).toContain("nothing to unset there");
  });
});

describe.skipIf(process.platform === "win32" || !AS_ROOT)("a key file this user may not read", () => {
  // As nobody (the effective uid only, given back after): the permission check is the kernel's.
  function asNobody<T>(f: () => Promise<T>): Promise<T> {
    process.setegid!(NOBODY);
    process.seteuid!(NOBODY);
    return f().finally(() => {
      process.seteuid!(0);
      process.setegid!(0);
    });
  }

  it("the system profile's root-only key: 78, saying who may read it and what this user can do", async () => {
    const dir = join(s.dir, "etc-key");
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    chmodSync(s.dir, 0o755);
    const key = join(dir, "key");
    writeFileSync(key, "msk_test_system_key\n", { mode: 0o600 });
    const profile: ActiveProfile = {
      name: "system",
      file: join(dir, "config.json"),
      system: true,
      settings: { api_key_file: key },
    };
    const e = await failure(asNobody(() => readProfileKey(profile, {})));
    expect(e.exitCode).toBe(78);
    expect(e.message).toBe(
      `profile "system" (${profile.file}) takes the API key from ${key}, which cannot be read (permission denied: this user (uid ${NOBODY}) may not read it; it is uid 0's, mode 0600)`,
    );
    expect(e.hint).toContain("That key is for root and the system's services");
    expect(e.hint).toContain("MAILSEND_API_KEY_FILE");
    expect(e.hint).toContain("docs/install.md");
    // A profile of a file the user named: the same, without blaming the system's services.
    const named = await failure(asNobody(() => readProfileKey({ ...profile, system: false }, {})));
    expect(named.hint).toMatch(/^Let this user read it, or give this user a key file of its own/);
  });
});
