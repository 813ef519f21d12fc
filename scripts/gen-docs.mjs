// Writes the reference's option, environment and exit-code tables from the same
// tables the code uses (src/cli/options.ts, src/core/errors.ts).
// `node scripts/gen-docs.mjs --check` exits 1 when they are out of date.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const root = new URL("..", import.meta.url).pathname;
const tmp = join(root, "node_modules", `.mailsend-docs-${process.pid}.mjs`);
await build({
  stdin: {
    contents:
      'export * from "./src/cli/options.ts"; export { SANDBOX_OPTIONS } from "./src/cli/sandbox-options.ts"; export { EXIT, EXIT_MEANING } from "./src/core/errors.ts";',
    resolveDir: root,
    loader: "ts",
  },
  bundle: true,
  packages: "external",
  format: "esm",
  platform: "node",
  outfile: tmp,
  logLevel: "error",
});
const { SEND_OPTIONS, BATCH_OPTIONS, SANDBOX_OPTIONS, EXTRA_ENV, EXIT, EXIT_MEANING } = await import(tmp);
rmSync(tmp, { force: true });

const cell = (s) => String(s).replace(/\|/g, "\\|");
const lines = [];
function optionTable(title, specs) {
  lines.push(`**${title}**`, "", "| option | meaning | environment |", "|---|---|---|");
  for (const o of specs) {
    const flags = `\`${o.flags}\`${o.repeatable ? " (repeatable)" : ""}${o.choices ? ` (${o.choices.join(" \\| ")})` : ""}`;
    lines.push(`| ${cell(flags)} | ${cell(o.description)} | ${o.env ? `\`${o.env}\`` : ""} |`);
  }
  lines.push("");
}
for (const group of [...new Set(SEND_OPTIONS.map((o) => o.group))]) {
  optionTable(
    `send: ${group}`,
    SEND_OPTIONS.filter((x) => x.group === group),
  );
}
// batch shares send's Connection and Limits options; list only its own.
optionTable(
  "batch (plus send's Connection and Limits options)",
  BATCH_OPTIONS.filter((o) => o.group !== "Connection" && o.group !== "Limits"),
);
optionTable(
  "sandbox",
  SANDBOX_OPTIONS.filter((o) => !o.hidden),
);
lines.push("**Environment only**", "", "| variable | meaning |", "|---|---|");
for (const e of EXTRA_ENV) lines.push(`| \`${e.name}\` | ${cell(e.description)} |`);
lines.push("", "**Exit codes**", "", "| code | meaning |", "|---|---|");
for (const [cls, code] of Object.entries(EXIT)) lines.push(`| ${code} | ${cell(EXIT_MEANING[cls])} |`);
const generated = lines.join("\n");

const readmePath = join(root, "docs", "reference.md");
const readme = readFileSync(readmePath, "utf8");
const re = /(<!-- generated:options:start[^>]*-->\n)[\s\S]*?(<!-- generated:options:end -->)/;
if (!re.test(readme)) {
  console.error("docs/reference.md has no <!-- generated:options:start --> ... <!-- generated:options:end --> section");
  process.exit(1);
}
const next = readme.replace(re, (_, a, b) => `${a}${generated}\n${b}`);
if (process.argv.includes("--check")) {
  if (next !== readme) {
    console.error("docs/reference.md option tables are out of date: run `npm run docs`");
    process.exit(1);
  }
  console.log("docs/reference.md option tables are up to date");
} else {
  writeFileSync(readmePath, next);
}
