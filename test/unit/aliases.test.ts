import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MailsendError } from "../../src/core/errors.js";
import { expandLocal, isLocalName, loadAliases, machineDomains, parseAliases } from "../../src/sendmail/aliases.js";

const FILE = `# /etc/aliases for this host
postmaster: root
root: ops@example.com

# several targets, continued on the next lines
backup: alice@example.com,
    bob@example.com ,
\tcarol@example.com
www-data: root, web@example.com
"odd name": odd@example.com
Mixed: mixed@example.com
`;

function err(f: () => unknown): MailsendError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(MailsendError);
    return e as MailsendError;
  }
  throw new Error("expected an error");
}

describe("aliases file", () => {
  const table = parseAliases(FILE, "/etc/mailsend/aliases");

  it("reads names, targets, comments and continuation lines", () => {
    expect(table.entries.get("root")?.targets).toEqual(["ops@example.com"]);
    expect(table.entries.get("backup")?.targets).toEqual(["alice@example.com", "bob@example.com", "carol@example.com"]);
    expect(table.entries.get("odd name")?.targets).toEqual(["odd@example.com"]);
    expect(table.entries.get("backup")?.line).toBe(6);
  });

  it("maps local names, through other names, case-insensitively", () => {
    expect(expandLocal(table, "root")).toEqual(["ops@example.com"]);
    expect(expandLocal(table, "postmaster")).toEqual(["ops@example.com"]);
    expect(expandLocal(table, "www-data")).toEqual(["ops@example.com", "web@example.com"]);
    expect(expandLocal(table, "MIXED")).toEqual(["mixed@example.com"]);
    expect(expandLocal(table, "root@localhost")).toEqual(["ops@example.com"]);
  });

  it("an unmapped name is a configuration error naming the setting; default: takes the rest", () => {
    const e = err(() => expandLocal(table, "alice"));
    expect(e.exitCode).toBe(78);
    expect(e.message).toContain('"alice"');
    expect(e.message).toContain("default:");
    expect(e.hint).toContain("MAILSEND_ALIASES");
    const withDefault = parseAliases(`${FILE}default: admin@example.com\n`, "a");
    expect(expandLocal(withDefault, "alice")).toEqual(["admin@example.com"]);
    expect(expandLocal(withDefault, "root")).toEqual(["ops@example.com"]);
  });

  it("no aliases file at all: the error says how to set one", () => {
    const e = err(() => expandLocal(undefined, "root"));
    expect(e.exitCode).toBe(78);
    expect(e.message).toContain("no aliases file");
    expect(e.hint).toContain("MAILSEND_ALIASES");
    expect(e.hint).toContain("config set aliases");
  });

  it("loops, commands and files are errors naming the line", () => {
    const loop = parseAliases("a: b\nb: a\n", "f");
    expect(err(() => expandLocal(loop, "a")).message).toMatch(/loop/);
    const self = parseAliases("root: root\n", "f");
    expect(err(() => expandLocal(self, "root")).message).toMatch(/loop/);
    const pipe = parseAliases('root: "|/usr/bin/procmail"\nlog: /var/log/mail\n', "f");
    expect(err(() => expandLocal(pipe, "log")).message).toMatch(/^f:2: .*a command, a file/);
  });

  it("malformed lines are errors with file and line", () => {
    expect(err(() => parseAliases("root ops@example.com\n", "f")).message).toMatch(/^f:1: /);
    expect(err(() => parseAliases("  ops@example.com\n", "f")).message).toMatch(/^f:1: a continuation line/);
    expect(err(() => parseAliases("# c\nroot:\n", "f")).message).toMatch(/^f:2: .*no target/);
  });

  it("local names are the ones without a domain (or @localhost)", () => {
    expect(isLocalName("root")).toBe(true);
    expect(isLocalName("www-data")).toBe(true);
    expect(isLocalName("root@localhost")).toBe(true);
    expect(isLocalName("root@example.com")).toBe(false);
    expect(isLocalName("")).toBe(false);
  });

  it("a name at this machine's own name is local (root@vm from mailutils or mutt), as Postfix's mydestination has it", () => {
    const host = hostname().toLowerCase();
    const short = host.split(".")[0]!;
    expect(machineDomains().has(host)).toBe(true);
    expect(isLocalName(`root@${short}`)).toBe(true);
    expect(isLocalName(`root@${short.toUpperCase()}`)).toBe(true);
    if (host.includes(".")) {
      // A full host name is an Internet name too: local only where the aliases file says where the user's mail goes.
      expect(isLocalName(`root@${host}`)).toBe(false);
      expect(isLocalName(`root@${host}`, parseAliases("root: ops@example.com\n", "a"))).toBe(true);
      expect(isLocalName(`nobody@${host}`, parseAliases("root: ops@example.com\n", "a"))).toBe(false);
    }
    expect(isLocalName(`root@${short}.example.com`)).toBe(false);
  });

  it("at a host name with dots (a server named after its mail domain), only the users the aliases file names are local; its default: takes no one there", () => {
    const domains = new Set(["example.com", "example"]);
    const table = parseAliases("root: ops@example.net\ndefault: admin@example.net\n", "a");
    expect(isLocalName("root@example.com", table, domains)).toBe(true);
    expect(isLocalName("alice@example.com", table, domains)).toBe(false);
    expect(isLocalName("alice@example.com", undefined, domains)).toBe(false);
    // A name alone, or at the dot-less name, is this machine's whatever the file says.
    expect(isLocalName("alice@example", table, domains)).toBe(true);
    expect(isLocalName("alice@localhost", table, domains)).toBe(true);
  });

  it("loadAliases reads MAILSEND_ALIASES; a missing file is a configuration error", async () => {
    const dir = mkdtempSync(join(tmpdir(), "aliases-"));
    try {
      const p = join(dir, "aliases");
      writeFileSync(p, "root: ops@example.com\n");
      expect(await loadAliases({})).toBeUndefined();
      expect((await loadAliases({ MAILSEND_ALIASES: p }))!.entries.get("root")?.targets).toEqual(["ops@example.com"]);
      const missing = await loadAliases({ MAILSEND_ALIASES: join(dir, "nope") }).catch(
        (e: unknown) => e as MailsendError,
      );
      expect((missing as MailsendError).exitCode).toBe(78);
      expect((missing as MailsendError).message).toContain("does not exist");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
