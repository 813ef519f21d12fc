/**
 * Local names (cron mails `root`, daemons mail a user name) become real
 * addresses through an aliases file in the /etc/aliases format:
 *
 *   # comments, blank lines
 *   root: ops@example.com
 *   backup: alice@example.com,
 *       bob@example.com          (a line starting with white space continues)
 *   www-data: root                (a local name maps on through the table)
 *   default: admin@example.com   (every other local name)
 *
 * Only mail addresses and local names are taken as targets: a pipe to a
 * command, a file or :include: of a local MTA has no meaning for a service
 * that sends mail, so such a target is an error when it is used.
 */
import { readFile } from "node:fs/promises";
import { homedir, hostname } from "node:os";
import { dirname, resolve } from "node:path";
import { MailsendError } from "../core/errors.js";
import type { Env } from "../core/env.js";

export interface AliasEntry {
  targets: string[];
  line: number;
}

export interface AliasTable {
  /** The file, as shown in messages. */
  path: string;
  entries: Map<string, AliasEntry>;
}

/** Where the aliases setting comes from, for messages: the variable, or the profile's key it was layered from. */
export const ALIASES_SETTING = "MAILSEND_ALIASES (or the profile's aliases: mailsend config set aliases <file>)";

function bad(path: string, line: number, why: string): MailsendError {
  return new MailsendError("config_invalid", `${path}:${line}: ${why}`, {
    hint: 'The aliases file has lines like "root: ops@example.com" (several targets separated by commas; a line starting with a space continues the one before; # starts a comment).',
  });
}

/** Split on commas outside double quotes and angle brackets. */
function splitTargets(s: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  let angle = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "\\" && quoted) {
      cur += c + (s[i + 1] ?? "");
      i++;
      continue;
    }
    if (c === '"') quoted = !quoted;
    else if (!quoted && c === "<") angle++;
    else if (!quoted && c === ">") angle = Math.max(0, angle - 1);
    if (c === "," && !quoted && angle === 0) {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  out.push(cur);
  return out.map((t) => t.trim()).filter((t) => t !== "");
}

export function parseAliases(text: string, path: string): AliasTable {
  const entries = new Map<string, AliasEntry>();
  // Logical lines: a physical line that starts with white space continues the one before.
  const logical: Array<{ text: string; line: number }> = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed === "" || trimmed.startsWith("#")) return;
    if (/^[ \t]/.test(raw)) {
      const last = logical[logical.length - 1];
      if (!last) throw bad(path, i + 1, "a continuation line (starting with white space) before any alias");
      last.text += ` ${trimmed}`;
      return;
    }
    logical.push({ text: raw, line: i + 1 });
  });
  for (const { text: l, line } of logical) {
    let name: string;
    let rest: string;
    const quoted = /^"((?:[^"\\]|\\.)*)"\s*:(.*)$/.exec(l);
    if (quoted) {
      name = quoted[1]!.replace(/\\(.)/g, "$1");
      rest = quoted[2]!;
    } else {
      const colon = l.indexOf(":");
      if (colon <= 0) throw bad(path, line, `expected "name: target" (no colon in ${JSON.stringify(l.slice(0, 80))})`);
      name = l.slice(0, colon).trim();
      rest = l.slice(colon + 1);
    }
    if (name === "" || (!quoted && /\s/.test(name)))
      throw bad(path, line, `the alias name ${JSON.stringify(name)} must be one word`);
    const targets = splitTargets(rest);
    if (targets.length === 0) throw bad(path, line, `the alias "${name}" has no target`);
    // As in newaliases, a later line for the same name wins; the name is case-insensitive.
    entries.set(name.toLowerCase(), { targets, line });
  }
  return { path, entries };
}

let machine: Set<string> | undefined;

/**
 * The names of this machine as mail programs write them after a user's name (`root@vm`, as
 * GNU mailutils and mutt do from the host name): the host name and its first label, lower case.
 * Not /etc/mailname's: on Debian that is usually the organisation's mail domain, whose addresses
 * (webmaster@example.com) are real mailboxes elsewhere, not this machine's users.
 */
export function machineDomains(): ReadonlySet<string> {
  if (machine) return machine;
  machine = new Set();
  const add = (name: string | undefined) => {
    const n = name?.trim().toLowerCase().replace(/\.$/, "");
    if (!n || !/^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$/.test(n)) return;
    machine!.add(n);
    machine!.add(n.split(".")[0]!);
  };
  try {
    add(hostname());
  } catch {}
  return machine;
}

/**
 * A recipient that names a user of this machine, not a mailbox on the Internet: a bare name, one at
 * localhost, or one at the machine's own name (machineDomains), as Postfix's default mydestination
 * has it. A host name without a dot names no mailbox anywhere else; one with dots
 * (web01.example.net, or a server named after its mail domain, example.com) is local only for a
 * user the aliases file names itself: its `default:` does not take the domain's other addresses
 * (alice@example.com is a real mailbox elsewhere), which are sent as written.
 */
