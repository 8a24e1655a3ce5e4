/**
 * The desks' simulated models: what one quote costs, as `context.reportUsage` reports it, and
 * that a real conversation's totals are the sum of its quotes.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, type ServiceConfig } from '../../service/config.ts';
import {
  createDeskOrchestrator,
  DESK_MODELS,
  market,
  quoteUsage,
  TIMEOUT_MS,
} from '../../service/desks/market.ts';

describe('the desks’ simulated models', () => {
  it('read a cached prompt and the transcript so far (up to a context window) and write a short answer', () => {
    const first = quoteUsage(0, 1, 3);
    expect(first).toMatchObject({ inputTokens: 420, cacheReadInputTokens: 0, model: 'sim-large' });
    // One quote more of transcript per dispatch; the prompt is cached once the desk has quoted.
    expect(quoteUsage(1, 2, 3)).toMatchObject({ inputTokens: 438, cacheReadInputTokens: 0 });
    expect(quoteUsage(1, 4, 3)).toMatchObject({ inputTokens: 474, cacheReadInputTokens: 420 });
    // The context window caps what is read.
    expect(quoteUsage(2, 1_000, 3).inputTokens).toBe(8_000);
    expect([0, 1, 2, 3].map((i) => quoteUsage(i, 1, 4).model)).toEqual([
      ...DESK_MODELS,
      'sim-large',
    ]);
    for (let i = 0; i < 200; i++) {
      const small = quoteUsage(2, 1 + i, 3);
      expect(small.outputTokens).toBeGreaterThanOrEqual(24);
      expect(small.outputTokens).toBeLessThan(64);
      expect(small.reasoningOutputTokens).toBeUndefined();
      // The large model reasons first: more output, counted as reasoning too.
      const large = quoteUsage(0, 1 + i, 3);
      expect(large.reasoningOutputTokens).toBe(120);
      expect(large.outputTokens).toBeGreaterThanOrEqual(144);
    }
  });

  it('report every quote, so a conversation’s input tokens are the sum over its dispatches', async () => {
    const config = parseConfig(['--latency-ms', '0'], {}) as ServiceConfig;
    const orchestrator = createDeskOrchestrator('fx_desks', 3, config, [], undefined, () => {});
    const result = await orchestrator.run({
      sender: 'market',
      content: { market: market('converge', 3, config) },
    });
    const n = result.dispatchCount;
    expect(result.decision.reason).toBe('converged');
    expect(result.usage.inputTokens).toBe(420 * n + 9 * n * (n - 1));
    expect(result.usage.cacheReadInputTokens).toBe(420 * (n - 3));
    expect(Object.keys(result.usage.byResponder).sort()).toEqual(['london', 'new_york', 'tokyo']);
    expect(result.usage.outputTokens).toBeGreaterThan(24 * n);
  });
});

describe('the demo’s market mix', () => {
  it('has lagging markets, which converge past the latency SLO’s 5 s threshold and within the desks’ timeout', async () => {
    const config = parseConfig(['--latency-ms', '0'], {}) as ServiceConfig;
    // The shipped mix gives them a documented share: 7 in 100 conversations.
    expect(config.mix.lagging / Object.values(config.mix).reduce((a, b) => a + b)).toBe(0.07);
    // A lagging market converges as a calm one does, its desks answering slowly whatever
    // --latency-ms says (0 here): 3 and 4 desks, as fx_desks and rates_desks have by default.
    const runs = [3, 4].flatMap((desks) => {
      const orchestrator = createDeskOrchestrator(
        'fx_desks',
        desks,
        config,
        [],
        undefined,
        () => {},
      );
      return Array.from({ length: 8 }, () =>
        orchestrator.run({
          sender: 'market',
          content: { market: market('lagging', desks, config) },
        }),
      );
    });
    const results = await Promise.all(runs);
    expect(results.map((r) => r.decision.reason)).toEqual(Array(16).fill('converged'));
    for (const r of results) expect(r.elapsedMs).toBeLessThan(TIMEOUT_MS);
    // Each converged past 5 s but for a rare short one (a dispatch count at the low end).
    expect(results.filter((r) => r.elapsedMs > 5_000).length).toBeGreaterThanOrEqual(14);
  }, 60_000);
});
