/**
 * `mailsend inbox`: the messages a sandbox stored, read straight from its
 * data dir (the sandbox need not be running); `inbox wait` asks the running one.
 */
import type { Command } from "commander";
import { MailsendError } from "../../core/errors.js";
import { formatSize } from "../../core/size.js";
import { bareMessageId, isMessageId, type FileMessageStore } from "../../sandbox/store.js";
import type { StoredMessage } from "../../sandbox/types.js";
import { parseQuery } from "../../sandbox/query.js";
import { createSearcher, latest, LATEST, search, viewOf } from "../../sandbox/search.js";
import { readParts, type MessageParts } from "../../sandbox/content.js";
import { showPart, type PartFlags } from "./inbox-parts.js";
import { runInboxWait, type WaitFlags } from "./inbox-wait.js";
import { listTable, openInbox } from "./inbox-store.js";
import { colorsFor, type CliIO } from "../io.js";
import { reportError } from "../report.js";
import { shownWord } from "../../core/redact.js";
import type { CommandContext } from "../command.js";
import { examples } from "../help-examples.js";
import { addSandboxOptions, DIR_OPTION, JSON_OPTION } from "../sandbox-options.js";

interface InboxFlags extends PartFlags {
  dir?: string;
  json?: boolean;
  limit?: number;
  raw?: boolean;
  query?: string;
}

