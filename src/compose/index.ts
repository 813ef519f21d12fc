/**
 * HTML to MIME: what an HTML body needs to arrive as it was written.
 *   - local stylesheets (<link rel=stylesheet>) -> <style> blocks: styles.ts
 *   - CSS inlining (--inline-css; on for --markdown-file): css.ts
 *   - local images -> inline parts (multipart/related, cid:): images.ts, refs.ts
 *   - the text/plain alternative over SMTP: text.ts
 * Each heavy library is loaded only when the body needs it.
 */
import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { MailsendError } from "../core/errors.js";
import type { Attachment, Message } from "../core/message.js";
import { shownPath } from "../core/read.js";
import { ImageCache } from "./cache.js";
import {
  contentId,
  documentBase,
  documentPath,
  MAX_INLINE_BYTES,
  resolveInside,
  splitInlineSpec,
  type InlineImage,
} from "./images.js";
import { findBaseHref, findRefAttributes, mayReferenceImages, rewriteRefs } from "./refs.js";
import { embedStylesheets, mayLinkStylesheets, type EmbeddedStylesheet } from "./styles.js";

export interface ComposeOptions {
  /** The only directory images may come from. */
  baseDir: string;
  /** Where relative references resolve (the HTML file's directory); default baseDir. */
  fromDir?: string;
  /** False with --no-embed: references are left as written. */
  embed: boolean;
  /** --inline path[#cid]: parts added by hand for HTML that already says cid:. Relative to the current directory. */
  inline: readonly string[];
  inlineCss: boolean;
  /** Shared across the rows of a batch: each image file is read once. */
  cache?: ImageCache;
}

/** One reference of the HTML and what it became. */
export interface Rewrite {
  ref: string;
  cid: string;
  path: string;
}

export interface Composed {
  html: string;
  images: InlineImage[];
  rewrites: Rewrite[];
  /** Local stylesheets now in <style> blocks. */
  stylesheets: EmbeddedStylesheet[];
  /** Stylesheet links left as written (remote): clients will not load them. */
  remoteStylesheets: string[];
  /** cid: references and --inline parts that do not meet: sent, but shown wrongly. */
  warnings: string[];
}

export { ImageCache };

const CID = /^[\x21-\x3b\x3d\x3f-\x7e]{1,200}$/;

/** The inline parts of one message, by Content-ID, and what each reference became: one image per cid, all within MAX_INLINE_BYTES. */
class InlineParts {
  readonly images = new Map<string, InlineImage>();
  readonly rewrites: Rewrite[] = [];
  #total = 0;

  /** Adds `image` (from `ref`, for messages), once per cid. */
  add(image: InlineImage, ref: string): void {
    const had = this.images.get(image.cid);
    if (had) {
      if (!had.data.equals(image.data)) {
        throw new MailsendError(
          "usage",
          `two different images would have the Content-ID ${JSON.stringify(image.cid)} (${shownPath(had.path)} and ${shownPath(image.path)})`,
          {
            hint: `Give each --inline its own cid: --inline ${ref}#another-name.`,
          },
        );
      }
      return;
    }
    this.#total += image.data.length;
    if (this.#total > MAX_INLINE_BYTES) {
      throw new MailsendError(
        "too_large",
        `the inline images of this message add up to more than ${MAX_INLINE_BYTES / 1024 / 1024} MiB (at ${JSON.stringify(ref)}); nothing was sent`,
        {
          hint: "Link large images from a web server instead, attach them with --attach, or give --no-embed.",
        },
      );
    }
    this.images.set(image.cid, image);
  }
}

/**
 * The HTML's references to local images made cid: parts. Also the references of the HTML as sent,
 * known here without parsing it again (parsing a big report again is not cheap).
 */
