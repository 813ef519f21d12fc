/**
 * The package as a user gets it: `npm pack` the built tree (no scripts: the
 * suite has just built it, and a rebuild here would swap dist/ under the
 * other test files), install the tarball into an empty project (its
 * dependencies from the registry), then run the installed CLI and library
 * against a sandbox, and compile a TypeScript consumer against its types.
 */
import { execa } from "execa";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseEnv, ROOT } from "../helpers/cli.js";
import { inProcessSandbox, type TestSandbox } from "../helpers/sandbox.js";
import { scratch } from "../helpers/tmp.js";

const work = scratch("mailsend-pack-");
const app = join(work.dir, "app");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string; name: string };
let files: string[] = [];
let sandbox: TestSandbox | undefined;

/** npm with the caller's environment (registry, cache, proxy settings), quiet about what does not matter here. */
function npm(args: string[], cwd: string, timeout: number) {
  return execa("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    timeout,
    reject: false,
    env: { npm_config_update_notifier: "false" },
  });
}

/**
 * check-types.cjs in the app: `node check-types.cjs <file> [<options JSON>]` prints { checked, errors }.
 * The consumer and the package's declarations are type-checked in full (as skipLibCheck: false would),
 * without paying for a check of all of @types/node: only those files' diagnostics are asked for.
 */
function writeTypeChecker(): void {
  writeFileSync(
    join(app, "check-types.cjs"),
    `const ts = require(${JSON.stringify(join(ROOT, "node_modules", "typescript"))});
// argv: the consumer's file name, then compiler options over these (moduleResolution by name).
const [file = "consumer.mts", extra = "{}"] = process.argv.slice(2);
const { moduleResolution = "NodeNext", module: kind = moduleResolution === "Bundler" ? "ESNext" : "NodeNext", ...more } = JSON.parse(extra);
const options = {
  target: ts.ScriptTarget.ES2022, lib: ["lib.es2023.d.ts"], module: ts.ModuleKind[kind], moduleResolution: ts.ModuleResolutionKind[moduleResolution],
  strict: true, noEmit: true, types: ["node"], typeRoots: [${JSON.stringify(join(ROOT, "node_modules", "@types"))}], ...more,
};
const program = ts.createProgram({ rootNames: [require("node:path").join(__dirname, file)], options });
const checked = program.getSourceFiles().filter((f) => f.fileName.includes("/node_modules/mailsend/") || f.fileName.endsWith("/" + file));
const diagnostics = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(), ...checked.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)])];
const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => "\\n" };
process.stdout.write(JSON.stringify({ checked: checked.map((f) => require("node:path").relative(__dirname, f.fileName)), errors: ts.formatDiagnostics(diagnostics, host) }));
`,
  );
}

beforeAll(async () => {
  const packed = await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", work.dir], ROOT, 60_000);
  if (packed.exitCode !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  files = info!.files.map((f) => f.path).sort();
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "pack-smoke", version: "1.0.0", private: true }));
  const installed = await npm(["install", "--prefer-offline", join(work.dir, info!.filename)], app, 180_000);
  if (installed.exitCode !== 0) throw new Error(`npm install of the tarball failed: ${installed.stderr}`);
  writeTypeChecker();
}, 240_000);

afterAll(async () => {
  await sandbox?.stop();
  work.remove();
});

