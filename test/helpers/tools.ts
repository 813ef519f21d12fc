/**
 * The system programs the tests drive (curl, swaks, redis-server, chromium, …), found the same way
 * for each: on PATH, or by a probe for what is not a program (a Python or Perl module).
 *
 *   const redis = tool("redis-server", "redis-server");
 *   describe.skipIf(lacks(redis))("…", () => { … redis.path … });
 *
 * On a machine without one, the tests that need it are skipped with one line naming the program and
 * the Debian package that brings it. Under CI (CI=true, as .ci/run runs) every one of them is
 * installed by .ci/tools, so a missing one fails the file instead: nothing is skipped by accident.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface Tool {
  /** What the tests run (a program name, or a module name). */
  name: string;
  /** The Debian package(s) that bring it, as `apt-get install` takes them; or how else to get it. */
  pkg: string;
  /** Not a Debian package: the project's script that fetches it (from the npm registry). */
  fetchedBy?: string;
  /** The program's full path when found on PATH (undefined for a tool found by a probe). */
  readonly path: string | undefined;
  readonly present: boolean;
}

/** Directories searched after PATH: a daemon such as tinyproxy is in sbin, which a user's PATH may lack. */
const SBIN = ["/usr/local/sbin", "/usr/sbin", "/sbin"];

function onPath(program: string): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), ...SBIN];
  for (const d of dirs) {
    const p = join(d, program);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** True when the command exits 0 (a probe for a module, or a program found another way). */
export function probe(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: "ignore", timeout: 10_000 }).status === 0;
}

/**
 * A program the tests run, looked up on PATH (then sbin); with `check`, present only when that passes
 * instead (a module, or a program that is not on PATH, such as git's send-email). Looked up when first
 * asked, so a file pays only for the tools it uses.
 */
export function tool(name: string, pkg: string, check?: () => boolean): Tool {
  let found: { path: string | undefined; present: boolean } | undefined;
  const look = () => {
    if (!found) {
      const path = check ? undefined : onPath(name);
      found = { path, present: check ? check() : path !== undefined };
    }
    return found;
  };
  return {
    name,
    pkg,
    get path() {
      return look().path;
    },
    get present() {
      return look().present;
    },
  };
}

const told = new Set<string>();

/**
 * For describe.skipIf / it.skipIf: true when a tool is absent, after one line saying which and the
 * package that brings it. Under CI an absent tool throws, so the file fails rather than skips.
 */
export function lacks(...tools: Tool[]): boolean {
  const missing = tools.filter((t) => !t.present);
  if (missing.length === 0) return false;
  const line = missing.map((t) => `${t.name} (apt-get install ${t.pkg})`).join(", ");
  if (process.env.CI && process.env.CI !== "false" && process.env.CI !== "0") {
    throw new Error(`CI: not installed: ${line}; .ci/tools installs every program the tests drive`);
  }
  for (const t of missing) {
    if (told.has(t.name)) continue;
    told.add(t.name);
    console.warn(`skipped: the tests that need ${t.name} (not installed; apt-get install ${t.pkg}, or run .ci/tools)`);
  }
  return true;
}

// Each program or module the tests drive, once, with the package .ci/tools installs it from.
export const curl = tool("curl", "curl");
export const swaks = tool("swaks", "swaks libnet-ssleay-perl libio-socket-ssl-perl");
export const chromium = tool("chromium", "chromium");
export const redisServer = tool("redis-server", "redis-server");
export const tinyproxy = tool("tinyproxy", "tinyproxy");
export const zsh = tool("zsh", "zsh");
export const fish = tool("fish", "fish");
export const script = tool("script", "bsdutils");
export const python3 = tool("python3", "python3");
export const pythonCoverage = tool("python3-coverage", "python3-coverage");
export const pyyaml = tool("python3-yaml", "python3-yaml", () => probe("python3", ["-c", "import yaml"]));
export const sNail = tool("s-nail", "s-nail");
export const bsdMailx = tool("bsd-mailx", "bsd-mailx");
export const gitSendEmail = tool("git send-email", "git-email", () => gitExec("git-send-email"));
export const mailAddress = tool("Mail::Address", "libmailtools-perl", () =>
  probe("perl", ["-MMail::Address", "-e", "1"]),
);

function gitExec(name: string): boolean {
  const r = spawnSync("git", ["--exec-path"], { encoding: "utf8" });
  if (r.status !== 0) return false;
  try {
    accessSync(join(r.stdout.trim(), name), constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// What `npm run dist` builds the executable and the .deb with, and what checks the units.
export const dpkgDeb = tool("dpkg-deb", "dpkg");
export const strip = tool("strip", "binutils");
export const systemdAnalyze = tool("systemd-analyze", "systemd");
/** The npm registry's Node 24 that .ci/node24 installs (.ci/run does, before the suite). */
export const node24: Tool = Object.assign(
  tool("Node 24 (.ci/node24)", "npm, then run .ci/node24", () =>
    probe(join(fileURLToPath(new URL("../..", import.meta.url)), ".ci", "node24"), ["--find"]),
  ),
  { fetchedBy: ".ci/node24" },
);
