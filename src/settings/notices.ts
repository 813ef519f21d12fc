/**
 * The outbox's notices: whether a message it gives up (or still retries after a while) is
 * reported, to whom, and from which address. Read from the environment with the message's
 * profile under it, when the runner needs them.
 */
import { parseMailbox1, type Mailbox } from "../core/address.js";
import { durationMs } from "../core/duration.js";
import type { Env } from "../core/env.js";
import { MailsendError } from "../core/errors.js";
import { settingName, type Setting } from "../core/setting-names.js";

/** on: the sender (and the postmaster, when set); postmaster: only the postmaster; off: none. */
export type NoticeMode = "on" | "off" | "postmaster";

export interface NoticeSettings {
  mode: NoticeMode;
  /** A message still queued this long gets one "still trying" warning; 0: never. */
  warnAfterMs: number;
  postmaster?: Mailbox;
  /** MAILSEND_FROM (or the profile's from): the address notices are sent from, before the original's own. */
  defaultFrom?: Mailbox;
}

export const DEFAULT_WARN_AFTER_MS = 4 * 3600_000;

function bad(setting: Setting, message: string): MailsendError {
  return new MailsendError("config_invalid", `${settingName(setting, "sendmail")} ${message}`, { setting });
}

function modeOf(raw: string | undefined): NoticeMode {
  const v = (raw ?? "").trim().toLowerCase();
  if (v === "" || v === "on" || v === "1" || v === "yes" || v === "true") return "on";
  if (v === "off" || v === "0" || v === "no" || v === "false") return "off";
  if (v === "postmaster") return "postmaster";
  throw bad("notices", `must be on, off or postmaster, got ${JSON.stringify(raw)}`);
}

function mailbox(setting: Setting, raw: string | undefined): Mailbox | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  try {
    return parseMailbox1(raw, settingName(setting, "sendmail"));
  } catch (e) {
    throw bad(setting, `must be one address: ${(e as Error).message}`);
  }
}

/** Throws a config_invalid MailsendError naming the variable for a value that is not one. */
export function noticeSettings(env: Env): NoticeSettings {
  const mode = modeOf(env.MAILSEND_NOTICES);
  const rawWarn = env.MAILSEND_QUEUE_WARN_AFTER;
  const warnAfterMs = rawWarn === undefined || rawWarn.trim() === "" ? DEFAULT_WARN_AFTER_MS : durationMs(rawWarn);
  if (warnAfterMs === undefined)
    throw bad("queueWarnAfter", `must be a duration such as 4h, 30m or 0 (off), got ${JSON.stringify(rawWarn)}`);
  const postmaster = mailbox("postmaster", env.MAILSEND_POSTMASTER);
  if (mode === "postmaster" && !postmaster)
    throw bad("notices", "is postmaster, but MAILSEND_POSTMASTER (or the profile's postmaster) is not set");
  let defaultFrom: Mailbox | undefined;
  try {
    defaultFrom = env.MAILSEND_FROM ? parseMailbox1(env.MAILSEND_FROM, "MAILSEND_FROM") : undefined;
  } catch {
    // A bad default sender is reported where it is used as one; a notice goes from another address.
  }
  return { mode, warnAfterMs, ...(postmaster ? { postmaster } : {}), ...(defaultFrom ? { defaultFrom } : {}) };
}
