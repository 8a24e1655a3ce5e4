/**
 * The purge of expired conversations: in bounded batches (no statement or script holds the
 * database for long), and by the store itself on a timer that never keeps the process alive.
 */

/** How many ended conversations one purge statement (or script) deletes at most. */
export const PURGE_BATCH = 1_000;

/**
 * Calls `deleteBatch` (which deletes at most {@link PURGE_BATCH} and answers how many it did)
 * until a batch comes back short; answers the total.
 */
export async function purgeInBatches(deleteBatch: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await deleteBatch();
    total += deleted;
    if (deleted < PURGE_BATCH) return total;
  }
}

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
