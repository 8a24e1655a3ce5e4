import { describe, expect, it } from 'vitest';
import { History, MessageQueue } from '../../src/core/loop/queue.ts';

describe('MessageQueue', () => {
  it('is FIFO across growth and wrap-around', () => {
    const q = new MessageQueue<number>(4);
    const out: number[] = [];
    for (let i = 0; i < 3; i++) q.push(i);
    out.push(q.shift(), q.shift());
    for (let i = 3; i < 20; i++) q.push(i);
    while (q.length > 0) out.push(q.shift());
    expect(out).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});

describe('History', () => {
  it('keeps the last `size` items, oldest first', () => {
    const h = new History<number>(3);
    for (let i = 1; i <= 7; i++) h.push(i);
    expect(h.toArray()).toEqual([5, 6, 7]);
  });
});
