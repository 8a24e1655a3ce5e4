/**
 * 100,000 recorded conversations replayed from one NDJSON file in bounded memory and time: the
 * heap is sampled as replay goes, with a control that keeps every replayed conversation (so the
 * measurement would see growth if replay held on to them). docs/replay.md states the figures.
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyOf, converged, maxDispatches, type TerminationPolicy } from '../../src/index.ts';
import { type ReplayedConversation, replay } from '../../src/replay/index.ts';

const CONVERSATIONS = 100_000;
let dir: string;
let path: string;

/** Conversation i: 5-24 dispatches, a spread halving from 100, tokens per dispatch. */
function line(i: number): string {
  const count = 5 + (i % 20);
  const dispatches = [];
  let spread = 100;
  for (let n = 1; n <= count; n++) {
    spread /= 2;
    dispatches.push(
      `{"n":${n},"elapsedMs":${n * 1.5},"responder":"${n % 2 ? 'a' : 'b'}","queueDepth":1,"tokens":{"inputTokens":120,"outputTokens":30},"record":{"spread":${spread}}}`,
    );
  }
  return `{"version":1,"conversationId":"c-${i}","orchestrator":"desks","startTimeMs":${1.7e12 + i},"ending":{"reason":"converged","policy":"converged","dispatchCount":${count},"elapsedMs":${count * 1.5}},"usage":{"inputTokens":${120 * count},"outputTokens":${30 * count}},"dispatches":[${dispatches.join(',')}]}\n`;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'replay-scale-'));
  path = join(dir, 'many.ndjson');
  const out = createWriteStream(path);
  for (let i = 0; i < CONVERSATIONS; i++) {
    if (!out.write(line(i))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(r));
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Spread = { spread: number };
const candidate = anyOf(
  converged<Spread, undefined>({ measure: (s) => s.projection.spread, tolerance: 1 }),
  maxDispatches(12),
) as TerminationPolicy<unknown, undefined>;

async function measure(keep: boolean) {
  globalThis.gc?.();
  const base = process.memoryUsage().heapUsed;
  let peak = 0;
  let seen = 0;
  const kept: ReplayedConversation[] = [];
  const started = performance.now();
  const report = await replay(path, candidate, {
    onConversation: (r) => {
      if (keep) kept.push(r);
      if (++seen % 5_000 === 0) {
        globalThis.gc?.();
        peak = Math.max(peak, process.memoryUsage().heapUsed - base);
      }
    },
  });
  return {
    report,
    seconds: (performance.now() - started) / 1000,
    peakMb: peak / 2 ** 20,
    kept: kept.length,
  };
}

describe('replaying 100,000 recorded conversations', () => {
  it('streams them in bounded memory and time', async () => {
    const sizeMb = statSync(path).size / 2 ** 20;
    const { report, seconds, peakMb } = await measure(false);
    console.log(
      `replay: ${CONVERSATIONS} conversations (${sizeMb.toFixed(0)} MB) in ${seconds.toFixed(1)} s, heap growth at most ${peakMb.toFixed(1)} MB`,
    );
    expect(report.conversations).toBe(CONVERSATIONS);
    // Spread 100/2^n <= 1 at n = 7: conversations of 7 or more dispatches stop at 7.
    const longer = Array.from({ length: 20 }, (_, k) => 5 + k).filter((c) => c > 7).length;
    expect(report.earlier).toBe((CONVERSATIONS / 20) * longer);
    expect(report.convergedEarlier.count).toBe(report.earlier);
    expect(report.risk.count).toBe(0);
    expect(report.chart).toHaveLength(2000);
    expect(peakMb).toBeLessThan(16);
    expect(seconds).toBeLessThan(60);
  }, 120_000);

  it('sees the growth when every replayed conversation is kept (a control for the measurement)', async () => {
    const { peakMb, kept } = await measure(true);
    expect(kept).toBe(CONVERSATIONS);
    expect(peakMb).toBeGreaterThan(16);
  }, 120_000);
});
