/**
 * The code a long-running delivery process (the relay, `mailsend queue run --watch`) may need
 * later, loaded as it starts. An upgrade (`npm i -g mailsend@next`, a new image's layer) replaces
 * dist/ under a process that runs for weeks: a file of it not loaded yet is gone then (a new
 * build's chunks have other names), and every message would be refused with 451, or deferred,
 * until someone restarts it. Loaded at start, the process keeps delivering with the version it
 * started as. Node resolves a dynamic import() again for each module that makes it, so each module
 * loads its own lazy imports here (its load* function), rather than this file importing the same
 * packages. Packages that stay in node_modules (proper-lockfile, socks, ...) keep their paths, so
 * they are left to load when used. test/e2e/relay-upgrade.test.ts moves dist/ away under a relay.
 */
export async function preloadDelivery(env: NodeJS.ProcessEnv): Promise<void> {
  const [eml, transports, fromMessage, redis] = await Promise.all([
    import("../sendmail/eml.js"),
    import("../transports/index.js"),
    import("./from-message.js"),
    env.MAILSEND_RATE_LIMIT_URL ? import("../limits/redis-store.js") : undefined,
  ]);
  await Promise.all([eml.loadParser(), transports.loadTransports(), fromMessage.loadComposer(), redis?.loadIoredis()]);
}
