import { MAX_INLINE_BYTES, readImage } from "./images.js";

/**
 * Image files already read, by their real path: a batch reads each once for
 * all its rows. Light to import (no HTML parser), so a batch can make one
 * before it knows whether any row has HTML.
 */
export class ImageCache {
  readonly #files = new Map<string, Promise<{ data: Buffer; contentType: string }>>();

  get(ref: string, path: string): Promise<{ data: Buffer; contentType: string }> {
    let p = this.#files.get(path);
    if (!p) {
      // Read with the whole budget: the per-message total is checked by each message.
      p = readImage(ref, path, MAX_INLINE_BYTES);
      this.#files.set(path, p);
      p.catch(() => this.#files.delete(path));
    }
    return p;
  }
}
