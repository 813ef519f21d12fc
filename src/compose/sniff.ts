/**
 * The image type of some bytes, from their first bytes (never from a file
 * name): only what mail clients show inline. SVG is left out on purpose: it
 * is a document that can carry script, and most clients block it.
 */
export function sniffImage(b: Buffer): string | undefined {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return "image/png";
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b.length >= 6) {
    const head = b.subarray(0, 6).toString("latin1");
    if (head === "GIF87a" || head === "GIF89a") return "image/gif";
  }
  if (
    b.length >= 12 &&
    b.subarray(0, 4).toString("latin1") === "RIFF" &&
    b.subarray(8, 12).toString("latin1") === "WEBP"
  )
    return "image/webp";
  if (b.length >= 26 && b[0] === 0x42 && b[1] === 0x4d && b.readUInt32LE(14) >= 12) return "image/bmp";
  if (
    b.length >= 12 &&
    b.subarray(4, 8).toString("latin1") === "ftyp" &&
    /^avi[fs]$/.test(b.subarray(8, 12).toString("latin1"))
  )
    return "image/avif";
  return undefined;
}

/** What the bytes look like, for the error when they are not an image. */
export function describeBytes(b: Buffer): string {
  if (b.length === 0) return "an empty file";
  const head = b.subarray(0, 512).toString("latin1");
  if (/^\s*(<\?xml[^>]*>\s*)?<svg[\s>]/i.test(head))
    return "an SVG document (not embedded: clients block it, and it can carry script)";
  if (head.startsWith("%PDF")) return "a PDF document";
  // eslint-disable-next-line no-control-regex
  if (!/[\x00-\x08\x0e-\x1f]/.test(head)) return "text";
  return "not an image format mail clients show (PNG, JPEG, GIF, WebP, BMP, AVIF)";
}
