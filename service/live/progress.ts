/** The terminal progress line: conversations done, share converged, p95s of converging. */

const WINDOW = 1000;

export class Progress {
  done = 0;
  converged = 0;
  readonly byReason = new Map<string, number>();
  readonly #dispatches: number[] = [];
  readonly #ms: number[] = [];

  record(reason: string, dispatches: number, elapsedMs: number): void {
    this.done++;
    this.byReason.set(reason, (this.byReason.get(reason) ?? 0) + 1);
    if (reason !== 'converged') return;
    this.converged++;
    this.#dispatches.push(dispatches);
    this.#ms.push(elapsedMs);
    if (this.#dispatches.length > WINDOW) {
      this.#dispatches.shift();
      this.#ms.shift();
    }
  }

  line(inFlight: number): string {
    // The convergence SLO's share, as the live page shows it: aborts count neither way.
    const counted = this.done - (this.byReason.get('aborted') ?? 0);
    const share = counted === 0 ? 0 : (100 * this.converged) / counted;
    return `conversations ${this.done} done, ${inFlight} running | converged ${share.toFixed(1)}% (of those not aborted) | p95 to converge: ${p95(this.#dispatches).toFixed(0)} dispatches, ${p95(this.#ms).toFixed(0)} ms`;
  }

  summary(): string {
    const reasons = [...this.byReason.entries()].map(([r, n]) => `${r} ${n}`).join(', ');
    return `${this.done} conversations: ${reasons || 'none'}`;
  }
}

function p95(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)] as number;
}
