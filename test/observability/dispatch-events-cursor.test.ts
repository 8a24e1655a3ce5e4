// The kept-dispatch cursor: every capacity against a reference model,
// lengths around head / capacity boundaries, limits, pooled storage reused, release then add.
import { describe, expect, it } from 'vitest';
import { CONTINUE } from '../../src/index.ts';
import { DispatchEvents, StoragePool } from '../../src/observability/dispatch-events.ts';
import { continuedDispatch } from '../helpers/dispatch-info.ts';

const info = (n: number) => continuedDispatch(n, n / 7);

/** What should be kept of dispatches 1..total: the first head, the last (capacity - head). */
function model(capacity: number, total: number, limit: number): number[] {
  const head = Math.ceil(capacity / 2);
  const all = Array.from({ length: total }, (_, i) => i + 1);
  const kept =
    total <= capacity ? all : [...all.slice(0, head), ...all.slice(total - (capacity - head))];
  if (kept.length <= limit) return kept;
  const first = Math.ceil(limit / 2);
  return [...kept.slice(0, first), ...kept.slice(kept.length - (limit - first))];
}

const capacities = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 127, 128, 129];

describe('DispatchEvents against a model', () => {
  it.each(capacities)(
    'capacity %i: every length to 3x+2, limits capacity and capacity-1',
    (capacity) => {
      const pool = new StoragePool(1);
      const lengths = new Set<number>();
      for (let t = 0; t <= Math.min(3 * capacity + 2, 60); t++) lengths.add(t);
      for (const t of [capacity - 1, capacity, capacity + 1, 2 * capacity, 5 * capacity + 3, 1000])
        if (t >= 0) lengths.add(t);
      for (const total of lengths) {
        for (const limit of [capacity, capacity - 1, 1, 0]) {
          // pooled storage: the previous conversation's slots are still there
          const events = new DispatchEvents(capacity, true, pool);
          for (let n = 1; n <= total; n++) events.add(info(n), { n });
          const counts: number[] = [];
          const extras: unknown[] = [];
          const written = events.forEachKept(
            limit,
            (count, elapsed, duration, responder, decision, extra) => {
              counts.push(count);
              expect(elapsed).toBe(count * 10);
              expect(duration).toBe(count / 7);
              expect(responder).toBe(count % 3);
              expect(decision).toBe(CONTINUE);
              extras.push(extra?.n);
            },
          );
          const want = model(capacity, total, limit);
          expect({ capacity, total, limit, counts }).toEqual({
            capacity,
            total,
            limit,
            counts: want,
          });
          expect(extras).toEqual(want);
          expect(written).toBe(want.length);
          // the span's invariant: written + dropped attribute = dispatches
          expect(written + Math.max(0, total - written)).toBe(total);
          expect(events.total).toBe(total);
          events.release();
          // release then add: nothing is written into storage the pool handed on, nothing counted
          const next = new DispatchEvents(capacity, true, pool);
          events.add(info(999), { n: 999 });
          expect(events.total).toBe(total);
          expect(events.forEachKept(limit, () => {})).toBe(0);
          next.add(info(1), { n: 1 });
          expect([...next.kept()].map((e) => e.count)).toEqual([1]);
          next.release();
        }
      }
    },
  );
});
