/** The terminal streams and environment a command sees; tests pass their own. */
export interface CliIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: Record<string, string | undefined>;
}

/** A word as a POSIX shell would take it back: single-quoted only when it needs to be. */
export function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
}

/** The five styles mailsend's output uses; each returns its text unchanged when colour is off. */
export interface Colors {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
}

// The 16-colour SGR codes (ECMA-48): every terminal has them. A styled text that already holds
// the closing code (a nested style) gets the opening one again after it, so the rest stays styled.
const style = (open: number, close: number) => {
  const on = `\u001b[${open}m`;
  const off = `\u001b[${close}m`;
  return (text: string) => `${on}${text.split(off).join(off + on)}${off}`;
};
const ON: Colors = {
  bold: style(1, 22),
  dim: style(2, 22),
  red: style(31, 39),
  green: style(32, 39),
  yellow: style(33, 39),
};
const plain = (text: string) => text;
const OFF: Colors = { bold: plain, dim: plain, red: plain, green: plain, yellow: plain };

/** A terminal that takes styles: not with NO_COLOR set and not empty, nor TERM=dumb. */
export function styledTerminal(stream: CliIO["stderr"], env: CliIO["env"]): boolean {
  return stream.isTTY === true && !env.NO_COLOR && env.TERM !== "dumb";
}

/**
 * Colour only on a terminal, never with NO_COLOR set and not empty (https://no-color.org) or TERM=dumb;
 * FORCE_COLOR (not 0) turns it on off a terminal. Written here rather than with chalk: five
 * styles do not need its terminal detection, which every command paid for at start-up. Nor with
 * util.styleText: newer Nodes make it test a stream itself (process.stdout unless told), where
 * here NO_COLOR, FORCE_COLOR and the stream written to decide.
 */
export function colorsFor(stream: CliIO["stderr"], env: CliIO["env"]): Colors {
  const on = styledTerminal(stream, env);
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0" && !env.NO_COLOR;
  return on || forced ? ON : OFF;
}
