import { describe, expect, it } from 'vitest';
import { maxDispatches } from '../../src/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

const gc = (globalThis as { gc?: () => void }).gc;

/** Heap used after a full collection, sampled at dispatches 100,000 and 1,000,000. */
async function heapGrowth(retain: unknown[] | undefined): Promise<number> {
  const samples: number[] = [];
  const o = counterOrchestrator({
    termination: maxDispatches(1_000_000),
    listener: (s, _d, n) => {
      retain?.push(s);
      if (n === 100_000 || n === 1_000_000) {
        gc?.();
        samples.push(process.memoryUsage().heapUsed);
      }
    },
  });
  const result = await o.run({ sender: 'user', content: 0 });
  expect(result.dispatchCount).toBe(1_000_000);
  return (samples[1] ?? 0) - (samples[0] ?? 0);
}

describe('memory', () => {
  it('runs with a collector the test can force', () => {
    expect(typeof gc).toBe('function');
  });

  it('keeps memory flat over a 1,000,000-dispatch conversation with default options', async () => {
    expect(await heapGrowth(undefined)).toBeLessThan(2 * 1024 * 1024);
  });

  it('sees the growth of a listener that keeps every state (the measure above can fail)', async () => {
    // 900,000 retained snapshots: tens of megabytes, so the flat result above is not an accident.
    expect(await heapGrowth([])).toBeGreaterThan(20 * 1024 * 1024);
  });
});
