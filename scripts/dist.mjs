// `npm run dist`: mailsend as one executable that needs no Node (dist-bin/mailsend-linux-x64), made
// with Node's single-executable-application support, and a Debian package of it
// (dist-bin/mailsend_<version>_amd64.deb) that makes it the machine's sendmail.
//
// The executable is Node 24 (the npm registry's node@24 binary: MAILSEND_NODE24, else what
// .ci/node24 finds or installs) with mailsend's scripts injected (scripts/sea.mjs).
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { buildExecutable } from "./sea.mjs";

const root = new URL("..", import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const out = join(root, "dist-bin");
const work = join(out, ".work");
const EXE = join(out, "mailsend-linux-x64");
/** The ceiling: the executable is downloaded and copied onto small machines. */
const MAX_BYTES = 120 * 1024 * 1024;

if (process.platform !== "linux" || process.arch !== "x64")
  fail(`builds the linux-x64 executable only, on linux-x64 (this is ${process.platform}-${process.arch})`);
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

const node24 = findNode24();
await makeExecutable(node24, EXE);
const deb = makeDeb(EXE);
rmSync(work, { recursive: true, force: true });
console.log(`${relativeToRoot(EXE)} (${mib(statSync(EXE).size)} MiB)`);
console.log(`${relativeToRoot(deb)} (${mib(statSync(deb).size)} MiB)`);

function fail(message) {
  console.error(`dist: ${message}`);
  process.exit(1);
}

function mib(bytes) {
  return (bytes / 1024 / 1024).toFixed(1);
}

function relativeToRoot(path) {
  return path.startsWith(root) ? path.slice(root.length) : path;
}

/** Runs a program, its stdout as text; with `quiet`, undefined when it fails. */
function run(file, args, quiet = false) {
  try {
    return execFileSync(file, args, {
      encoding: "utf8",
      stdio: ["ignore", "pipe", quiet ? "ignore" : "inherit"],
    }).trim();
  } catch (e) {
    if (quiet) return undefined;
    throw e;
  }
}

function findNode24() {
  const path = process.env.MAILSEND_NODE24 || run(join(root, ".ci", "node24"), []);
  const version = run(path, ["--version"]);
  if (!/^v24\./.test(version)) fail(`${path} is Node ${version}, not 24`);
  return path;
}

/**
 * Builds the executable beside `dest` and moves it there once it answers --version with the
 * package's version and fits the size.
 */
async function makeExecutable(node, dest) {
  const tmp = join(work, "mailsend");
  await buildExecutable({ root, node, work, version: pkg.version, dest: tmp, fail });
  const size = statSync(tmp).size;
  if (size > MAX_BYTES) fail(`the executable is ${mib(size)} MiB, over ${mib(MAX_BYTES)} MiB`);
  const version = run(tmp, ["--version"]);
  if (version !== pkg.version) fail(`the executable says ${JSON.stringify(version)} to --version, not ${pkg.version}`);
  mkdirSync(out, { recursive: true });
  renameSync(tmp, dest);
}

/** Debian's version of an npm version: a pre-release sorts before its release there with "~". */
function debVersion(version) {
  return version.replace("-", "~");
}

/**
 * The package's tree: the executable as /usr/bin/mailsend and the names other programs call it by,
 * the man pages (dist/man/, when the build made them), bash/zsh/fish completions, the systemd
 * units, and /etc/mailsend's examples (packaging/deb/).
 */
function makeDeb(exe) {
  const tree = join(work, "deb");
  const src = join(root, "packaging", "deb");
  // Directories 0755 whatever the build's umask: /etc/mailsend must be root's alone, as mailsend
  // checks before it reads the system's config file there.
  const put = (path, data, mode = 0o644) => {
    mkdirSync(join(tree, path, ".."), { recursive: true, mode: 0o755 });
    writeFileSync(join(tree, path), data, { mode });
    chmodSync(join(tree, path), mode);
  };
  const link = (path, target) => {
    mkdirSync(join(tree, path, ".."), { recursive: true, mode: 0o755 });
    symlinkSync(target, join(tree, path));
  };
  put("usr/bin/mailsend", readFileSync(exe), 0o755);
  // The names Debian's MTAs (exim4, postfix, msmtp-mta) install.
  link("usr/sbin/sendmail", "../bin/mailsend");
  link("usr/lib/sendmail", "../sbin/sendmail");
  link("usr/bin/mailq", "mailsend");
  link("usr/bin/newaliases", "mailsend");
  for (const page of manPages())
    put(`usr/share/man/man${page.section}/${page.name}.gz`, gzipSync(readFileSync(page.path), { level: 9 }));
  // `man sendmail` finds the page of the sendmail it is, as with the other MTAs.
  if (existsSync(join(tree, "usr/share/man/man8/mailsend-sendmail.8.gz")))
    link("usr/share/man/man8/sendmail.8.gz", "mailsend-sendmail.8.gz");
  put("usr/share/bash-completion/completions/mailsend", `${run(exe, ["completion", "bash"])}\n`);
  put("usr/share/zsh/vendor-completions/_mailsend", `${run(exe, ["completion", "zsh"])}\n`);
  put("usr/share/fish/vendor_completions.d/mailsend.fish", `${run(exe, ["completion", "fish"])}\n`);
  for (const unit of readdirSync(join(src, "systemd")))
    put(`lib/systemd/system/${unit}`, readFileSync(join(src, "systemd", unit)));
  const conffiles = [];
  for (const file of readdirSync(join(src, "etc"))) {
    put(`etc/mailsend/${file}`, readFileSync(join(src, "etc", file)));
    conffiles.push(`/etc/mailsend/${file}`);
  }
  put("usr/share/doc/mailsend/copyright", copyright());
  for (const script of ["postinst", "prerm", "postrm"])
    put(`DEBIAN/${script}`, readFileSync(join(src, "DEBIAN", script)), 0o755);
  put("DEBIAN/conffiles", `${conffiles.join("\n")}\n`);
  put("DEBIAN/control", control(installedSize(tree)));
  const deb = join(out, `mailsend_${debVersion(pkg.version)}_amd64.deb`);
  execFileSync("dpkg-deb", ["--build", "--root-owner-group", "-Zgzip", tree, deb], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  return deb;
}

/** dist/man/*.1 and *.8, when the build writes man pages. */
function manPages() {
  const dir = join(root, "dist", "man");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => ({ name, path: join(dir, name), section: /\.([18])$/.exec(name)?.[1] }))
    .filter((p) => p.section !== undefined);
}

function copyright() {
  const notices = join(root, "dist", "THIRD_PARTY_LICENSES.txt");
  const parts = [
    `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: mailsend\n\nFiles: *\nLicense: ${pkg.license}\n`,
    readFileSync(join(root, "LICENSE"), "utf8").trim(),
  ];
  // The licences of the bundled packages, as dist/ ships them (npm run build writes the list).
  if (existsSync(notices)) parts.push(readFileSync(notices, "utf8").trim());
  return `${parts.join("\n\n")}\n`;
}

/** Kibibytes of the tree without DEBIAN/, as dpkg reports it. */
function installedSize(tree) {
  let bytes = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === "DEBIAN" && dir === tree) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) bytes += statSync(path).size;
    }
  };
  walk(tree);
  return Math.ceil(bytes / 1024);
}

/**
 * Control fields as Debian's MTAs have them: it is a mail-transport-agent and replaces whichever
 * is installed. Nothing to depend on: the executable carries its runtime (libc aside).
 */
function control(size) {
  return [
    "Package: mailsend",
    `Version: ${debVersion(pkg.version)}`,
    "Architecture: amd64",
    "Maintainer: mailsend maintainers <mailsend@users.noreply.github.com>",
    `Installed-Size: ${size}`,
    "Section: mail",
    "Priority: optional",
    "Provides: mail-transport-agent",
    "Conflicts: mail-transport-agent",
    "Replaces: mail-transport-agent",
    "Description: sendmail that sends through a mail service's REST API or SMTP",
    " mailsend sends mail through the service's REST endpoint or SMTP submission.",
    " This package makes it the machine's sendmail (/usr/sbin/sendmail, mailq),",
    " with a local SMTP relay and an outbox runner as systemd services. It is one",
    " executable with its own runtime: no Node.js is needed.",
    "",
  ].join("\n");
}
