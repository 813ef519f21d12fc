/**
 * The service's send request (POST /send), as one zod schema shared by
 * the client (for --json-file input) and the sandbox (for POST /send).
 */
import { z } from "zod";
import { parseAddressList, parseBareAddress, parseMailbox1 } from "./address.js";
import { checkHeader, checkSingleLine } from "./headers.js";
import { isMailsendError } from "./errors.js";

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Run one of core's validators as a zod refinement, keeping its message. */
function via(check: (v: string) => void) {
  return (v: string, ctx: z.RefinementCtx) => {
    try {
      check(v);
    } catch (e) {
      if (!isMailsendError(e)) throw e;
      ctx.addIssue({ code: "custom", message: e.message });
    }
  };
}

export const attachmentSchema = z.strictObject({
  content: z.string().regex(BASE64, "content must be base64 of the file's bytes"),
  filename: z
    .string()
    .min(1, "filename must not be empty")
    .superRefine(via((v) => checkSingleLine(v, "attachment filename")))
    .refine((v) => !/[/\\]/.test(v), "filename must not contain a path separator"),
});

export const sendRequestSchema = z.strictObject({
  from: z.string().superRefine(via((v) => void parseBareAddress(v, "from"))),
  // The service's own field: addresses, never a group (mailsend opens groups into their members).
  to: z.string().superRefine(via((v) => void parseAddressList(v, "to", false))),
  subject: z
    .string()
    .min(1, "subject must not be empty")
    .superRefine(via((v) => checkSingleLine(v, "subject"))),
  html: z.string().min(1, "html must not be empty"),
  name: z
    .string()
    .superRefine(via((v) => checkSingleLine(v, "name")))
    .optional(),
  reply_to: z
    .string()
    .superRefine(via((v) => void parseMailbox1(v, "reply_to")))
    .optional(),
  attachments: z.array(attachmentSchema).optional(),
  headers: z
    .record(z.string(), z.string())
    .superRefine((h, ctx) => {
      for (const [k, v] of Object.entries(h)) via(() => checkHeader(k, v))(v, ctx);
    })
    .optional(),
});

export type SendRequest = z.infer<typeof sendRequestSchema>;
export type AttachmentObject = z.infer<typeof attachmentSchema>;

export const sendResponseSchema = z.object({
  success: z.boolean(),
  message_id: z.string().optional(),
});

export interface FieldIssue {
  path: string;
  message: string;
}

export function describeIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((i) => ({
    path: i.path.map(String).join(".") || "(body)",
    message: i.code === "unrecognized_keys" ? `unknown field(s): ${i.keys.join(", ")}` : i.message,
  }));
}
