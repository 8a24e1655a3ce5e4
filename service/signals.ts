/**
 * SIGTERM, SIGINT and SIGHUP (a closed terminal) from the first moment the service runs. main.ts imports this first, so the
 * handlers are in place before the heavy modules load: a signal while starting (a `docker stop`
 * of a container still booting) exits 0 at once, and a repeated signal during the graceful
 * shutdown is ignored. `process.once` would put the default action back after the first signal,
 * and a second SIGTERM would then kill the process with 143 mid-flush.
 */
type Stop = (signal: NodeJS.Signals) => void;

let stop: Stop | undefined;
let received: NodeJS.Signals | undefined;

function onSignal(signal: NodeJS.Signals): void {
  if (received !== undefined) {
    process.stderr.write(`${signal} again: already shutting down (after ${received})\n`);
    return;
  }
  received = signal;
  if (stop === undefined) {
    process.stdout.write(`${signal} while starting: exiting before serving\n`);
    process.exit(0);
  }
  stop(signal);
}

process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);
// A closed terminal: by default Node exits 129 at once, skipping the flush.
process.on('SIGHUP', onSignal);

/** From now on the first SIGTERM, SIGINT or SIGHUP calls `fn` (once); repeats are ignored. */
export function onStopSignal(fn: Stop): void {
  stop = fn;
}
