/**
 * The store `mailsend inbox` reads (the data dir of --dir, MAILSEND_SANDBOX_DIR or the default) and
 * the table it prints: shared by `inbox`, `inbox show` and `inbox wait`.
 */
import { MailsendError } from "../../core/errors.js";
import { formatSize } from "../../core/size.js";
import { hasSandboxData, FileMessageStore } from "../../sandbox/store.js";
import type { StoredMessage } from "../../sandbox/types.js";
import { shellWord, type CliIO } from "../io.js";
import { sandboxDir, table } from "./sandbox.js";

function cut(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/** Where the dir came from, for the message that finds no sandbox there. */
function dirSource(flags: { dir?: string }, env: CliIO["env"]): string {
  if (flags.dir !== undefined) return "from --dir";
  if (env.MAILSEND_SANDBOX_DIR) return "from MAILSEND_SANDBOX_DIR";
  return "the default; MAILSEND_SANDBOX_DIR is not set";
}

/**
 * The store of the sandbox data dir. A dir where no sandbox ever ran is an
 * error (66), not an empty inbox: it is almost always the wrong dir, and
 * "no messages" would look like lost mail.
 */
export async function openInbox(flags: { dir?: string }, io: CliIO): Promise<FileMessageStore> {
  const dir = sandboxDir(flags, io.env);
  if (!hasSandboxData(dir)) {
    throw new MailsendError("file_not_found", `no sandbox data in ${dir} (${dirSource(flags, io.env)})`, {
      hint: `Start one with \`mailsend sandbox --dir ${shellWord(dir)}\`, or set MAILSEND_SANDBOX_DIR (or --dir) to the data dir of the sandbox you started (its banner prints the export line).`,
    });
  }
  return FileMessageStore.open(dir, { readOnly: true });
}

/** The table of `mailsend inbox` (and of what `inbox wait` found). */
export function listTable(list: StoredMessage[]): string {
  const rows = list.map((m) => [
    m.id,
    m.receivedAt.replace("T", " ").replace(/\.\d+Z$/, "Z"),
    m.channel,
    cut(m.from, 32),
    cut(m.to.join(", "), 40),
    formatSize(m.size),
    String(m.attachments.length),
    cut(m.subject, 50),
  ]);
  return table(rows, ["ID", "RECEIVED", "VIA", "FROM", "TO", "SIZE", "ATT", "SUBJECT"]);
}
