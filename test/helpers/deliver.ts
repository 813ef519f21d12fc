/** What the deliver() unit tests share: a message, and a transport whose attempts a test scripts. */
import type { Message } from "../../src/core/message.js";
import type { SendResult, Transport } from "../../src/core/transport.js";

export const testMessage = (idempotencyKey = "key-123"): Message => ({
  from: { address: "a@example.com" },
  to: [{ address: "b@example.com" }],
  cc: [],
  bcc: [],
  subject: "s",
  html: "<p>x</p>",
  attachments: [],
  headers: [],
  idempotencyKey,
});

/**
 * A REST transport whose attempt n (from 0) runs `attempt(n)`: it throws to fail the attempt, and
 * returns to have it accepted (message id "id-1"). `count()`: the attempts made.
 */
export function scriptedTransport(attempt: (n: number) => void | Promise<void>): {
  transport: Transport;
  count: () => number;
} {
  let n = 0;
  const transport: Transport = {
    name: "rest",
    preview: async () => {},
    close: async () => {},
    send: async (m): Promise<SendResult> => {
      await attempt(n++);
      return { transport: "rest", messageId: "id-1", recipients: [], idempotencyKey: m.idempotencyKey, attempts: 1 };
    },
  };
  return { transport, count: () => n };
}