export async function runInbox(flags: InboxFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    const query = flags.query !== undefined ? parseQuery(flags.query) : undefined;
    const store = await openInbox(flags, io);
    const limit = flags.limit !== undefined ? { limit: flags.limit } : {};
    const searcher = createSearcher(store);
    const list = query ? await search(searcher, query, limit) : await store.list(limit);
    if (json) {
      io.stdout.write(`${JSON.stringify(await Promise.all(list.map((m) => viewOf(searcher, m))))}\n`);
      return 0;
    }
    if (list.length === 0) {
      io.stderr.write(
        query
          ? `no messages match ${JSON.stringify(query.source)} in ${store.paths.dir}\n`
          : `no messages in ${store.paths.dir}\n`,
      );
      return 0;
    }
    io.stdout.write(listTable(list));
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

/**
 * A sandbox id, or a Message-ID with or without its angle brackets (what
 * `mailsend send` prints for an SMTP send). Anything else cannot name a
 * message at all: a usage error, not a missing message.
 */
function checkId(id: string): void {
  const bare = bareMessageId(id);
  if (bare === "" || /[\s<>\p{Cc}]/u.test(bare)) {
    throw new MailsendError("usage", `${JSON.stringify(id)} is not a message id`, {
      hint: "Give the id `mailsend inbox` lists, or the Message-ID `mailsend send` printed (with or without the <>).",
    });
  }
}

/** By sandbox id, else by Message-ID header; when several share a Message-ID, the newest. */
async function find(
  store: FileMessageStore,
  id: string,
  io: CliIO,
  json: boolean,
): Promise<{ m: StoredMessage; raw: Buffer }> {
  let m = id === LATEST ? await latest(store) : isMessageId(id) ? await store.get(id) : undefined;
  if (!m) {
    const matches = store.findByMessageId(id);
    m = matches[0];
    if (matches.length > 1 && !json) {
      const c = colorsFor(io.stderr, io.env);
      io.stderr.write(
        c.dim(
          `${matches.length} messages have this Message-ID; showing the newest, ${m!.id} (the others: ${matches
            .slice(1)
            .map((x) => x.id)
            .join(", ")})\n`,
        ),
      );
    }
  }
  if (!m) {
    throw new MailsendError("file_not_found", `no message ${shownWord(id)} in ${store.paths.dir}`, {
      hint:
        id === LATEST
          ? "The sandbox has stored no message yet."
          : "`mailsend inbox` lists the ids; the Message-ID `mailsend send` printed works too.",
    });
  }
  const raw = await store.raw(m.id);
  if (!raw)
    throw new MailsendError(
      "file_not_found",
      `message ${m.id} is in the index of ${store.paths.dir} but its file messages/${m.id}.eml is missing`,
    );
  return { m, raw };
}

/** The headers `inbox show` prints, in this order; then the X- headers as the message has them. */
const SHOWN_HEADERS = ["from", "to", "cc", "reply-to", "subject", "date", "message-id"];

type Email = NonNullable<MessageParts["email"]>;

/** The message as --json gives it: the index's record, the headers as sent, the bodies, the links. */
function showJson(m: StoredMessage, email: Email, parts: MessageParts, io: CliIO): void {
  io.stdout.write(
    `${JSON.stringify({
      ...m,
      headers: email.headers.map((h) => ({ name: h.originalKey, value: h.value })),
      text: email.text ?? null,
      html: email.html ?? null,
      links: parts.links,
    })}\n`,
  );
}

/** The message for a person: where it came from, the headers that matter, the attachments, the body. */
async function showText(m: StoredMessage, email: Email, io: CliIO): Promise<void> {
  const { decodeWords } = await import("postal-mime");
  // RFC 2047 encoded words (=?UTF-8?B?...?=) as the text they stand for; folded lines joined.
  // A decoded control character (an escape sequence) would act on the terminal: shown as U+FFFD instead.
  const shown = (v: string) =>
    decodeWords(v.replace(/\r?\n[ \t]+/g, " ")).replace(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/g, "\ufffd");
  const fields: Array<[string, string]> = [
    ["Id", m.id],
    ["Received", `${m.receivedAt} via ${m.channel} (key ${m.keyId})`],
    ["Envelope", `${m.envelope.from} -> ${m.envelope.to.join(", ")}`],
  ];
  for (const key of SHOWN_HEADERS) {
    for (const h of email.headers) if (h.key === key) fields.push([h.originalKey, shown(h.value)]);
  }
  for (const h of email.headers) if (h.key.startsWith("x-")) fields.push([h.originalKey, shown(h.value)]);
  for (const a of m.attachments) fields.push(["Attachment", `${a.filename} (${a.contentType}, ${formatSize(a.size)})`]);
  // One column for every value, however long a custom header's name.
  const width = Math.max(...fields.map(([k]) => k.length)) + 1;
  const c = colorsFor(io.stdout, io.env);
  const out = fields.map(([k, v]) => `${c.bold(`${k}:`.padEnd(width))} ${v}`);
  out.push("");
  if (email.text) out.push(email.text.trimEnd());
  else if (email.html)
    out.push(c.dim("(HTML only; --raw shows the source, the web inbox renders it)"), email.html.trimEnd());
  io.stdout.write(`${out.join("\n")}\n`);
}

export async function runInboxShow(id: string, flags: InboxFlags, io: CliIO): Promise<number> {
  const json = flags.json ?? false;
  try {
    checkId(id);
    const store = await openInbox(flags, io);
    const { m, raw } = await find(store, id, io, json);
    if (flags.raw) {
      io.stdout.write(raw);
      return 0;
    }
    const parts = await readParts(raw);
    const part = showPart(m, parts, flags, io);
    if (part !== undefined) return part;
    const email = parts.email;
    if (!email)
      throw new MailsendError("invalid_eml", `message ${m.id} cannot be read as a message: ${parts.error}`, {
        hint: "--raw prints it as stored.",
      });
    if (json) showJson(m, email, parts, io);
    else await showText(m, email, io);
    return 0;
  } catch (e) {
    return reportError(e, io, { json });
  }
}

const QUERY_OPTION = {
  flags: "--query <query>",
  description:
    'the messages to match: to:, from:, cc:, subject:, has:attachment, filename:, after:, before:, is:rest|smtp, words, "phrases", -term',
};
const PART_OPTIONS = [
  { flags: "--link", description: "print the message's links, one a line (the HTML part's, then the text part's)" },
  { flags: "--match <regex>", description: "with --link: only the links matching it" },
  {
    flags: "--extract <regex>",
    description: "print the first match in the text (its first group if it has one), e.g. a one-time code",
  },
  { flags: "--text", description: "print the text part alone" },
  { flags: "--html", description: "print the HTML part alone" },
];
const WAIT_OPTIONS = [
  { flags: "--count <n>", description: "wait for this many matching messages (default 1)", parse: "int" as const },
  {
    flags: "--timeout <duration>",
    description: "give up after this long and exit 1, listing the closest messages (default 30s)",
  },
];

/** `mailsend inbox`, `mailsend inbox show <id>` and `mailsend inbox wait`. */
export function register(program: Command, { io, setExit }: CommandContext): void {
  const inbox = program
    .command("inbox")
    .description("list the messages a sandbox stored")
    .addHelpText(
      "after",
      examples([
        "mailsend inbox                        # id, received, from, to, size, subject",
        "mailsend inbox --limit 5 --json",
        "mailsend inbox --query 'to:alice@example.com subject:\"password reset\" after:10m'",
        "mailsend inbox show <id>              # headers, text and attachments of one message",
        "mailsend inbox wait --query 'to:alice@example.com' --timeout 30s",
      ]),
    );
  addSandboxOptions(inbox, [
    DIR_OPTION,
    { flags: "--limit <n>", description: "newest n only", parse: "int" },
    QUERY_OPTION,
    JSON_OPTION,
  ]);
  inbox.action(async (opts: InboxFlags) => setExit(await runInbox(opts, io)));
  registerShow(inbox, io, setExit);
  registerWait(inbox, io, setExit);
}

/** `mailsend inbox show <id>`: the whole message, its source, or one part of it. */
function registerShow(inbox: Command, io: CliIO, setExit: CommandContext["setExit"]): void {
  const show = inbox
    .command("show")
    .description("show one stored message")
    .argument("<id>", "an id from `mailsend inbox`, `latest`, or the Message-ID an SMTP send printed")
    .addHelpText(
      "after",
      examples([
        "mailsend inbox show <id>",
        "mailsend inbox show <id> --raw > message.eml     # the stored .eml, byte for byte",
        "mailsend inbox show <id> --json | jq .subject",
        "mailsend inbox show '<6d48a104-...@example.com>'  # by the Message-ID an SMTP send printed",
        "mailsend inbox show latest --link --match /reset   # the first link first",
        "mailsend inbox show latest --extract 'code: (\\d{6})'",
      ]),
    );
  addSandboxOptions(show, [
    DIR_OPTION,
    { flags: "--raw", description: "print the .eml exactly as stored" },
    ...PART_OPTIONS,
    JSON_OPTION,
  ]);
  show.action(async (id: string, _opts: unknown, cmd: Command) =>
    setExit(await runInboxShow(id, cmd.optsWithGlobals<InboxFlags>(), io)),
  );
}

/** `mailsend inbox wait`: until the running sandbox has the messages a query matches. */
function registerWait(inbox: Command, io: CliIO, setExit: CommandContext["setExit"]): void {
  const wait = inbox
    .command("wait")
    .description("wait until messages matching a query arrive at the running sandbox")
    .addHelpText(
      "after",
      examples([
        "mailsend inbox wait --query 'to:alice@example.com subject:reset'",
        "mailsend inbox wait --query 'is:smtp has:attachment' --count 3 --timeout 1m --json",
      ]),
    );
  addSandboxOptions(wait, [DIR_OPTION, QUERY_OPTION, ...WAIT_OPTIONS, JSON_OPTION]);
  wait.action(async (_opts: unknown, cmd: Command) =>
    setExit(await runInboxWait(cmd.optsWithGlobals<WaitFlags>(), io)),
  );
}
