/** The SMTP envelope: who the message is from and who gets it, as plain addresses. */
export interface Envelope {
  from: string;
  to: string[];
}

/** How a command that takes mail from other programs hands it on (--queue, MAILSEND_QUEUE). */
export type QueueMode = "auto" | "always" | "never";
