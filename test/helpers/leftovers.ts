/**
 * A last resort for the servers tests start: each registers how to stop its server at once, and
 * whatever is still registered when the test process exits (a worker torn down before its
 * `afterAll`, a timeout, an uncaught error) is stopped synchronously then. The tests still stop
 * their servers themselves; this only makes sure nothing outlives a run that did not.
 */
const stops = new Set<() => void>();
let hooked = false;

/** Registers `stop` (synchronous) until the returned function is called. */
export function stopAtExit(stop: () => void): () => void {
  if (!hooked) {
    hooked = true;
    process.once('exit', () => {
      for (const s of stops) {
        try {
          s();
        } catch {
          // The next one still runs.
        }
      }
    });
  }
  stops.add(stop);
  return () => {
    stops.delete(stop);
  };
}
