/**
 * The programmatic API: `import { send, sendBatch, createSandbox } from "mailsend"`.
 * The same validation, transports, rate-limit budget and retries as the CLI,
 * without process-wide side effects: no exit, no console output, no signal
 * handlers, and the environment is read only when passed as `options.env`.
 */
export { send } from "./api/send.js";
export { sendBatch } from "./api/batch.js";
export { createSandbox } from "./api/sandbox.js";
export {
  MailsendError,
  isMailsendError,
  EXIT,
  EXIT_MEANING,
  exitCodeFor,
  type ErrorCode,
  type ExitClass,
  type PartialDelivery,
} from "./core/errors.js";
export { VERSION } from "./core/version.js";
export type {
  AttachmentInput,
  BatchItem,
  BatchItemError,
  BatchItemResult,
  BatchItemStatus,
  BatchResult,
  BatchSummary,
  BatchTemplate,
  ConnectionOptions,
  ContentAttachment,
  DeliveryOptions,
  MailSandbox,
  MessageInput,
  PathAttachment,
  SandboxAttachment,
  SandboxMail,
  SandboxMessage,
  SandboxOptions,
  SandboxWaitError,
  SendBatchOptions,
  SendOptions,
  SendResult,
  SmtpOptions,
  WaitForOptions,
  WaitInfo,
} from "./api/types.js";
