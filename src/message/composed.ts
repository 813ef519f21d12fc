/**
 * The message from send's flags, with what composing it did: how a piped body
 * was read, which images and stylesheets went inline (said under -v, shown by
 * --dry-run), and the warnings about stdin a person should hear.
 */
// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { fstatSync } = process.getBuiltinModule("node:fs");
import type { Message } from "../core/message.js";
import { withStreams, type InputStreams } from "../core/read.js";
import type { TransportName } from "../core/transport.js";
import type { Rewrite } from "../compose/index.js";
import type { EmbeddedStylesheet } from "../compose/styles.js";
import { buildMessage, type BuildOptions, type MessageFlags } from "./build.js";
import type { StdinDecision } from "./stdin-body.js";

/** What composing the HTML did: images that became parts, stylesheets that became <style> blocks. */
export interface Inlined {
  rewrites: Rewrite[];
  sizes: Map<string, { type: string; size: number }>;
  stylesheets: EmbeddedStylesheet[];
}

export interface Composed {
  message: Message;
  stdinBody: StdinDecision | undefined;
  inlined: Inlined | undefined;
  /** Ends the watch on a stdin that is not read: called when the command ends. */
  stopWatching: () => void;
}

export interface ComposeOptions {
  transport: TransportName | "auto";
  /** Stdin already carries the API key (--api-key-stdin). */
  stdinTaken: boolean;
  defaultFrom: string | undefined;
  /** Said as found: a warning about the message or about stdin. */
  warn(text: string): void;
  trace: ((line: string) => void) | undefined;
  /** Whether a body slow to arrive on stdin is said (not under -q). */
  sayStdinWait: boolean;
}

/** Takes what composing the HTML did: its warnings said, its inline parts kept and traced. */
function inlineReporter(
  opts: ComposeOptions,
  keep: (inlined: Inlined) => void,
): NonNullable<BuildOptions["onCompose"]> {
  const { trace } = opts;
  return ({ rewrites, images, stylesheets, remoteStylesheets, warnings }) => {
    for (const w of warnings) opts.warn(w);
    keep({
      rewrites,
      sizes: new Map(images.map((i) => [i.cid, { type: i.contentType, size: i.data.length }])),
      stylesheets,
    });
    for (const s of stylesheets)
      trace?.(`* stylesheet ${s.ref}${s.importedBy ? ` (@import in ${s.importedBy})` : ""} -> <style> (${s.path})`);
    for (const r of remoteStylesheets)
      trace?.(`* stylesheet ${r} left as a link: mail clients do not load linked stylesheets`);
    for (const r of rewrites) trace?.(`* inline image ${r.ref} -> cid:${r.cid} (${r.path})`);
  };
}

export async function composeMessage(
  flags: MessageFlags,
  streams: InputStreams,
  opts: ComposeOptions,
): Promise<Composed> {
  const { trace } = opts;
  let stopWatching = () => {};
  let stdinBody: StdinDecision | undefined;
  let inlined: Inlined | undefined;
  let message: Message;
  try {
    message = await buildMessage(
      flags,
      withStreams<Omit<BuildOptions, keyof InputStreams>>(
        {
          transport: opts.transport,
          onCompose: inlineReporter(opts, (i) => (inlined = i)),
          stdinTaken: opts.stdinTaken,
          defaultFrom: opts.defaultFrom,
          onStdinBody: (d) => {
            stdinBody = d;
            const other = d.type === "html" ? "text" : "html";
            trace?.(
              `* the body piped on stdin is sent as ${d.type === "html" ? "HTML" : "plain text"}: ${d.reason} (--stdin-type ${other} to change that)`,
            );
          },
          onStdinUnused: (bodyFlag) => {
            stopWatching = watchIgnoredStdin(streams.stdin, () =>
              opts.warn(
                `data on stdin is not read: the body comes from ${bodyFlag}${bodyFlag === "--eml" ? "" : " (to send what is piped, use --text-file - or --html-file -, or leave out the body flag)"}`,
              ),
            );
          },
          ...(opts.sayStdinWait
            ? {
                onStdinWait: () =>
                  opts.warn(
                    "waiting for the body on stdin (no --html, --text or body file was given); end it with Ctrl-D, or give a body flag, or run with </dev/null",
                  ),
              }
            : {}),
        },
        streams,
      ),
    );
  } catch (e) {
    // A watcher started for data that is not read ends with the command, also when it fails.
    stopWatching();
    throw e;
  }
  return { message, stdinBody, inlined, stopWatching };
}

/**
 * Data piped to a command whose body came from a flag is probably a mistake
 * (`df -h | mailsend send --text "disk"`), so it is said. Stdin is read in
 * the background and thrown away, never waited for: a terminal is not read
 * at all, an idle pipe costs nothing, and stop() lets the process exit.
 */
function watchIgnoredStdin(stdin: InputStreams["stdin"], onData: () => void): () => void {
  // A regular file says by its size whether it holds anything, at once: no race with a fast send,
  // and nothing read from it (a `while read ...; do mailsend send ...; done < list` keeps its
  // place in the file, as it does with /dev/null). Pipes and devices are watched.
  const fd = (stdin as { fd?: unknown }).fd;
  if (typeof fd === "number") {
    try {
      const st = fstatSync(fd);
      if (st.isFile()) {
        if (st.size > 0) onData();
        return () => {};
      }
    } catch {}
  }
  let told = false;
  const onChunk = () => {
    if (!told) onData();
    told = true;
  };
  const onError = () => {};
  stdin.on("data", onChunk);
  stdin.on("error", onError);
  return () => {
    stdin.off("data", onChunk);
    stdin.pause();
    (stdin as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  };
}
