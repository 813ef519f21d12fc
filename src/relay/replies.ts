/**
 * The relay's answer to mail this machine's setup stops (no key, no sender, delivery settings that
 * cannot carry the message): RFC 3463 4.3.5, "system incorrectly configured", a 4xx so the client
 * keeps the message until that is fixed. Here so that doctor's warning names the reply the relay gives.
 */
export const SETUP_REPLY = { code: 451, status: "4.3.5" } as const;
