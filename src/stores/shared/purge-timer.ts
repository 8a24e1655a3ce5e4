/** The store's own purge of expired conversations, on a timer that never keeps the process alive. */

/**
 * Calls `purge` every `intervalMs` (none when it is 0). Its failures, thrown or rejected, are
 * ignored: the next tick tries again, and `purgeExpired()` reports failures to its own caller.
 */
export function purgeEvery(intervalMs: number, purge: () => unknown): NodeJS.Timeout | undefined {
  if (intervalMs <= 0) return undefined;
  const timer = setInterval(() => {
    try {
      const done = purge();
      if (done instanceof Promise) done.catch(() => {});
    } catch {
      // As a rejection: the next tick tries again.
    }
  }, intervalMs);
  timer.unref();
  return timer;
}