export function isLocalName(
  address: string,
  table?: AliasTable,
  domains: ReadonlySet<string> = machineDomains(),
): boolean {
  const at = address.lastIndexOf("@");
  if (at < 0) return /^[^\s<>()"@,;:]+$/.test(address) && address !== "";
  const domain = address.slice(at + 1).toLowerCase();
  if (isLocalhost(domain)) return true;
  if (!domains.has(domain)) return false;
  if (!domain.includes(".")) return true;
  return table?.entries.has(localPart(address)) ?? false;
}

/**
 * Whether an address is written at this machine at all (a name alone, at localhost, or at one of
 * its names): the only ones whose meaning can depend on the aliases file. Cheap; reads no file.
 */
export function atThisMachine(address: string, domains: ReadonlySet<string> = machineDomains()): boolean {
  const at = address.lastIndexOf("@");
  if (at < 0) return address.trim() !== "";
  const domain = address.slice(at + 1).toLowerCase();
  return isLocalhost(domain) || domains.has(domain);
}

const isLocalhost = (domain: string) => domain === "localhost" || domain === "localhost.localdomain";

function localPart(address: string): string {
  const at = address.lastIndexOf("@");
  return (at < 0 ? address : address.slice(0, at)).toLowerCase();
}

/**
 * The addresses a local name stands for, following names that map to other
 * names. Throws a configuration error (78) naming the setting when there is
 * no aliases file or no entry (and no default) for it.
 */
export function expandLocal(table: AliasTable | undefined, address: string): string[] {
  const name = localPart(address);
  if (!table) {
    throw new MailsendError(
      "config_missing",
      `"${address}" is a local name (a user of this machine${address.includes("@") ? "" : ", no domain"}), and no aliases file is set to map it to an address`,
      {
        hint: `Write an aliases file (e.g. "root: ops@example.com" and "default: ops@example.com") and name it in ${ALIASES_SETTING}; or give a full address.`,
      },
    );
  }
  const out: string[] = [];
  const walk = (n: string, chain: string[]) => {
    if (chain.length > 10)
      throw bad(
        table.path,
        table.entries.get(n)?.line ?? 0,
        `the aliases ${chain.join(" -> ")} nest more than 10 deep`,
      );
    const direct = table.entries.get(n);
    const entry = direct ?? table.entries.get("default");
    if (!entry) {
      throw new MailsendError(
        "config_missing",
        `"${address}" is a local name${chain.length ? ` (through ${[...chain, n].join(" -> ")})` : ""} and the aliases file ${table.path} maps neither "${n}" nor has a "default:" entry`,
        {
          hint: `Add a line "${n}: someone@example.com" or "default: someone@example.com" to ${table.path} (the file ${ALIASES_SETTING} names).`,
        },
      );
    }
    const via = direct ? n : "default";
    for (const t of entry.targets) {
      if (/^[|/]|^:include:/i.test(t)) {
        throw bad(
          table.path,
          entry.line,
          `"${via}" maps to ${JSON.stringify(t)}: a command, a file or :include: cannot be delivered by mailsend; map it to an address`,
        );
      }
      if (!isLocalName(t)) {
        out.push(t.replace(/^<(.*)>$/, "$1"));
        continue;
      }
      const next = localPart(t);
      if (next === n || chain.includes(next)) {
        throw bad(
          table.path,
          entry.line,
          `"${via}" maps back to "${next}" (${[...chain, n, next].join(" -> ")}): a loop; map it to an address`,
        );
      }
      walk(next, [...chain, n]);
    }
  };
  walk(name, []);
  return [...new Set(out)];
}

function expandHome(p: string, env: Env): string {
  if (p === "~") return env.HOME || homedir();
  if (p.startsWith("~/")) return resolve(env.HOME || homedir(), p.slice(2));
  return p;
}

/**
 * The environment with MAILSEND_ALIASES as a profile's `aliases` sets it: a path relative to the
 * config file (like its api_key_file), or under ~. The variable, when set, wins as it was.
 */
export function withProfileAliases(
  env: Env,
  ownEnv: Env,
  profile: { file: string; settings: { aliases?: unknown } } | undefined,
): Env {
  const p = profile?.settings.aliases;
  if (ownEnv.MAILSEND_ALIASES || typeof p !== "string") return env;
  const path = p === "~" || p.startsWith("~/") ? resolve(ownEnv.HOME || homedir(), p.slice(2)) : p;
  return { ...env, MAILSEND_ALIASES: resolve(dirname(profile!.file), path) };
}

/** The aliases file MAILSEND_ALIASES names (a profile's `aliases` is layered into it), or undefined when none is set. */
export async function loadAliases(env: Env): Promise<AliasTable | undefined> {
  const setting = env.MAILSEND_ALIASES;
  if (setting === undefined || setting === "") return undefined;
  const path = resolve(expandHome(setting, env));
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "it does not exist"
        : code === "EACCES" || code === "EPERM"
          ? "permission denied"
          : code === "EISDIR"
            ? "it is a directory"
            : (code ?? String(e));
    throw new MailsendError("config_invalid", `the aliases file ${path} cannot be read (${why})`, {
      cause: e,
      hint: `Create it, or point ${ALIASES_SETTING} at another file.`,
    });
  }
  return parseAliases(text, path);
}
