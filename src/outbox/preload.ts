/**
 * The code a long-running delivery process (the relay, `mailsend queue run --watch`) may need
 * later, loaded as it starts. An upgrade (`npm i -g mailsend@next`, a new image's layer) replaces
 * dist/ under a process that runs for weeks: a file of it not loaded yet is gone then (a new
 * build's chunks have other names), and every message would be refused with 451, or deferred,
 * until someone restarts it. Loaded at start, the process keeps delivering with the version it
 * started as. Packages that stay in node_modules (proper-lockfile, socks, ...) keep their paths, so
 * they are left to load when used. test/e2e/relay-upgrade.test.ts moves dist/ away under a relay.
 */
export async function preloadDelivery(env: NodeJS.ProcessEnv): Promise<void> {
  await Promise.all([
    // Taking a message: its parse.
    import("../sendmail/eml.js"),
    import("postal-mime"),
    // Delivering it: SMTP (nodemailer), a message rebuilt for SMTP.
    import("../transports/smtp.js"),
    import("nodemailer/lib/smtp-connection"),
    import("./from-message.js"),
    // The shared budget's Redis client, when there is one, and the debug switch it is opened with.
    ...(env.MAILSEND_RATE_LIMIT_URL ? [import("ioredis"), import("debug")] : []),
  ]);
}
