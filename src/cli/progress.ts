import type { WaitInfo } from "../limits/deliver.js";
import type { CliIO } from "./io.js";

/**
 * A wait as said to a person: whole seconds, except under one second, where
 * "waiting 1 s" would overstate a blink ("0.3 s").
 */
export function waitText(ms: number): string {
  return ms < 1000 ? `${Math.max(0.1, Math.round(ms / 100) / 10)} s` : `${Math.ceil(ms / 1000)} s`;
}

/** A wait's length for --json: seconds, to a tenth under one second. */
export function waitSeconds(ms: number): number {
  return ms < 1000 ? Math.max(0.1, Math.round(ms / 100) / 10) : Math.ceil(ms / 1000);
}

interface Spinner {
  text: string;
  start(): Spinner;
  stop(): void;
}

/**
 * What a person sees while mailsend waits: on a terminal a spinner (after a
 * short delay, so a quick send shows nothing; ora is loaded only then) whose
 * text counts down rate-limit waits; elsewhere one line on stderr per wait.
 */
export class Progress {
  readonly #io: CliIO;
  readonly #enabled: boolean;
  readonly #tty: boolean;
  #spinner: Spinner | undefined;
  #text = "";
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #countdown: NodeJS.Timeout | undefined;

  constructor(io: CliIO, enabled: boolean) {
    this.#io = io;
    this.#enabled = enabled;
    // A terminal that reports no width (script(1), `docker run -t` without a size) cannot
    // host a spinner: ora counts its lines by the width and would loop forever at 0.
    this.#tty = io.stderr.isTTY === true && !io.env.CI && (io.stderr.columns ?? 0) > 0 && io.env.TERM !== "dumb";
  }

  /** A spinner on a terminal; off one (a pipe, a CI log), only lines of text. */
  get interactive(): boolean {
    return this.#tty;
  }

  /** Show `text` if the work is still going after `delayMs`. */
  begin(text: string, delayMs = 400): void {
    this.#text = text;
    if (!this.#enabled || !this.#tty || this.#timer) return;
    this.#timer = setTimeout(() => void this.#show(), delayMs);
    this.#timer.unref();
  }

  async #show(): Promise<void> {
    if (this.#spinner || this.#stopped) return;
    const { default: ora } = await import("ora");
    if (this.#stopped) return;
    this.#spinner = ora({
      text: this.#text,
      stream: this.#io.stderr,
      discardStdin: false,
      color: !this.#io.env.NO_COLOR ? "cyan" : false,
    }).start() as Spinner;
  }

  #setText(text: string): void {
    this.#text = text;
    if (this.#spinner) this.#spinner.text = text;
  }

  /** A wait for a rate-limit slot or before a retry. */
  wait(info: WaitInfo): void {
    if (!this.#enabled) return;
    const why =
      info.reason === "budget"
        ? "rate limit for this key reached"
        : `${info.error?.message ?? "temporary failure"}; retry ${info.attempt - 1}`;
    if (!this.#tty) {
      this.#io.stderr.write(`mailsend: ${why}; waiting ${waitText(info.ms)}\n`);
      return;
    }
    const until = Date.now() + info.ms;
    clearInterval(this.#countdown);
    const tick = () => this.#setText(`${why}; waiting ${waitText(Math.max(0, until - Date.now()))}`);
    tick();
    this.#countdown = setInterval(tick, 1000);
    this.#countdown.unref();
    void this.#show();
  }

  /** New text for the spinner (batch counters). */
  update(text: string): void {
    this.#setText(text);
  }

  /** The wait is over: back to the plain text. */
  resume(text: string): void {
    clearInterval(this.#countdown);
    this.#setText(text);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#countdown);
    this.#spinner?.stop();
  }
}
