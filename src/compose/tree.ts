/**
 * The MIME tree of a built message, for --dry-run: each part's type, size,
 * Content-ID and file name, read back from the bytes that would be sent (so
 * it shows what the composer really made, also for an .eml).
 */
import { formatSize } from "../core/size.js";

export interface MimePart {
  type: string;
  /** Bytes of the body after the transfer encoding is undone (base64 counted exactly, others as they are). */
  size: number;
  cid?: string;
  disposition?: string;
  filename?: string;
  parts?: MimePart[];
}

function headerBlock(raw: Buffer): { headers: Map<string, string>; body: Buffer } {
  let end = raw.indexOf("\r\n\r\n");
  let skip = 4;
  const lf = raw.indexOf("\n\n");
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    skip = 2;
  }
  const head = (end < 0 ? raw : raw.subarray(0, end)).toString("latin1").replace(/\r?\n[ \t]+/g, " ");
  const headers = new Map<string, string>();
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0) {
      const k = line.slice(0, colon).trim().toLowerCase();
      if (!headers.has(k)) headers.set(k, line.slice(colon + 1).trim());
    }
  }
  return { headers, body: end < 0 ? Buffer.alloc(0) : raw.subarray(end + skip) };
}

function param(value: string, name: string): string | undefined {
  const m = new RegExp(`;\\s*${name}\\*?=\\s*(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]+))`, "i").exec(value);
  return m ? (m[1] ?? m[2]) : undefined;
}

function splitParts(body: Buffer, boundary: string): Buffer[] {
  const text = body.toString("latin1");
  const delim = `--${boundary}`;
  const parts: Buffer[] = [];
  let at = text.indexOf(delim);
  // Bounded: each turn moves past one delimiter.
  while (at >= 0) {
    const lineEnd = text.indexOf("\n", at);
    if (lineEnd < 0 || text.startsWith(`${delim}--`, at)) break;
    const next = text.indexOf(`\n${delim}`, lineEnd);
    const stop = next < 0 ? text.length : next;
    const chunk = text.slice(lineEnd + 1, stop).replace(/\r$/, "");
    parts.push(Buffer.from(chunk, "latin1"));
    if (next < 0) break;
    at = next + 1;
  }
  return parts;
}

export function mimeTree(raw: Buffer, depth = 0): MimePart {
  const { headers, body } = headerBlock(raw);
  const ctype = headers.get("content-type") ?? "text/plain";
  const type = ctype.split(";")[0]!.trim().toLowerCase();
  const node: MimePart = { type, size: 0 };
  const cid = headers.get("content-id");
  if (cid) node.cid = cid.replace(/^<|>$/g, "");
  const disp = headers.get("content-disposition");
  if (disp) node.disposition = disp.split(";")[0]!.trim().toLowerCase();
  const filename = (disp && param(disp, "filename")) ?? param(ctype, "name");
  if (filename) node.filename = filename;
  const boundary = param(ctype, "boundary");
  if (type.startsWith("multipart/") && boundary && depth < 20) {
    node.parts = splitParts(body, boundary).map((p) => mimeTree(p, depth + 1));
    node.size = node.parts.reduce((n, p) => n + p.size, 0);
    return node;
  }
  if ((headers.get("content-transfer-encoding") ?? "").toLowerCase() === "base64") {
    const b64 = body.toString("latin1").replace(/[^A-Za-z0-9+/=]/g, "");
    node.size = Math.floor((b64.replace(/=+$/, "").length * 3) / 4);
  } else node.size = body.length;
  return node;
}

/** The tree as indented lines, e.g. "  image/png  73 B  cid:a.png.3fd6@mailsend  inline a.png". */
export function treeLines(node: MimePart, indent = 0): string[] {
  const bits = [`${"  ".repeat(indent)}${node.type}`];
  if (!node.parts) bits.push(formatSize(node.size));
  if (node.cid) bits.push(`cid:${node.cid}`);
  if (node.disposition || node.filename) bits.push([node.disposition, node.filename].filter(Boolean).join(" "));
  return [bits.join("  "), ...(node.parts ?? []).flatMap((p) => treeLines(p, indent + 1))];
}
