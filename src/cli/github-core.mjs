// GitHub Actions' runner files and workflow commands, shared by the CLI (src/cli/github.ts) and
// the Action's entry script (action/main.mjs). Plain JavaScript with no dependency: the Action
// runs it straight from the checkout, before mailsend is installed or built.
// Built-ins by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
// node:crypto only when a delimiter is needed: it is slow to load, and most runs write no output.
const randomUUID = () => process.getBuiltinModule("node:crypto").randomUUID();
const { appendFileSync } = process.getBuiltinModule("node:fs");

/** A workflow command's message: %, CR and LF are escaped, as the runner unescapes them. */
export function escapeData(s) {
  return String(s).replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

/** A workflow command's property value: also ":" and ",", which separate properties. */
export function escapeProperty(s) {
  return escapeData(s).replace(/:/g, "%3A").replace(/,/g, "%2C");
}

/** `::error title=mailsend::message` (the hint, if any, on a second line of the annotation). */
export function annotation(kind, message, hint) {
  const text = hint ? `${message}\n${hint}` : message;
  return `::${kind} title=${escapeProperty("mailsend")}::${escapeData(text)}\n`;
}

/**
 * Lines for $GITHUB_OUTPUT: name=value, or the delimiter form when a value holds a line break
 * (a value from a server may), with a delimiter that does not occur in it.
 */
export function formatOutputs(outputs) {
  let out = "";
  for (const [name, raw] of Object.entries(outputs)) {
    const value = String(raw);
    if (!/[\r\n]/.test(value)) {
      out += `${name}=${value}\n`;
      continue;
    }
    let delimiter = `ghadelimiter_${randomUUID()}`;
    while (value.includes(delimiter)) delimiter = `ghadelimiter_${randomUUID()}`;
    out += `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
  }
  return out;
}

/**
 * Append outputs to the $GITHUB_OUTPUT file. The mail is sent (or not) already when this runs,
 * so a problem is returned for the caller to say as a warning, never thrown: a failed step would
 * invite a re-run that sends it again.
 */
export function appendOutputs(file, outputs) {
  try {
    appendFileSync(file, formatOutputs(outputs));
    return undefined;
  } catch (e) {
    return `cannot append to GITHUB_OUTPUT (${e.code ?? e.message}); no outputs written`;
  }
}
