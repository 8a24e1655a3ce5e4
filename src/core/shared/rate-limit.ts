/**
 * The one rate limiter: a report that repeats (a hook failing on every dispatch, an OTLP endpoint
 * down) goes out at most once per interval and says how many were held back since the last, so it
 * neither floods the log nor goes silent. Process warnings, the telemetry's diag reports and the
 * demo service's export failures are built on it.
 */
export class RateLimit {
  readonly #intervalMs: number;
  readonly #now: () => number;
  #last = Number.NEGATIVE_INFINITY;
  #held = 0;

  constructor(intervalMs: number, now: () => number = Date.now) {
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  /**
   * Whether a report may go out now: the number held back since the last one (the report goes
   * out and the count starts again), or `undefined` (it is held back and counted).
   */
  pass(): number | undefined {
    const t = this.#now();
    if (t - this.#last < this.#intervalMs) {
      this.#held++;
      return undefined;
    }
    this.#last = t;
    const held = this.#held;
    this.#held = 0;
    return held;
  }

  /** Milliseconds until a report may go out again (0: now). */
  waitMs(): number {
    return Math.max(0, this.#last + this.#intervalMs - this.#now());
  }
}
