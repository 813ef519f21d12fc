// A built-in by getBuiltinModule, not an ES import: Node would build the whole module's namespace.
const { existsSync } = process.getBuiltinModule("node:fs");
import { basename, dirname } from "node:path";
import { parseAddressList, parseAddressValues, parseMailbox1, type Mailbox } from "../core/address.js";
import { MailsendError } from "../core/errors.js";
import { checkHeader, checkSingleLine, parseHeaderFlag, type HeaderList } from "../core/headers.js";
import type { Attachment, Message } from "../core/message.js";
import type { TransportName } from "../core/transport.js";
import { isUtf8 } from "node:buffer";
import { declaresLegacyCharset, htmlText } from "./html-charset.js";
import type { SendRequestFile } from "./json.js";
import type { ImageCache, Rewrite } from "../compose/index.js";
import type { InlineImage } from "../compose/images.js";
import type { EmbeddedStylesheet } from "../compose/styles.js";
import { readSource, readStdin, regularFileSize, shownPath, utf8, type InputStreams } from "../core/read.js";
import { checkBodyBytes, classifyStdin, pipedOrFile, type StdinDecision, type StdinType } from "./stdin-body.js";
// node:crypto only when a key is made: it is slow to load, and a command that sends nothing needs none.
const randomUuid = () => process.getBuiltinModule("node:crypto").randomUUID();

/** The message-shaping options of `mailsend send`, as plain values. */
export interface MessageFlags {
  from?: string;
  to?: string[];
  cc?: string[];
  bcc?: string[];
  subject?: string;
  html?: string;
  htmlFile?: string;
  text?: string;
  textFile?: string;
  /** Markdown: rendered to the HTML body, and itself the text body. */
  markdownFile?: string;
  /** Keep raw HTML in the Markdown instead of escaping it. */
  allowHtml?: boolean;
  name?: string;
  replyTo?: string;
  attach?: string[];
  header?: string[];
  jsonFile?: string;
  eml?: string;
  idempotencyKey?: string;
  /** How a body piped on stdin without a body flag is read; by default by the rule of stdin-body.ts. */
  stdinType?: StdinType;
  /** Where the HTML's relative image references resolve (default: the HTML file's directory, else the current one). */
  baseDir?: string;
  /** False with --no-embed: local image references are left as written. */
  embed?: boolean;
  /** --inline path[#cid]: inline image parts added by hand. */
  inline?: string[];
  /** --inline-css: <style> rules onto the elements (always for --markdown-file). */
  inlineCss?: boolean;
}

export interface BuildOptions extends InputStreams {
  /** "auto": the transport is chosen from the message afterwards (transports/choose.ts). */
  transport: TransportName | "auto";
  /** Stdin already carries the API key (--api-key-stdin). */
  stdinTaken?: boolean;
  /** The sender when neither a flag nor a JSON request gives one (MAILSEND_FROM, or the profile's from). */
  defaultFrom?: string | undefined;
  /**
   * Called once when the body is read from stdin because no body flag was
   * given, and nothing has arrived on it for a while: an open pipe that never
   * ends would otherwise leave the user waiting in silence.
   */
  onStdinWait?: () => void;
  /** Told how a body piped on stdin was read (html or text) and why. */
  onStdinBody?: (decision: StdinDecision) => void;
  /** Told which image references of the HTML became which inline parts (--dry-run, -v). */
  onCompose?: (composed: {
    rewrites: Rewrite[];
    images: InlineImage[];
    stylesheets: EmbeddedStylesheet[];
    remoteStylesheets: string[];
    warnings: string[];
  }) => void;
  /** A batch shares one, so each image file is read once for all its rows. */
  imageCache?: ImageCache;
  /**
   * Called when stdin is free (not a terminal, not the key) but the body came
   * from a flag, which is named: the CLI warns if data arrives on it anyway.
   */
  onStdinUnused?: (bodyFlag: string) => void;
}

/** How long an implicit stdin body may stay silent before onStdinWait is called. */
const STDIN_NOTICE_MS = 3000;

const IDEMPOTENCY_KEY = /^[\x21-\x7E]{1,255}$/;

function usage(message: string, hint?: string): MailsendError {
  return new MailsendError("usage", message, hint ? { hint } : {});
}

