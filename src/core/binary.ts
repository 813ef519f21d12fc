/** Magic numbers of the files people most often pipe by mistake when they meant to attach them. */
const MAGIC: ReadonlyArray<[string, number[]]> = [
  ["a PDF", [0x25, 0x50, 0x44, 0x46, 0x2d]],
  ["a PNG image", [0x89, 0x50, 0x4e, 0x47]],
  ["a JPEG image", [0xff, 0xd8, 0xff]],
  ["a GIF image", [0x47, 0x49, 0x46, 0x38]],
  ["a gzip file", [0x1f, 0x8b]],
  ["a zip archive (or an Office document)", [0x50, 0x4b, 0x03, 0x04]],
  ["an executable", [0x7f, 0x45, 0x4c, 0x46]],
];

/** Binary data, not a body: a known file type, or a NUL byte early on. Undefined for text. */
export function binaryKind(buf: Buffer): string | undefined {
  for (const [what, bytes] of MAGIC) if (bytes.every((b, i) => buf[i] === b)) return what;
  const nul = buf.subarray(0, 64 * 1024).indexOf(0);
  return nul >= 0 ? `binary data (a NUL byte at offset ${nul})` : undefined;
}
