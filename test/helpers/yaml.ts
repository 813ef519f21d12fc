/**
 * YAML as a CI system reads it, for the README's workflow recipes: PyYAML
 * (Debian's python3-yaml; .ci/tools installs it) rather than a hand-written
 * reading of the lines, which would miss what YAML itself does to them (a
 * " #" that starts a comment, a ": " that makes a plain line a mapping).
 */
import { execFileSync } from "node:child_process";

export function loadYaml(text: string): any {
  const json = execFileSync(
    "python3",
    ["-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))"],
    { input: text, encoding: "utf8" },
  );
  return JSON.parse(json);
}
