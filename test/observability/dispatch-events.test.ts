import { describe, expect, it } from 'vitest';
import { CONTINUE } from '../../src/index.ts';
import { DispatchEvents, StoragePool } from '../../src/observability/dispatch-events.ts';
import { continuedDispatch } from '../helpers/dispatch-info.ts';

const info = (n: number) => continuedDispatch(n, 1);

function keep(capacity: number, total: number): number[] {
  const events = new DispatchEvents(capacity, false);
  for (let n = 1; n <= total; n++) events.add(info(n));
  return [...events.kept()].map((e) => e.count);
}

describe('DispatchEvents', () => {
  it('keeps everything up to the capacity, in order', () => {
    expect(keep(8, 5)).toEqual([1, 2, 3, 4, 5]);
    expect(keep(8, 8)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('keeps the first half and the last half past it', () => {
    expect(keep(8, 9)).toEqual([1, 2, 3, 4, 6, 7, 8, 9]);
    expect(keep(8, 23)).toEqual([1, 2, 3, 4, 20, 21, 22, 23]);
    expect(keep(7, 100)).toEqual([1, 2, 3, 4, 98, 99, 100]);
  });

  it('keeps only the first dispatch with a capacity of one, and counts the rest', () => {
    const events = new DispatchEvents(1, false);
    for (let n = 1; n <= 10; n++) events.add(info(n));
    expect([...events.kept()].map((e) => e.count)).toEqual([1]);
    expect(events.dropped).toBe(9);
    expect(events.total).toBe(10);
  });

  it('grows its storage past 16 and keeps every field', () => {
    const events = new DispatchEvents(128, true);
    for (let n = 1; n <= 40; n++) events.add(info(n), { n });
    const kept = [...events.kept()];
    expect(kept).toHaveLength(40);
    expect(kept[39]).toEqual({
      count: 40,
      elapsedMs: 400,
      durationMs: 1,
      responder: 1,
      decision: CONTINUE,
      extra: { n: 40 },
    });
  });
});

describe('DispatchEvents with less room than it keeps', () => {
  function keepWithin(capacity: number, total: number, limit: number): number[] {
    const events = new DispatchEvents(capacity, false);
    for (let n = 1; n <= total; n++) events.add(info(n));
    const written: number[] = [];
    const count = events.forEachKept(limit, (n) => written.push(n));
    expect(count).toBe(written.length);
    expect([...events.kept(limit)].map((e) => e.count)).toEqual(written);
    return written;
  }

  it('gives way in the middle: the first ceil(limit/2) and the last floor(limit/2)', () => {
    expect(keepWithin(8, 23, 7)).toEqual([1, 2, 3, 4, 21, 22, 23]);
    expect(keepWithin(8, 8, 7)).toEqual([1, 2, 3, 4, 6, 7, 8]);
    expect(keepWithin(8, 5, 4)).toEqual([1, 2, 4, 5]);
  });

  it('writes everything it keeps when there is room', () => {
    expect(keepWithin(8, 5, 7)).toEqual([1, 2, 3, 4, 5]);
    expect(keepWithin(8, 23, 8)).toEqual([1, 2, 3, 4, 20, 21, 22, 23]);
  });

  it('writes nothing with no room', () => {
    expect(keepWithin(8, 23, 0)).toEqual([]);
  });
});

describe('DispatchEvents storage shared through a pool', () => {
  it('hands storage on to the next conversation, which sees none of the last one', () => {
    const pool = new StoragePool(1);
    const first = new DispatchEvents(8, true, pool);
    for (let n = 1; n <= 30; n++) first.add(info(n), { n });
    first.release();
    const second = new DispatchEvents(8, true, pool);
    for (let n = 1; n <= 3; n++) second.add(info(n), { second: n });
    expect([...second.kept()].map((e) => [e.count, e.extra])).toEqual([
      [1, { second: 1 }],
      [2, { second: 2 }],
      [3, { second: 3 }],
    ]);
  });

  it('keeps no user attributes alive in a spare, and ignores what comes after release', () => {
    const pool = new StoragePool(1);
    const events = new DispatchEvents(4, true, pool);
    const secret = { 'user.secret': 'x' };
    events.add(info(1), secret);
    events.release();
    events.add(info(2), secret);
    expect([...events.kept()]).toEqual([]);
    const storage = pool.take();
    expect(storage.extras).toEqual([undefined]);
    expect(storage.numbers.slice(0, 4)).toEqual([1, 10, 1, 1]);
  });
});
