/**
 * A failure that repeats (an OTLP endpoint down: one failed export every few seconds) is said at
 * once, then at most once per window with the count since the last line: rate-limited, never
 * muted, and no count is lost.
 */
export class RateLimitedReport {
  readonly #windowMs: number;
  readonly #write: (count: number, batches: number, lastError: string) => void;
  #count = 0;
  #batches = 0;
  #lastError = '';
  #lastWrite = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;

  /** `write` gets the count, the number of failures it came in and the last error. */
  constructor(
    windowMs: number,
    write: (count: number, batches: number, lastError: string) => void,
  ) {
    this.#windowMs = windowMs;
    this.#write = write;
  }

  record(count: number, error: string): void {
    this.#count += count;
    this.#batches++;
    this.#lastError = error;
    const wait = this.#lastWrite + this.#windowMs - performance.now();
    if (wait <= 0) this.flush();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.flush(), wait);
      this.#timer.unref();
    }
  }

  /** Writes what has not been said yet (also at shutdown). */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#batches === 0) return;
    this.#write(this.#count, this.#batches, this.#lastError);
    this.#lastWrite = performance.now();
    this.#count = 0;
    this.#batches = 0;
  }
}
