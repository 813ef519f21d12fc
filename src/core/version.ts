// Replaced at build time by esbuild's `define`; the fallback serves tests run from source.
declare const __MAILSEND_VERSION__: string | undefined;

export const VERSION: string = typeof __MAILSEND_VERSION__ === "string" ? __MAILSEND_VERSION__ : "0.0.0-dev";
export const USER_AGENT: string = `mailsend/${VERSION}`;
