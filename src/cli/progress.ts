import type { CliIO } from "./io.js";

/**
 * A spinner on stderr for waits a person would notice. It appears only after
 * a short delay (a quick send shows nothing), only on a terminal, and ora is
 * loaded only then.
 */
export function delayedSpinner(io: CliIO, text: string, enabled: boolean, delayMs = 400): { stop: () => void } {
  if (!enabled || io.stderr.isTTY !== true || io.env.CI) return { stop: () => {} };
  let stopped = false;
  let spinner: { stop: () => void } | undefined;
  const timer = setTimeout(async () => {
    const { default: ora } = await import("ora");
    if (stopped) return;
    spinner = ora({ text, stream: io.stderr, discardStdin: false, color: io.env.NO_COLOR === undefined ? "cyan" : false }).start();
  }, delayMs);
  timer.unref();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
      spinner?.stop();
    },
  };
}