async function embedImages(
  html: string,
  remoteBase: boolean,
  fromDir: string,
  opts: ComposeOptions,
  parts: InlineParts,
  cache: ImageCache,
): Promise<{ html: string; sentRefs: string[] }> {
  const attrs = findRefAttributes(html);
  const byRef = new Map<string, string>();
  for (const ref of attrs.flatMap((a) => a.refs)) {
    if (byRef.has(ref)) continue;
    const path = documentPath(ref, remoteBase);
    if (path === undefined) continue;
    const real = await resolveInside(ref, path, opts.baseDir, fromDir);
    const { data, contentType } = await cache.get(ref, real);
    const cid = contentId(basename(real), data);
    parts.add({ cid, filename: basename(real), contentType, data, path: real }, ref);
    byRef.set(ref, cid);
    parts.rewrites.push({ ref, cid, path: real });
  }
  if (byRef.size > 0) html = rewriteRefs(html, attrs, (ref) => (byRef.has(ref) ? `cid:${byRef.get(ref)}` : undefined));
  return {
    html,
    sentRefs: attrs.flatMap((a) => a.refs.map((ref) => (byRef.has(ref) ? `cid:${byRef.get(ref)}` : ref))),
  };
}

/** The parts --inline path[#cid] adds by hand. */
async function addInlineSpecs(specs: readonly string[], parts: InlineParts, cache: ImageCache): Promise<void> {
  for (const spec of specs) {
    const { path, cid } = splitInlineSpec(spec, existsSync);
    if (!CID.test(cid)) {
      throw new MailsendError(
        "usage",
        `--inline ${spec}: the Content-ID ${JSON.stringify(cid)} must be printable ASCII without spaces, < or >`,
        {
          hint: 'Write --inline chart.png#chart and refer to it as <img src="cid:chart">.',
        },
      );
    }
    const real = resolve(path);
    const { data, contentType } = await cache.get(`--inline ${spec}`, real);
    parts.add({ cid, filename: basename(real), contentType, data, path: real }, spec);
    parts.rewrites.push({ ref: `--inline ${spec}`, cid, path: real });
  }
}

export async function composeHtml(input: string, opts: ComposeOptions): Promise<Composed> {
  let html = input;
  let stylesheets: EmbeddedStylesheet[] = [];
  let remoteStylesheets: string[] = [];
  // <base href> decides what the page's relative references mean, as it does in a browser.
  const base = opts.embed
    ? documentBase(html, resolve(opts.fromDir ?? opts.baseDir), findBaseHref)
    : { dir: resolve(opts.fromDir ?? opts.baseDir), remote: false };
  const fromDir = base.dir;
  // Before --inline-css, so that a linked sheet's rules are copied onto the elements too.
  if (opts.embed && mayLinkStylesheets(html))
    ({
      html,
      sheets: stylesheets,
      left: remoteStylesheets,
    } = await embedStylesheets(html, opts.baseDir, fromDir, base.remote));
  if (opts.inlineCss) html = await (await import("./css.js")).inlineCss(html);
  const parts = new InlineParts();
  const cache = opts.cache ?? new ImageCache();
  let sentRefs: string[] | undefined;
  if (opts.embed && mayReferenceImages(html))
    ({ html, sentRefs } = await embedImages(html, base.remote, fromDir, opts, parts, cache));
  await addInlineSpecs(opts.inline, parts, cache);

  const warnings = cidMismatches(html, opts.inline, parts.images, sentRefs);
  if (opts.embed) warnings.push(...leftLocal(html, base.remote));
  return {
    html,
    images: [...parts.images.values()],
    rewrites: parts.rewrites,
    stylesheets,
    remoteStylesheets,
    warnings,
  };
}

const STYLE_BLOCK = /<style\b[^>]*>([\s\S]*?)<\/style\s*>/gi;
const CSS_URL = /url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)/gi;
const SRCSET = /\ssrcset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))/gi;

