/**
 * `npm run dist`'s outputs: the .deb's control fields and files, and the executable as the package
 * installs it (extracted with dpkg-deb -x into a scratch root), run with no Node around it: its
 * version, a dry run, the sendmail name, the packages it keeps in scripts of their own (each loaded
 * by a command that needs it), and a sandbox of its own that it sends to over REST and SMTP,
 * trusting the sandbox's CA from the system's store. The units pass systemd-analyze verify. Uses
 * dist-bin/ as `npm run dist` left it (CI builds it before the suite), building it when absent.
 */
import { execa, execaSync } from "execa";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, ROOT } from "../helpers/cli.js";
import { scratch, type Scratch } from "../helpers/tmp.js";
import { dpkgDeb, lacks, node24, strip, systemdAnalyze } from "../helpers/tools.js";

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
const EXE = join(ROOT, "dist-bin", "mailsend-linux-x64");
const DEB = join(ROOT, "dist-bin", `mailsend_${pkg.version.replace("-", "~")}_amd64.deb`);

describe.skipIf(lacks(dpkgDeb, strip, node24))("npm run dist: the executable and the .deb", () => {
  let s: Scratch;
  let root: string;
  /** The installed executable, and its environment: no node on PATH, a state dir of its own. */
  let exe: string;
  let env: Record<string, string>;

  beforeAll(() => {
    if (!existsSync(EXE) || !existsSync(DEB))
      execFileSync("npm", ["run", "dist"], { cwd: ROOT, stdio: "ignore", timeout: 600_000 });
    s = scratch("mailsend-dist-");
    root = join(s.dir, "root");
    execFileSync("dpkg-deb", ["-x", DEB, root]);
    exe = join(root, "usr", "bin", "mailsend");
    env = { ...baseEnv(), PATH: "/usr/bin:/bin", MAILSEND_STATE_DIR: join(s.dir, "state") };
  }, 660_000);
  afterAll(() => s?.remove());

  const run = (file: string, args: string[], extra: Record<string, string> = {}, input?: string) =>
    execa(file, args, {
      env: { ...env, ...extra },
      extendEnv: false,
      reject: false,
      cwd: s.dir,
      timeout: 30_000,
      ...(input !== undefined ? { input } : { stdin: "ignore" as const }),
    });

  it("control: an MTA that replaces the installed one, with no dependency on nodejs", () => {
    const field = (name: string) => execFileSync("dpkg-deb", ["-f", DEB, name], { encoding: "utf8" }).trim();
    expect(field("Package")).toBe("mailsend");
    expect(field("Version")).toBe(pkg.version.replace("-", "~"));
    expect(field("Architecture")).toBe("amd64");
    expect(field("Section")).toBe("mail");
    expect(field("Priority")).toBe("optional");
    expect(field("Maintainer")).toMatch(/<.+@.+>/);
    expect(field("Description")).not.toBe("");
    for (const name of ["Provides", "Conflicts", "Replaces"]) expect(field(name)).toBe("mail-transport-agent");
    expect(field("Depends")).toBe("");
    const conffiles = execFileSync("dpkg-deb", ["-I", DEB, "conffiles"], { encoding: "utf8" })
      .trim()
      .split("\n")
      .sort();
    expect(conffiles).toEqual(["/etc/mailsend/aliases", "/etc/mailsend/config.json", "/etc/mailsend/env"]);
  });

  it("files: the executable, the names other programs call, units, examples, gzipped man pages", () => {
    const list = execFileSync("dpkg-deb", ["-c", DEB], { encoding: "utf8" });
    for (const path of [
      "./usr/bin/mailsend",
      "./lib/systemd/system/mailsend-relay.service",
      "./lib/systemd/system/mailsend-queue.service",
      "./lib/systemd/system/mailsend-queue.timer",
      "./etc/mailsend/config.json",
      "./etc/mailsend/aliases",
      "./usr/share/doc/mailsend/copyright",
      "./usr/share/bash-completion/completions/mailsend",
    ]) {
      expect(list).toContain(` ${path}\n`);
    }
    expect(list).toMatch(/^-rwxr-xr-x root\/root .* \.\/usr\/bin\/mailsend$/m);
    // Directories are root's and 0755 whatever the build's umask (/etc/mailsend is trusted only so).
    const dirs = list.split("\n").filter((l) => l.startsWith("d"));
    expect(dirs.length).toBeGreaterThan(5);
    for (const line of dirs) expect(line).toMatch(/^drwxr-xr-x root\/root /);
    expect(readlinkSync(join(root, "usr/sbin/sendmail"))).toBe("../bin/mailsend");
    expect(readlinkSync(join(root, "usr/lib/sendmail"))).toBe("../sbin/sendmail");
    expect(readlinkSync(join(root, "usr/bin/mailq"))).toBe("mailsend");
    expect(readlinkSync(join(root, "usr/bin/newaliases"))).toBe("mailsend");
    // Every man page the build wrote is in the package, gzipped.
    const man = join(ROOT, "dist", "man");
    const pages = existsSync(man)
      ? execFileSync("ls", [man], { encoding: "utf8" })
          .split("\n")
          .filter((n) => /\.[18]$/.test(n))
      : [];
    for (const page of pages) expect(list).toContain(`./usr/share/man/man${page.slice(-1)}/${page}.gz\n`);
    expect(statSync(exe).size).toBeLessThanOrEqual(120 * 1024 * 1024);
  });

  it("runs without Node: --version, a dry run, and sendmail's queue listing through the symlink", async () => {
    const version = await run(exe, ["--version"]);
    expect(version.stdout.trim()).toBe(pkg.version);
    const dry = await run(
      exe,
      ["send", "--dry-run", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "Build passed", "--text", "ok"],
      {
        MAILSEND_BASE_URL: "http://127.0.0.1:9",
        MAILSEND_API_KEY: "ms_test_key",
      },
    );
    expect(dry.exitCode).toBe(0);
    expect(dry.stdout).toContain('"subject":"Build passed"');
    expect(dry.stdout).not.toContain("ms_test_key");
    const mailq = await run(join(root, "usr/bin/mailq"), []);
    expect(mailq.exitCode).toBe(0);
    expect(mailq.stdout).toMatch(/queue is empty/i);
  });

  it("the packages it keeps apart load when a command needs them: Markdown, CSS, JSON, CSV, Redis, a proxy", async () => {
    const dir = join(s.dir, "packages");
    mkdirSync(dir);
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const rest = { MAILSEND_BASE_URL: "http://127.0.0.1:9", MAILSEND_API_KEY: "ms_test_key" };
    const message = ["-f", "ci@example.com", "-t", "dev@example.com", "-s", "parts"];

    const md = await run(
      exe,
      ["send", "--dry-run", ...message, "--markdown-file", file("a.md", "# Hi\n\n*x*[^1]\n\n[^1]: note\n")],
      rest,
    );
    expect(md.stderr).toBe("");
    expect(md.stdout).toContain("<h1>Hi</h1>");
    expect(md.stdout).toContain('class=\\"footnotes\\"');

    const html = file("p.html", "<style>p{color:red}</style><p>Hello <b>there</b></p>");
    const smtp = { ...rest, MAILSEND_SMTP_HOST: "127.0.0.1", MAILSEND_SMTP_USER: "u" };
    const css = await run(
      exe,
      ["send", "--dry-run", "--transport", "smtp", ...message, "--html-file", html, "--inline-css"],
      smtp,
    );
    expect(css.stderr).toBe("");
    expect(css.stdout).toContain('<p style="color: red;">Hello <b>there</b></p>');
    expect(css.stdout).toMatch(/text\/plain[\s\S]*\nHello there\n/);

    const request = { from: "ci@example.com", to: "dev@example.com", subject: "json", html: "<p>hi</p>" };
    const json = await run(exe, ["send", "--dry-run", "--json-file", file("m.json", JSON.stringify(request))], rest);
    expect(json.exitCode).toBe(0);
    const bad = await run(
      exe,
      ["send", "--dry-run", "--json-file", file("b.json", '{"from":"ci@example.com","x":1}')],
      rest,
    );
    expect(bad.exitCode).toBe(65);
    expect(bad.stderr).toContain("unknown field");

    const rows = file("r.csv", "to,first_name\nx@example.com,X\nnot-an-address,Y\n");
    const batch = await run(
      exe,
      [
        "batch",
        rows,
        "-f",
        "ci@example.com",
        "-s",
        "Hi {{first_name}}",
        "--html-file",
        file("t.html", "<p>{{first_name}}</p>"),
        "--check",
      ],
      rest,
    );
    expect(batch.stdout + batch.stderr).toContain("1 valid, 1 invalid");

    const once = { ...rest, MAILSEND_QUEUE: "never", MAILSEND_RETRIES: "0" };
    const redis = await run(exe, ["send", ...message, "--text", "x"], {
      ...once,
      MAILSEND_RATE_LIMIT: "60",
      MAILSEND_RATE_LIMIT_URL: "redis://127.0.0.1:1",
    });
    expect(redis.exitCode).toBe(69);
    expect(redis.stderr).toContain("cannot reach the shared-budget Redis at 127.0.0.1:1");
    const proxy = await run(
      exe,
      [
        "send",
        "--transport",
        "smtp",
        "--smtp-proxy",
        "socks5://127.0.0.1:1",
        "--retries",
        "0",
        ...message,
        "--text",
        "x",
      ],
      { ...smtp, ...once },
    );
    expect(proxy.exitCode).toBe(69);
    expect(proxy.stderr).toContain("cannot reach the proxy socks5://127.0.0.1:1");
  });

  it("its own sandbox (with the web inbox) takes what it sends over REST, sendmail's over SMTP, and trusts the system's CAs", async () => {
    const sandbox = execa(
      exe,
      ["sandbox", "--dir", join(s.dir, "sb"), "--http-port", "0", "--smtp-port", "0", "--smtps-port", "0", "--json"],
      {
        env,
        extendEnv: false,
        reject: false,
        stdin: "ignore",
        timeout: 60_000,
      },
    );
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: sandbox.stdout! }).once("line", resolve);
        sandbox.then((r) => reject(new Error(`the sandbox exited (${r.exitCode}): ${r.stderr}`)));
      });
      const ready = JSON.parse(line) as { base_url: string; env: Record<string, string> };
      const page = await fetch(`${ready.base_url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("/assets/inbox.css");
      const css = await fetch(`${ready.base_url}/assets/inbox.css`);
      expect(css.status).toBe(200);
      expect((await css.text()).length).toBeGreaterThan(100);

      const rest = await run(
        exe,
        [
          "send",
          "--transport",
          "rest",
          "-f",
          "ci@example.com",
          "-t",
          "dev@example.com",
          "-s",
          "over REST",
          "--text",
          "ok",
        ],
        ready.env,
      );
      expect(rest.stderr).toBe("");
      expect(rest.exitCode).toBe(0);
      const mail = "From: cron@example.com\nTo: dev@example.com\nSubject: over SMTP\n\nthe job's output\n";
      const sendmail = await run(
        join(root, "usr/sbin/sendmail"),
        ["-ti"],
        { ...ready.env, MAILSEND_TRANSPORT: "smtp" },
        mail,
      );
      expect(sendmail.stderr).toBe("");
      expect(sendmail.exitCode).toBe(0);

      // The machine's CA store (OpenSSL's SSL_CERT_FILE stands for it here), without NODE_EXTRA_CA_CERTS.
      const { NODE_EXTRA_CA_CERTS: ca, ...withoutExtra } = ready.env;
      const noCa = { ...withoutExtra, MAILSEND_TRANSPORT: "smtp", MAILSEND_QUEUE: "never" };
      const untrusted = await run(
        exe,
        ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "untrusted", "--text", "ok"],
        noCa,
      );
      expect(untrusted.stderr).toContain("not trusted");
      const trusted = await run(
        exe,
        ["send", "-f", "ci@example.com", "-t", "dev@example.com", "-s", "system store", "--text", "ok"],
        { ...noCa, SSL_CERT_FILE: ca! },
      );
      expect(trusted.stderr).toBe("");
      expect(trusted.exitCode).toBe(0);

      const inbox = await run(exe, ["inbox", "--json"], ready.env);
      expect(inbox.exitCode).toBe(0);
      const subjects = (JSON.parse(inbox.stdout) as { subject: string }[]).map((m) => m.subject).sort();
      expect(subjects).toEqual(["over REST", "over SMTP", "system store"]);
    } finally {
      sandbox.kill("SIGTERM");
      await sandbox;
    }
  });

  it.skipIf(lacks(systemdAnalyze))("the units pass systemd-analyze verify", () => {
    // Copies whose ExecStart runs the extracted /usr/bin/mailsend, which verify checks is there.
    const dir = join(s.dir, "units");
    mkdirSync(dir);
    const units = ["mailsend-relay.service", "mailsend-queue.service", "mailsend-queue.timer"].map((u) => {
      const text = readFileSync(join(root, "lib/systemd/system", u), "utf8");
      writeFileSync(join(dir, u), text.replaceAll("/usr/bin/mailsend", exe));
      return join(dir, u);
    });
    // --man=no: the man pages named in Documentation= are not installed here.
    const r = execaSync("systemd-analyze", ["verify", "--man=no", ...units], {
      reject: false,
      env: { ...process.env, SYSTEMD_LOG_LEVEL: "notice" },
    });
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
  });
});
