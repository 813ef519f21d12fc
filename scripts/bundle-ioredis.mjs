// How ioredis (the shared budget's Redis client) is bundled: into a chunk of its own that only
// a run with MAILSEND_RATE_LIMIT_URL imports, with two changes made at build time.
//
// 1. Its `debug` dependency is a no-op: with DEBUG=ioredis:* it would print every command's
//    arguments, AUTH's password included; loading it also costs ~3 ms for nothing we use.
// 2. Its Commander makes the method of each of Redis's ~300 commands (two each, with the
//    *Buffer form) when it is first used, not all ~600 when the module loads: loading the
//    chunk takes ~10 ms instead of ~19 ms (bench/redis.mjs measures the whole send). Every
//    command stays callable: a name that is not an own method is looked up in the command
//    table through a Proxy below Commander.prototype.
//
// 3. Its Cluster client (~40 kB and the dns module) is left out: the budget talks to one
//    server or to a master through Sentinel, never to a Redis Cluster. Saves ~1 ms.
//
// The second is a text replacement in ioredis's built file; if an ioredis release changes the
// lines it replaces, the build stops here rather than ship an unpatched or broken client.
import { readFileSync } from "node:fs";

const EAGER = `commands.forEach(function (commandName) {
    Commander.prototype[commandName] = generateFunction(commandName, commandName, "utf8");
    Commander.prototype[commandName + "Buffer"] = generateFunction(commandName + "Buffer", commandName, null);
});`;

const LAZY = `{
    const names = new Set(commands);
    const made = Object.create(null);
    const base = Object.getPrototypeOf(Commander.prototype);
    Object.setPrototypeOf(Commander.prototype, new Proxy(base, {
        get(target, key, receiver) {
            if (typeof key === "string") {
                if (key in made) return made[key];
                const buffer = key.endsWith("Buffer");
                const name = buffer ? key.slice(0, -6) : key;
                if (names.has(name)) return (made[key] = generateFunction(key, name, buffer ? null : "utf8"));
            }
            return Reflect.get(target, key, receiver);
        },
        has(target, key) {
            if (typeof key === "string" && names.has(key.endsWith("Buffer") ? key.slice(0, -6) : key)) return true;
            return Reflect.has(target, key);
        },
    }));
}`;

const NO_DEBUG = `function debug(namespace) {
  const f = () => {};
  f.enabled = false;
  f.namespace = namespace;
  f.destroy = () => {};
  f.log = () => {};
  return f;
}
debug.default = debug;
module.exports = debug;
`;

const NO_CLUSTER = `exports.default = class Cluster {
  constructor() {
    throw new Error("mailsend's bundle of ioredis leaves out Redis Cluster");
  }
};
`;

export const ioredisPlugin = {
  name: "mailsend-ioredis",
  setup(b) {
    b.onResolve({ filter: /^debug$/ }, (args) => (/[\\/]ioredis[\\/]/.test(args.importer) ? { path: "debug", namespace: "mailsend-no-debug" } : undefined));
    b.onLoad({ filter: /.*/, namespace: "mailsend-no-debug" }, () => ({ contents: NO_DEBUG, loader: "js" }));
    b.onResolve({ filter: /^\.\/cluster$/ }, (args) => (/[\\/]ioredis[\\/]built[\\/]/.test(args.importer) ? { path: "cluster", namespace: "mailsend-no-cluster" } : undefined));
    b.onLoad({ filter: /.*/, namespace: "mailsend-no-cluster" }, () => ({ contents: NO_CLUSTER, loader: "js" }));
    b.onLoad({ filter: /[\\/]ioredis[\\/]built[\\/]utils[\\/]Commander\.js$/ }, (args) => {
      const source = readFileSync(args.path, "utf8");
      if (!source.includes(EAGER)) {
        throw new Error(`scripts/bundle-ioredis.mjs: ${args.path} no longer holds the lines it makes lazy; update the patch for this ioredis release`);
      }
      return { contents: source.replace(EAGER, LAZY), loader: "js" };
    });
  },
};