function checkStdinUse(flags: MessageFlags, stdinTaken: boolean): void {
  const users = [
    ...(stdinTaken ? ["--api-key-stdin"] : []),
    ...(["htmlFile", "textFile", "markdownFile", "jsonFile", "eml"] as const)
      .filter((k) => flags[k] === "-")
      .map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} -`),
  ];
  if (users.length > 1) throw usage(`only one input can come from stdin, but ${users.join(" and ")} both ask for it`);
}

/**
 * `--attach path#name` renames. A path that exists as written wins, so a file
 * whose name contains "#" can still be attached.
 */
function splitAttachSpec(spec: string): { path: string; filename: string } {
  const hash = spec.lastIndexOf("#");
  if (hash > 0 && !existsSync(spec)) {
    const path = spec.slice(0, hash);
    const filename = spec.slice(hash + 1);
    // The file is there: what is wrong is the name after "#", said as such (not "not found").
    if ((filename === "" || /[/\\]/.test(filename)) && existsSync(path)) {
      throw usage(
        filename === ""
          ? `--attach ${spec}: no file name after "#" (path#name attaches path under that name)`
          : `--attach ${spec}: the name after "#" must be a file name, without "/" or "\\"`,
      );
    }
    if (filename !== "" && !/[/\\]/.test(filename)) return { path, filename };
  }
  return { path: spec, filename: basename(spec) };
}

async function fileAttachment(spec: string): Promise<Attachment> {
  const { path, filename } = splitAttachSpec(spec);
  checkSingleLine(filename, "attachment file name");
  const size = await regularFileSize(path, "attachment");
  return { filename, source: { kind: "file", path, size } };
}

function mergeHeaders(base: HeaderList, extra: HeaderList): HeaderList {
  const overridden = new Set(extra.map(([n]) => n.toLowerCase()));
  return [...base.filter(([n]) => !overridden.has(n.toLowerCase())), ...extra];
}

async function bodyFrom(
  value: string | undefined,
  file: string | undefined,
  flag: string,
  io: InputStreams,
): Promise<string | undefined> {
  if (value !== undefined && file !== undefined) throw usage(`give --${flag} or --${flag}-file, not both`);
  if (value !== undefined) return value;
  if (file === undefined) return undefined;
  const buf = await readSource(file, `${flag} body file`, io);
  checkBodyBytes(buf, file === "-" ? "stdin" : shownPath(file), file === "-" && pipedOrFile(io.stdin));
  return flag === "html" ? htmlText(buf, file === "-" ? "stdin" : file) : utf8(buf, file === "-" ? "stdin" : file);
}

const MESSAGE_FLAGS = [
  "from",
  "to",
  "cc",
  "bcc",
  "subject",
  "html",
  "htmlFile",
  "text",
  "textFile",
  "markdownFile",
  "name",
  "replyTo",
  "attach",
  "header",
  "jsonFile",
] as const;

const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** --markdown-file makes both bodies: the HTML from the rendering, the text from the source. */
async function markdownBody(
  flags: MessageFlags,
  io: InputStreams,
): Promise<{ html: string; text: string } | undefined> {
  if (flags.markdownFile === undefined) return undefined;
  const clash = (["html", "htmlFile", "text", "textFile"] as const).filter((k) => flags[k] !== undefined);
  if (clash.length > 0) {
    throw usage(
      `--markdown-file makes the HTML body and the text body; it cannot be combined with ${clash.map(flagName).join(", ")}`,
      "Give the body once: as Markdown, or as --html/--text.",
    );
  }
  const { renderMarkdown, stripFrontMatter } = await import("./markdown.js");
  const source = stripFrontMatter(
    utf8(
      await readSource(flags.markdownFile, "Markdown file", io),
      flags.markdownFile === "-" ? "stdin" : flags.markdownFile,
    ),
  );
  return { html: await renderMarkdown(source, { allowHtml: flags.allowHtml ?? false }), text: source };
}

/** --eml: the message as it is, with no flag that would change it. */
async function emlMessage(eml: string, flags: MessageFlags, opts: BuildOptions): Promise<Message> {
  const clash = MESSAGE_FLAGS.filter((k) => {
    const v = flags[k];
    return Array.isArray(v) ? v.length > 0 : v !== undefined;
  });
  if (clash.length > 0) {
    throw usage(
      `--eml sends the message as it is; it cannot be combined with ${clash.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(", ")}`,
      "Edit the .eml file instead, or build the message from flags.",
    );
  }
  if (flags.stdinType !== undefined)
    throw usage("--stdin-type applies only to a body piped on stdin without a body flag", "Leave out --stdin-type.");
  if (!stdinUsed(flags, opts) && mayArriveOnStdin(opts)) opts.onStdinUnused?.("--eml");
  const raw = await readSource(eml, "EML file", opts);
  // The .eml reader only for --eml: other sends never load it.
  const { messageFromEml } = await import("../sendmail/eml.js");
  const message = await messageFromEml(raw, eml === "-" ? "stdin" : eml, flags.idempotencyKey);
  if (opts.transport === "rest") checkRestFit(message);
  return message;
}

/** A body piped on stdin with no body flag: HTML or text, as --stdin-type or its content says. */
async function stdinBody(flags: MessageFlags, opts: BuildOptions): Promise<{ html?: string; text?: string }> {
  const raw = await readStdinNoticing(opts, STDIN_NOTICE_MS);
  checkBodyBytes(raw, "stdin", pipedOrFile(opts.stdin));
  if (raw.length === 0) return {};
  // HTML in a charset it declares is read by it (a legacy report piped in); anything else must be UTF-8.
  const piped = flags.stdinType !== "text" && declaresLegacyCharset(raw) ? htmlText(raw, "stdin") : utf8(raw, "stdin");
  const decision: StdinDecision = flags.stdinType
    ? { type: flags.stdinType, reason: `--stdin-type ${flags.stdinType}` }
    : classifyStdin(piped);
  opts.onStdinBody?.(decision);
  // Only an HTML body's own declaration is made to say utf-8 (text that quotes a meta is left as written).
  return decision.type === "html" ? { html: isUtf8(raw) ? htmlText(raw, "stdin") : piped } : { text: piped };
}

/** The HTML and text bodies: from Markdown, the body flags, the JSON file, or stdin. */
async function bodies(flags: MessageFlags, opts: BuildOptions, file: SendRequestFile) {
  const markdown = await markdownBody(flags, opts);
  let html = markdown?.html ?? (await bodyFrom(flags.html, flags.htmlFile, "html", opts)) ?? file.html;
  let text = markdown?.text ?? (await bodyFrom(flags.text, flags.textFile, "text", opts));
  const stdinFree = !opts.stdinTaken && flags.jsonFile !== "-";
  if (html === undefined && text === undefined && stdinFree && !opts.stdin.isTTY) {
    ({ html, text } = await stdinBody(flags, opts));
  } else {
    if (flags.stdinType !== undefined) {
      throw usage(
        "--stdin-type applies only to a body piped on stdin without a body flag",
        "Leave out --stdin-type, or the body flag.",
      );
    }
    const from = bodyFlagGiven(
      flags,
      html !== undefined && markdown === undefined && flags.html === undefined && flags.htmlFile === undefined,
    );
    if (!stdinUsed(flags, opts) && from !== undefined && mayArriveOnStdin(opts)) opts.onStdinUnused?.(from);
  }
  return { html, text, markdown: markdown !== undefined };
}

/** The HTML with its --inline images (and CSS inlined), and the parts those images become. */
async function withInlineParts(
  html: string | undefined,
  flags: MessageFlags,
  opts: BuildOptions,
): Promise<{ html: string | undefined; inlineParts: Attachment[] }> {
  if (html !== undefined) {
    const composed = await composeBody(html, flags, opts);
    return composed ? { html: composed.html, inlineParts: composed.parts } : { html, inlineParts: [] };
  }
  if ((flags.inline ?? []).length > 0) {
    throw usage(
      "--inline adds an image to an HTML body, but the message has none",
      "Give the body with --html-file (or --html, --markdown-file).",
    );
  }
  return { html, inlineParts: [] };
}

/** The JSON send request of --json-file, if one is given. */
async function jsonRequest(flags: MessageFlags, opts: BuildOptions): Promise<SendRequestFile> {
  if (!flags.jsonFile) return {};
  // zod is loaded only when a JSON send request is given: it is a third of start-up otherwise.
  const { parseSendRequestFile } = await import("./json.js");
  return parseSendRequestFile(
    await readSource(flags.jsonFile, "JSON file", opts),
    flags.jsonFile === "-" ? "stdin" : flags.jsonFile,
  );
}

/** A usage error naming every part a message lacks, from whichever source. */
function requireParts(
  fromText: string | undefined,
  toValues: readonly string[],
  subject: string | undefined,
  hasBody: boolean,
): void {
  const missing = [
    fromText === undefined && "--from",
    toValues.length === 0 && "--to",
    subject === undefined && "--subject",
    !hasBody && "a body (--html, --html-file, --text, --text-file, --markdown-file, or a body piped on stdin)",
  ].filter(Boolean);
  if (missing.length > 0) {
    throw usage(`missing ${missing.join(", ")}`, "See mailsend send --help for examples.");
  }
}

/** The attachments in order: the JSON request's, then --attach files, then the HTML's inline parts. */
async function allAttachments(
  file: SendRequestFile,
  flags: MessageFlags,
  inlineParts: Attachment[],
): Promise<Attachment[]> {
  const attachments: Attachment[] = (file.attachments ?? []).map((a) => ({
    filename: a.filename,
    source: { kind: "bytes", data: Buffer.from(a.content, "base64") },
  }));
  for (const spec of flags.attach ?? []) attachments.push(await fileAttachment(spec));
  attachments.push(...inlineParts);
  return attachments;
}

/** Build and validate the message from flags, a JSON send request, an .eml, or stdin. */
export async function buildMessage(flags: MessageFlags, opts: BuildOptions): Promise<Message> {
  checkStdinUse(flags, opts.stdinTaken ?? false);
  if (flags.allowHtml && flags.markdownFile === undefined) throw usage("--allow-html applies only to --markdown-file");
  if (flags.idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(flags.idempotencyKey)) {
    throw usage("--idempotency-key must be 1 to 255 printable ASCII characters without spaces");
  }
  if (flags.eml !== undefined) return emlMessage(flags.eml, flags, opts);

  const file = await jsonRequest(flags, opts);
  const body = await bodies(flags, opts, file);
  const { html, inlineParts } = await withInlineParts(body.html, flags, opts);
  const { text } = body;

  if (flags.from === undefined && file.from === undefined && opts.defaultFrom !== undefined) {
    // Checked here so that a bad MAILSEND_FROM is named as such, not as --from.
    parseMailbox1(opts.defaultFrom, "MAILSEND_FROM");
  }
  const fromText = flags.from ?? file.from ?? opts.defaultFrom;
  const toValues = flags.to?.length ? flags.to : file.to !== undefined ? [file.to] : [];
  const subject = flags.subject ?? file.subject;
  requireParts(fromText, toValues, subject, html !== undefined || text !== undefined);
  const attachments = await allAttachments(file, flags, inlineParts);
  const fromBox = parseMailbox1(fromText!, "--from");
  return assembleMessage(
    {
      from: fromText!,
      // A --from flag replaces the file's sender, display name included; --name beats both.
      name: flags.name ?? (flags.from !== undefined ? fromBox.name : undefined) ?? file.name,
      to: toValues,
      cc: flags.cc ?? [],
      bcc: flags.bcc ?? [],
      subject: subject!,
      ...(html !== undefined ? { html } : {}),
      ...(text !== undefined ? { text } : {}),
      ...((flags.replyTo ?? file.reply_to) ? { replyTo: flags.replyTo ?? file.reply_to } : {}),
      headers: mergeHeaders(Object.entries(file.headers ?? {}), (flags.header ?? []).map(parseHeaderFlag)),
      attachments,
      ...(flags.idempotencyKey ? { idempotencyKey: flags.idempotencyKey } : {}),
      ...(body.markdown ? { textIsPlainHtml: true } : {}),
    },
    opts.transport,
  );
}

/** A message's parts as text, before validation: what send's flags and a batch row both come down to. */
export interface MessageParts {
  from: string;
  /** Overrides the display name in `from`. */
  name?: string | undefined;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  html?: string;
  text?: string;
  replyTo?: string | undefined;
  headers: HeaderList;
  attachments: Attachment[];
  idempotencyKey?: string;
  /** The text is the plain version of the HTML (a Markdown source): see Message. */
  textIsPlainHtml?: boolean;
}

/** Validate the parts and make the Message: one path for every way a message is given. */
export function assembleMessage(
  p: MessageParts,
  transport: TransportName | "auto",
  field: (flag: string) => string = (f) => f,
): Message {
  if (!p.subject) throw usage(`${field("--subject")} must not be empty`);
  if (!p.html && !p.text) throw usage("the body is empty");
  const fromBox = parseMailbox1(p.from, field("--from"));
  const name = p.name ?? fromBox.name;
  if (name !== undefined) checkSingleLine(name, field("--name"));
  checkSingleLine(p.subject, field("--subject"));
  const from: Mailbox = name ? { name, address: fromBox.address } : { address: fromBox.address };
  // A trailing comma (`--to "a@x.com,"`, a list joined in a script) names nobody more; an empty
  // element before another (`--to "$A, $B"` with A unset) is refused: a recipient may be missing.
  const to = parseAddressValues(p.to, field("--to"), "trailing");
  const cc = parseAddressValues(p.cc, field("--cc"), "trailing");
  const bcc = parseAddressValues(p.bcc, field("--bcc"), "trailing");
  // Only empty groups (undisclosed-recipients:;): given, but naming nobody.
  if (to.length + cc.length + bcc.length === 0 && p.to.length + p.cc.length + p.bcc.length > 0) {
    throw new MailsendError(
      "invalid_address",
      `${field("--to")} names no recipient: ${JSON.stringify(p.to.join(", "))} is an empty group`,
      {
        hint: "An empty group (undisclosed-recipients:;) is for a message whose recipients are all Bcc: give them with --bcc.",
      },
    );
  }
  const replyTo = p.replyTo === undefined ? undefined : parseMailbox1(p.replyTo, field("--reply-to"));
  for (const [n, v] of p.headers) checkHeader(n, v);
  if (p.idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(p.idempotencyKey)) {
    throw usage(`${field("--idempotency-key")} must be 1 to 255 printable ASCII characters without spaces`);
  }
  const message: Message = {
    from,
    to,
    cc,
    bcc,
    ...(replyTo ? { replyTo } : {}),
    subject: p.subject,
    ...(p.html ? { html: p.html } : {}),
    ...(p.text !== undefined && p.text !== "" ? { text: p.text } : {}),
    ...(p.textIsPlainHtml && p.html && p.text ? { textIsPlainHtml: true } : {}),
    attachments: p.attachments,
    headers: p.headers,
    idempotencyKey: p.idempotencyKey ?? randomUuid(),
  };
  if (transport === "rest") checkRestFit(message);
  return message;
}

/** What the REST send request cannot express is refused, never dropped. */
export function checkRestFit(m: Message): void {
  if (m.cc.length > 0 || m.bcc.length > 0) {
    throw usage(
      "cc and bcc are not part of the REST send request",
      "Use --transport smtp to send with Cc or Bcc, or put everyone in --to.",
    );
  }
  const inline = m.attachments.filter((a) => a.cid !== undefined);
  if (inline.length > 0) {
    throw usage(
      `the HTML has ${inline.length} inline image${inline.length === 1 ? "" : "s"} (${inline.map((a) => a.filename).join(", ")}), which the REST send request cannot carry`,
      "Use --transport smtp (or auto, which picks SMTP for this), or --no-embed to send the image references as they are written.",
    );
  }
  if (!m.subject) throw new MailsendError("invalid_message", "the REST send request needs a subject");
  if (m.html === undefined && m.text === undefined)
    throw new MailsendError("invalid_message", "the message has no body");
  const seen = new Set<string>();
  for (const [n] of m.headers) {
    const k = n.toLowerCase();
    if (seen.has(k)) {
      throw new MailsendError(
        "invalid_header",
        `header ${n} is given more than once; the REST send request holds one value per header`,
      );
    }
    seen.add(k);
  }
  if (m.replyTo === undefined) return;
  // reply_to over REST is a single mailbox; parse the formatted form again to be sure it survives.
  parseAddressList(m.replyTo.address, "--reply-to");
}

/** The flag the body came from (the JSON request only when its html was the body). */
function bodyFlagGiven(flags: MessageFlags, fromJson: boolean): string | undefined {
  const found = (["markdownFile", "html", "htmlFile", "text", "textFile"] as const).find((k) => flags[k] !== undefined);
  return found !== undefined ? flagName(found) : fromJson ? "--json-file" : undefined;
}

/**
 * Whether data piped to stdin could be there unread: not on a terminal, and not on /dev/null
 * (told without making the process's stdin stream when the caller can, as the CLI does).
 */
function mayArriveOnStdin(opts: BuildOptions): boolean {
  if (opts.stdinIsNull?.()) return false;
  return !opts.stdin.isTTY;
}

/** Whether something else reads stdin: the key, or a "-" input. */
function stdinUsed(flags: MessageFlags, opts: BuildOptions): boolean {
  return (
    (opts.stdinTaken ?? false) ||
    (["htmlFile", "textFile", "markdownFile", "jsonFile", "eml"] as const).some((k) => flags[k] === "-")
  );
}

/** Read stdin whole; if neither data nor its end arrives within afterMs, say so once. */
async function readStdinNoticing(opts: BuildOptions, afterMs: number): Promise<Buffer> {
  if (!opts.onStdinWait) return readStdin(opts.stdin);
  const notice = opts.onStdinWait;
  const chunks: Buffer[] = [];
  let timer: NodeJS.Timeout | undefined = setTimeout(notice, afterMs);
  try {
    for await (const chunk of opts.stdin) {
      clearTimeout(timer);
      timer = undefined;
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
    }
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks);
}

/** A cheap look before loading the HTML parser: without these, no image or stylesheet is referenced. */
const MAY_REFERENCE = /\b(?:src|background)\s*=|url\(|<link\b|@import/i;

/** How an HTML body is composed: send's flags, or a batch's for every row. */
export interface BodyCompose {
  /** The only directory local images may come from. */
  baseDir: string;
  /** Where relative references resolve (the HTML file's directory); default baseDir. */
  fromDir?: string;
  embed: boolean;
  inline?: readonly string[];
  inlineCss: boolean;
  cache?: ImageCache;
}

/**
 * Inline CSS, embed local images, add --inline parts (src/compose). Loaded
 * only when the HTML may need it; undefined when nothing was to be done.
 */
export async function composeHtmlBody(
  html: string,
  c: BodyCompose,
): Promise<
  | {
      html: string;
      parts: Attachment[];
      rewrites: Rewrite[];
      images: InlineImage[];
      stylesheets: EmbeddedStylesheet[];
      remoteStylesheets: string[];
      warnings: string[];
    }
  | undefined
> {
  const inline = c.inline ?? [];
  if (!c.inlineCss && inline.length === 0 && !(c.embed && MAY_REFERENCE.test(html))) return undefined;
  const { composeHtml, inlineAttachments } = await import("../compose/index.js");
  const composed = await composeHtml(html, {
    baseDir: c.baseDir,
    ...(c.fromDir !== undefined ? { fromDir: c.fromDir } : {}),
    embed: c.embed,
    inline,
    inlineCss: c.inlineCss,
    ...(c.cache ? { cache: c.cache } : {}),
  });
  return {
    html: composed.html,
    parts: inlineAttachments(composed.images),
    rewrites: composed.rewrites,
    images: composed.images,
    stylesheets: composed.stylesheets,
    remoteStylesheets: composed.remoteStylesheets,
    warnings: composed.warnings,
  };
}

/** The BodyCompose of `--base-dir`, `--no-embed`, `--inline`, `--inline-css` and where the HTML came from. */
export function bodyComposeOf(
  flags: Pick<
    MessageFlags,
    "baseDir" | "embed" | "inline" | "inlineCss" | "htmlFile" | "markdownFile" | "html" | "jsonFile"
  >,
): BodyCompose {
  const fromDir = htmlDirOf(flags);
  return {
    baseDir: flags.baseDir ?? fromDir ?? process.cwd(),
    ...(fromDir !== undefined || flags.baseDir !== undefined ? { fromDir: fromDir ?? flags.baseDir! } : {}),
    embed: flags.embed !== false,
    inline: flags.inline ?? [],
    inlineCss: flags.inlineCss === true || flags.markdownFile !== undefined,
  };
}

async function composeBody(
  html: string,
  flags: MessageFlags,
  opts: BuildOptions,
): Promise<{ html: string; parts: Attachment[] } | undefined> {
  const composed = await composeHtmlBody(html, {
    ...bodyComposeOf(flags),
    ...(opts.imageCache ? { cache: opts.imageCache } : {}),
  });
  if (composed) opts.onCompose?.(composed);
  return composed;
}

/**
 * The directory of the file the HTML came from: relative references resolve
 * against it, and by default images may come only from under it. HTML from
 * stdin or --html has none (then --base-dir, else the current directory).
 */
function htmlDirOf(flags: Pick<MessageFlags, "htmlFile" | "markdownFile" | "html" | "jsonFile">): string | undefined {
  const file = [flags.htmlFile, flags.markdownFile].find((f) => f !== undefined && f !== "-");
  if (file !== undefined) return dirname(file);
  if (flags.html === undefined && flags.jsonFile !== undefined && flags.jsonFile !== "-")
    return dirname(flags.jsonFile);
  return undefined;
}
