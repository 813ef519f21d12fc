import { z } from "zod";
import { MailsendError } from "../core/errors.js";
import { checkNotIdempotencyHeader } from "../core/headers.js";
import { attachmentSchema, describeIssues, sendRequestSchema } from "../core/schema.js";
import { utf8 } from "../core/read.js";

/**
 * A send request given as a file. Same fields as the wire's send request, but every
 * field is optional here because flags may supply or override it, and `from`
 * may carry a display name, which becomes `name`.
 */
const fileSchema = sendRequestSchema.partial().extend({
  from: z.string().optional(),
  attachments: z.array(attachmentSchema).optional(),
});

export type SendRequestFile = z.infer<typeof fileSchema>;

export function parseSendRequestFile(buf: Buffer, source: string): SendRequestFile {
  let data: unknown;
  try {
    data = JSON.parse(utf8(buf, source));
  } catch (e) {
    if (e instanceof MailsendError) throw e;
    throw new MailsendError("invalid_json", `${source}: not valid JSON (${(e as Error).message})`, {
      hint: 'Expected the send request of the API, e.g. {"from":"a@example.com","to":"b@example.com","subject":"Hi","html":"<p>Hi</p>"}',
    });
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new MailsendError("invalid_json", `${source}: expected a JSON object (one send request)`);
  }
  const parsed = fileSchema.safeParse(data);
  if (!parsed.success) {
    const list = describeIssues(parsed.error)
      .map((i) => `${i.path}: ${i.message}`)
      .join("; ");
    throw new MailsendError("invalid_json", `${source}: ${list}`);
  }
  for (const name of Object.keys(parsed.data.headers ?? {})) checkNotIdempotencyHeader(name, `${source} headers`);
  return parsed.data;
}
