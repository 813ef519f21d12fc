/** Environment variables as the process has them, or as a caller (the library's options.env, a test) passes them. */
export type Env = Record<string, string | undefined>;
