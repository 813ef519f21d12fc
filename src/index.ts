/**
 * The programmatic API: the same validation and transports as the CLI,
 * without process-wide side effects (no exit, no console output).
 */
export { MailsendError, EXIT, type ErrorCode, type ExitClass } from "./core/errors.js";
export type { Mailbox } from "./core/address.js";
export { parseAddressList, formatMailbox } from "./core/address.js";
export type { Message } from "./core/message.js";
export type { SendResult, Transport, TransportName } from "./core/transport.js";
export type { TransportConfig, RestConfig, SmtpConfig } from "./core/config.js";
export { sendRequestSchema, type SendRequest } from "./core/schema.js";
export { buildMessage, type MessageFlags } from "./input/build.js";
export { createTransport } from "./transports/index.js";
export { VERSION } from "./core/version.js";
