/**
 * What an outbox file must hold to be read as one: the one check every reader of a message's
 * metadata line and of a .state file goes through (store.ts). A file that fails it is damaged
 * (a disk fault, a hand copy, another program's file): listed as such beside the others and moved
 * to failed/ by the runner, never an error that hides the rest of the queue. Written by hand
 * rather than with the request schema's library: `mailq` reads every file, and this is a dozen
 * plain fields.
 */
import type { OutboxError, OutboxMeta, OutboxState } from "./types.js";

/** Why a value is not an outbox file's metadata: thrown by checkMeta, worded for "damaged (…)". */
export class NotOutboxMeta extends Error {}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === "string";
const isTime = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/** Every value of the type, so that one added there must be added here (the compiler says so). */
const SOURCES: Record<OutboxMeta["source"], true> = {
  sendmail: true,
  relay: true,
  send: true,
  run: true,
  notice: true,
};
const TRANSPORTS: Record<NonNullable<OutboxMeta["transport"]>, true> = { rest: true, smtp: true, auto: true };
const oneOf = (values: object) => (v: unknown) => typeof v === "string" && Object.hasOwn(values, v);

/** Each field: whether it must be there, and the test its value passes. */
const FIELDS: Record<keyof OutboxMeta, [required: boolean, ok: (v: unknown) => boolean, what: string]> = {
  v: [true, (v) => v === 1, "1"],
  id: [true, isStr, "a string"],
  createdAt: [true, isTime, "a time"],
  envelope: [true, (v) => isObj(v) && isStr(v.from) && Array.isArray(v.to) && v.to.every(isStr), "{from, to[]}"],
  idempotencyKey: [true, (v) => isStr(v) && v.length > 0, "a string"],
  source: [true, oneOf(SOURCES), Object.keys(SOURCES).join(", ")],
  size: [true, isTime, "a byte count"],
  profile: [false, isStr, "a string"],
  transport: [false, oneOf(TRANSPORTS), Object.keys(TRANSPORTS).join(", ")],
  subject: [false, isStr, "a string"],
  headerFrom: [false, isStr, "a string"],
  stampedMessageId: [false, (v) => v === true, "true"],
};

/** The metadata line of the file named `id`, checked; throws NotOutboxMeta saying what is wrong. */
export function checkMeta(value: unknown, id: string): OutboxMeta {
  if (!isObj(value)) throw new NotOutboxMeta("its first line is not a JSON object");
  for (const [name, [required, ok, what]] of Object.entries(FIELDS)) {
    const v = value[name];
    if (v === undefined) {
      if (required) throw new NotOutboxMeta(`its metadata has no ${name}`);
    } else if (!ok(v)) throw new NotOutboxMeta(`its metadata's ${name} is not ${what}`);
  }
  if (value.id !== id) throw new NotOutboxMeta("its metadata names another message");
  return value as unknown as OutboxMeta;
}

function checkError(v: unknown): OutboxError | undefined {
  if (!isObj(v) || !isStr(v.message)) return undefined;
  return {
    code: isStr(v.code) ? v.code : "unknown",
    message: v.message,
    exit: Number(v.exit) || 75,
    at: Number(v.at) || 0,
  };
}

/**
 * A .state file's contents, as far as they are sound: what is not reads as never tried (the
 * message is there whole, and trying it is what the state is for).
 */
export function checkState(value: unknown): OutboxState {
  const s = isObj(value) ? value : {};
  const lastError = checkError(s.lastError);
  return {
    attempts: Number(s.attempts) || 0,
    nextAttemptAt: Number(s.nextAttemptAt) || 0,
    ...(lastError ? { lastError } : {}),
    ...(isTime(s.failedAt) && s.failedAt > 0 ? { failedAt: s.failedAt } : {}),
    ...(noticesOf(s.notices) ?? {}),
  };
}

/** Which notices a message has had (failed, delayed: when each was queued); kept so none is sent twice. */
function noticesOf(value: unknown): { notices: NonNullable<OutboxState["notices"]> } | undefined {
  if (!isObj(value)) return undefined;
  const notices: NonNullable<OutboxState["notices"]> = {};
  if (isTime(value.failed)) notices.failed = value.failed;
  if (isTime(value.delayed)) notices.delayed = value.delayed;
  return Object.keys(notices).length ? { notices } : undefined;
}
