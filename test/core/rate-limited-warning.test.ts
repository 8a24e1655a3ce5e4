import { afterEach, describe, expect, it, vi } from 'vitest';
import { rateLimitedWarning } from '../../src/core/shared/warnings.ts';

describe('rateLimitedWarning', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('reports the first failure, holds back the rest of the interval, then reports with the count', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(0);
    const emitted: string[] = [];
    vi.spyOn(process, 'emitWarning').mockImplementation(((message: string, type: string) => {
      emitted.push(`${type}: ${message}`);
    }) as typeof process.emitWarning);
    const warn = rateLimitedWarning('TestWarning', 1_000);
    warn('boom 1');
    warn('boom 2');
    warn('boom 3');
    vi.setSystemTime(999);
    warn('boom 4');
    expect(emitted).toEqual(['TestWarning: boom 1 (at most one report per 1 s)']);
    vi.setSystemTime(1_000);
    warn('boom 5');
    expect(emitted).toEqual([
      'TestWarning: boom 1 (at most one report per 1 s)',
      'TestWarning: boom 5 (3 more since the last report)',
    ]);
    vi.setSystemTime(5_000);
    warn('boom 6');
    expect(emitted.at(-1)).toBe('TestWarning: boom 6 (at most one report per 1 s)');
  });
});