/** A reference to a file on this machine: what no mail client can load. */
function isLocalRef(ref: string, remoteBase: boolean): boolean {
  if (ref === "" || ref.startsWith("#") || /^cid:/i.test(ref)) return false;
  try {
    return documentPath(ref, remoteBase) !== undefined;
  } catch {
    return true;
  }
}

/**
 * Local files the HTML still names where embedding does not reach: url() in a <style> block (a
 * linked sheet's background image) and srcset candidates. Sent as written they are broken images
 * in the mail (Apple Mail takes srcset over src): said, with what to do.
 */
function leftLocal(html: string, remoteBase: boolean): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const say = (key: string, text: string) => {
    if (seen.has(key) || out.length >= 10) return;
    seen.add(key);
    out.push(text);
  };
  if (/<style/i.test(html) && /url\(/i.test(html)) {
    for (const block of html.matchAll(STYLE_BLOCK)) {
      for (const m of (block[1] ?? "").matchAll(CSS_URL)) {
        const ref = (m[1] ?? m[2] ?? m[3] ?? "").trim();
        if (isLocalRef(ref, remoteBase))
          say(
            `url ${ref}`,
            `url(${ref}) in a <style> block names a file on this machine, which no mail client can load: --inline-css copies the rule onto the elements, where the image is embedded`,
          );
      }
    }
  }
  if (/srcset/i.test(html)) {
    for (const m of html.matchAll(SRCSET)) {
      for (const candidate of (m[1] ?? m[2] ?? m[3] ?? "").split(",")) {
        const ref = candidate.trim().split(/\s+/)[0] ?? "";
        if (isLocalRef(ref, remoteBase))
          say(
            `srcset ${ref}`,
            `srcset names ${ref}, a file on this machine that is not embedded: clients that use srcset (Apple Mail) show a broken image; give the image in src alone`,
          );
      }
    }
  }
  return out;
}

/**
 * An --inline part no cid: of the HTML shows (a typo in the name: most clients then list it as an
 * attachment), and a cid: of the HTML no part has (a broken image). Content-IDs compare as given;
 * a cid: URL's %-escapes are decoded (RFC 2392).
 */
function cidMismatches(
  html: string,
  inline: readonly string[],
  images: ReadonlyMap<string, InlineImage>,
  refs?: readonly string[],
): string[] {
  if (inline.length === 0 && !/cid:/i.test(html)) return [];
  const used = new Set<string>();
  for (const ref of refs ?? findRefAttributes(html).flatMap((a) => a.refs)) {
    if (!/^cid:/i.test(ref)) continue;
    try {
      used.add(decodeURIComponent(ref.slice(4)));
    } catch {
      used.add(ref.slice(4));
    }
  }
  const out: string[] = [];
  for (const spec of inline) {
    const { cid } = splitInlineSpec(spec, existsSync);
    if (!used.has(cid))
      out.push(
        `--inline ${spec}: the HTML has no <img src="cid:${cid}">, so no image shows this part (most clients list it as an attachment)`,
      );
  }
  for (const cid of used) {
    if (!images.has(cid))
      out.push(
        `the HTML refers to cid:${cid}, which no part of this message has: it shows as a broken image (--inline <file>#${cid} adds the part)`,
      );
  }
  return out;
}

/** Inline images as the Message's attachments with a cid (SMTP puts them in multipart/related). */
export function inlineAttachments(images: readonly InlineImage[]): Attachment[] {
  return images.map((i) => ({
    filename: i.filename,
    source: { kind: "bytes", data: i.data },
    contentType: i.contentType,
    cid: i.cid,
  }));
}

/**
 * Over SMTP, a message with only HTML gets a text/plain alternative made
 * from it (filters penalise HTML without one). A text given by the user wins;
 * a raw message is sent as it is.
 */
export async function withTextAlternative(m: Message): Promise<Message> {
  if (m.raw || m.html === undefined || m.text !== undefined) return m;
  const { textFromHtml } = await import("./text.js");
  return { ...m, text: await textFromHtml(m.html) };
}
