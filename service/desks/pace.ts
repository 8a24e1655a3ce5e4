/**
 * The workload's pace, the same in both modes: conversations start at `rate` per second, each
 * only while there is room under `--concurrency` (a start due without room is skipped, not
 * queued: after a stall, the starts due meanwhile are bounded by the room, not their number).
 */

export interface PaceOptions {
  /** Starts per second. */
  readonly rate: number;
  /** Starts one conversation. */
  readonly start: () => void;
  /** Whether one more may start now (fewer than `--concurrency` in flight). */
  readonly room: () => boolean;
  /** True once the service is stopping: nothing starts from then on. */
  readonly stopping: () => boolean;
}

/** Ticks at most every 50 ms (more often at rates over 20 per second); clearInterval stops it. */
export function paceStarts({ rate, start, room, stopping }: PaceOptions): NodeJS.Timeout {
  const intervalMs = 1000 / rate;
  let due = performance.now();
  return setInterval(
    () => {
      const now = performance.now();
      while (due <= now && !stopping()) {
        due += intervalMs;
        if (room()) start();
      }
      // Behind by more than a second (the loop left early): go on from now, without a burst.
      if (due < now - 1000) due = now;
    },
    Math.max(1, Math.min(intervalMs, 50)),
  );
}
