/**
 * Being told when an AbortSignal aborts, for many short-lived watchers of one signal.
 *
 * A batch's requests in flight all watch the same signal (its deadline's, or the one that stops
 * every send on a second Ctrl-C). With a listener each, every request would add itself to the
 * signal's own list of listeners and take itself off again, and Node's EventTarget walks that
 * list both times, a cost that grows with --concurrency. Here a signal gets one listener of its own,
 * the first time it is watched, and its watchers are a Set.
 */

interface Watched {
  fns: Set<() => void>;
  onAbort: () => void;
}

const watched = new WeakMap<AbortSignal, Watched>();

const NOTHING = () => {};

/**
 * Calls `fn` once when `signal` aborts (at once, when it has already); returns what stops
 * watching (nothing to stop without a signal). `fn` is called with nothing: it reads
 * `signal.reason` itself if it needs it. The signal's listener goes with its last watcher: a
 * caller's signal is left as it was given.
 */
export function whenAborted(signal: AbortSignal | undefined, fn: () => void): () => void {
  if (!signal) return NOTHING;
  if (signal.aborted) {
    fn();
    return NOTHING;
  }
  let w = watched.get(signal);
  if (!w) {
    const fns = new Set<() => void>();
    const onAbort = () => {
      watched.delete(signal);
      const all = [...fns];
      fns.clear();
      for (const f of all) {
        try {
          f();
        } catch (e) {
          // As a listener's own exception would be: reported, and the other watchers still told.
          process.nextTick(() => {
            throw e;
          });
        }
      }
    };
    watched.set(signal, (w = { fns, onAbort }));
    signal.addEventListener("abort", onAbort, { once: true });
  }
  // A watcher added twice is told once, as with addEventListener.
  const mine = w;
  mine.fns.add(fn);
  return () => {
    if (!mine.fns.delete(fn) || mine.fns.size > 0 || watched.get(signal) !== mine) return;
    watched.delete(signal);
    signal.removeEventListener("abort", mine.onAbort);
  };
}