describe("npm pack", () => {
  it("holds only the built files, README, LICENSE and package.json", () => {
    const allowed =
      /^(package\.json|README\.md|LICENSE|bin\/mailsend\.js|dist\/THIRD_PARTY_LICENSES\.txt|dist\/man\/mailsend(-[a-z]+)?\.[18]|dist\/.+\.(js|js\.map|d\.ts))$/;
    expect(files.filter((f) => !allowed.test(f))).toEqual([]);
    for (const f of [
      "LICENSE",
      "README.md",
      "bin/mailsend.js",
      "dist/cli/main.js",
      "dist/index.js",
      "dist/types/index.d.ts",
      "dist/THIRD_PARTY_LICENSES.txt",
    ])
      expect(files).toContain(f);
    // The CLI's chunks and the library's (dist/lib: a build of its own), each with its map.
    expect(files.some((f) => f.startsWith("dist/chunks/"))).toBe(true);
    expect(files.some((f) => f.startsWith("dist/lib/"))).toBe(true);
    // A bound, not a target: the build splits per command and dependency, not per source file.
    expect(files.length).toBeLessThan(500);
    // The manual pages package.json's "man" names, which npm installs with the package.
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { man: string[] };
    for (const page of pkg.man) expect(files).toContain(page.replace(/^\.\//, ""));
  });

  it("ships source maps without the sources", () => {
    const maps = files.filter((f) => f.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(0);
    for (const f of maps) {
      const map = JSON.parse(readFileSync(join(app, "node_modules", pkg.name, f), "utf8")) as {
        sourcesContent?: unknown;
      };
      expect(map.sourcesContent, f).toBeUndefined();
    }
  });
});

describe("installed from the tarball into an empty project", () => {
  it("runs on the Node the suite runs on (CI's Node 24 run sets MAILSEND_TEST_NODE_MAJOR)", async () => {
    const major = process.versions.node.split(".")[0];
    if (process.env.MAILSEND_TEST_NODE_MAJOR) expect(major).toBe(process.env.MAILSEND_TEST_NODE_MAJOR);
    // What the bin's `#!/usr/bin/env node` (and so npx mailsend) starts: the same Node as process.execPath.
    const r = await execa("node", ["-p", "process.versions.node"], { cwd: app, timeout: 20_000 });
    expect(r.stdout.trim()).toBe(process.versions.node);
  });

  it("npx mailsend --version", async () => {
    const r = await execa("npx", ["--no", "--", "mailsend", "--version"], {
      cwd: app,
      timeout: 60_000,
      reject: false,
      env: { npm_config_loglevel: "error" },
    });
    expect(r.stdout.trim()).toBe(pkg.version);
    expect(r.exitCode).toBe(0);
  });

  it("npx mailsend send: REST and SMTP to a sandbox", async () => {
    sandbox = await inProcessSandbox();
    const before = sandbox.sb.store.count;
    const env = { ...baseEnv(), ...sandbox.env, npm_config_loglevel: "error" };
    for (const transport of ["rest", "smtp"]) {
      const r = await execa(
        "npx",
        [
          "--no",
          "--",
          "mailsend",
          "send",
          "--transport",
          transport,
          "--from",
          "ci@example.com",
          "--to",
          "dev@example.com",
          "--subject",
          `packed ${transport}`,
          "--text",
          "from the tarball",
          "--json",
        ],
        { cwd: app, env, extendEnv: false, timeout: 60_000, reject: false, stdin: "ignore" },
      );
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, transport });
    }
    const subjects = (await sandbox.sb.store.list()).map((m) => m.subject);
    expect(sandbox.sb.store.count).toBe(before + 2);
    expect(subjects).toEqual(expect.arrayContaining(["packed rest", "packed smtp"]));
  });

  it('import { send, sendBatch, createSandbox } from "mailsend" works in a program', async () => {
    writeFileSync(
      join(app, "use.mjs"),
      `import { send, sendBatch, createSandbox, MailsendError, VERSION } from "mailsend";
const sb = await createSandbox();
const stateDir = new URL("./state", import.meta.url).pathname;
const m = { from: "ci@example.com", to: "dev@example.com", subject: "library", html: "<p>ok</p>" };
const rest = await send(m, { ...sb.options(), stateDir });
const smtp = await send({ ...m, attachments: [{ filename: "log.txt", content: Buffer.from("log") }] }, { ...sb.options("smtp"), stateDir });
const batch = await sendBatch([m, m, { ...m, to: "bad" }], { ...sb.options(), stateDir });
let error;
try { await send(m, { ...sb.options(), stateDir, apiKey: "msk_wrong" }); } catch (e) { error = { mailsend: e instanceof MailsendError, code: e.code, exitCode: e.exitCode }; }
const stored = (await sb.messages()).length;
await sb.close();
console.log(JSON.stringify({ version: VERSION, rest: rest.transport, smtp: smtp.transport, summary: batch.summary, error, stored }));
`,
    );
    const r = await execa(process.execPath, ["use.mjs"], { cwd: app, timeout: 60_000, reject: false });
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      version: pkg.version,
      rest: "rest",
      smtp: "smtp",
      summary: { total: 3, sent: 2, invalid: 1, exitCode: 65 },
      error: { mailsend: true, code: "auth_failed", exitCode: 77 },
      stored: 4,
    });
  });

  it.runIf(process.features.require_module)('require("mailsend") works where Node can require ES modules', async () => {
    const r = await execa(
      process.execPath,
      ["-e", 'const m = require("mailsend"); console.log(typeof m.send, typeof m.createSandbox, m.VERSION)'],
      { cwd: app, timeout: 20_000, reject: false },
    );
    expect(r.stdout.trim()).toBe(`function function ${pkg.version}`);
  });

  it("a TypeScript consumer compiles against its types (strict, library files checked)", async () => {
    writeFileSync(
      join(app, "consumer.mts"),
      `import { send, sendBatch, createSandbox, MailsendError, EXIT, type SendOptions, type SendResult, type BatchResult, type ErrorCode, type ExitClass, type MessageInput, type PartialDelivery } from "mailsend";

async function main(): Promise<void> {
  const sb = await createSandbox({ rateLimit: 10 });
  const options: SendOptions = { ...sb.options("smtp"), retries: 1, signal: AbortSignal.timeout(10_000) };
  const message: MessageInput = { from: "a@example.com", to: ["b@example.com"], subject: "s", text: "t", attachments: [{ path: "x.pdf" }, { filename: "y", content: Buffer.from("") }] };
  const r: SendResult = await send(message, options);
  const id: string = r.messageId;
  const b: BatchResult = await sendBatch([{ to: "c@example.com", vars: { n: 1 } }], { template: { from: "a@example.com", subject: "{{n}}", text: "x" }, concurrency: 2 });
  const exit: number = b.summary.exitCode;
  // An item's error narrows as send()'s rejection does.
  const itemCode: ErrorCode | undefined = b.results[0]?.error?.code;
  const itemClass: ExitClass | undefined = b.results[0]?.error?.exitClass;
  const itemHint: string | undefined = b.results[0]?.error?.hint;
  void [itemCode, itemClass, itemHint];
  try {
    await send(message, { apiKey: "k", baseUrl: "http://localhost" });
  } catch (e) {
    if (e instanceof MailsendError) {
      const code: ErrorCode = e.code;
      const cls: ExitClass = e.exitClass;
      const n: number = e.exitCode;
      // recipients_refused: who got it; a program's own handler can name the type.
      const partial: PartialDelivery | undefined = e.partial;
      void [code, cls, n, partial?.refused[0]?.reply];
    }
  }
  const tempfail: 75 = EXIT.tempfail;
  // @ts-expect-error: not a transport
  await send(message, { transport: "carrier-pigeon" });
  // @ts-expect-error: not an error code
  const bogus: ErrorCode = "bogus";
  // @ts-expect-error: a message needs a subject
  await send({ from: "a@example.com", to: "b@example.com", html: "x" });
  // @ts-expect-error: the timeout is a number of milliseconds
  await send(message, { timeoutMs: "30s" });
  void [id, exit, tempfail, bogus];
  await sb.close();
}
void main;
`,
    );
    const r = await execa(process.execPath, ["check-types.cjs", "consumer.mts"], {
      cwd: app,
      timeout: 90_000,
      reject: false,
    });
    expect(r.stderr).toBe("");
    const result = JSON.parse(r.stdout) as { checked: string[]; errors: string };
    expect(result.errors).toBe("");
    expect(result.checked).toEqual(
      expect.arrayContaining([
        "consumer.mts",
        ...["index", "api/types", "api/send", "core/errors"].map((f) => `node_modules/mailsend/dist/types/${f}.d.ts`),
      ]),
    );
  }, 120_000);

  it("the types take what the functions take under moduleResolution bundler and exactOptionalPropertyTypes (an option read from process.env may be undefined)", async () => {
    writeFileSync(
      join(app, "strictest.ts"),
      `import { send, sendBatch, createSandbox, type SendOptions, type SendBatchOptions, type MessageInput, type BatchItem } from "mailsend";

// What a program writes: settings straight from its environment, fields it may not have.
const options: SendOptions = {
  baseUrl: process.env.MAIL_BASE_URL,
  apiKey: process.env.MAIL_KEY,
  apiKeyFile: process.env.MAIL_KEY_FILE,
  caFile: process.env.MAIL_CA,
  smtp: { host: "127.0.0.1", port: process.env.MAIL_PORT ? Number(process.env.MAIL_PORT) : undefined, user: process.env.MAIL_USER },
  stateDir: process.env.MAIL_STATE,
  signal: undefined,
};
const message: MessageInput = {
  from: "a@example.com", to: "b@example.com", subject: "s", html: "<p>x</p>",
  text: undefined, cc: process.env.MAIL_CC, reply_to: undefined, attachments: [{ path: "x.pdf", filename: undefined }],
};
const item: BatchItem = { to: process.env.MAIL_TO, subject: undefined, vars: { n: 1 } };
const batch: SendBatchOptions = { ...options, journal: process.env.MAIL_JOURNAL, template: { from: process.env.MAIL_FROM, text: "t" } };
export async function main(): Promise<void> {
  const sb = await createSandbox({ dir: process.env.MAIL_SANDBOX_DIR, httpPort: undefined });
  await send(message, { ...options, ...sb.options() });
  await sendBatch([item], batch);
  await sb.close();
}
`,
    );
    const r = await execa(
      process.execPath,
      [
        "check-types.cjs",
        "strictest.ts",
        JSON.stringify({
          moduleResolution: "Bundler",
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          verbatimModuleSyntax: true,
        }),
      ],
      {
        cwd: app,
        timeout: 90_000,
        reject: false,
      },
    );
    expect(r.stderr).toBe("");
    const result = JSON.parse(r.stdout) as { checked: string[]; errors: string };
    expect(result.errors).toBe("");
    expect(result.checked).toEqual(
      expect.arrayContaining(["strictest.ts", "node_modules/mailsend/dist/types/api/types.d.ts"]),
    );
  }, 120_000);
});
