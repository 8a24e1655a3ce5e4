/**
 * The workload's pace (service/desks/pace.ts), on a fake clock: `rate` starts per second while
 * there is room, none once stopping, and no burst to make up for a stall.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { paceStarts } from '../../service/desks/pace.ts';

let timer: NodeJS.Timeout | undefined;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
});
afterEach(() => {
  clearInterval(timer);
  vi.useRealTimers();
});

/**
 * Paces starts at `rate` a second (the timer cleared after the test), with room while `room`
 * says so of the starts so far and stopping once `stopping` says so; `started` counts the starts.
 */
function pace(
  rate: number,
  room: (started: number) => boolean = () => true,
  stopping: () => boolean = () => false,
): { readonly started: number } {
  const count = { started: 0 };
  timer = paceStarts({
    rate,
    start: () => count.started++,
    room: () => room(count.started),
    stopping,
  });
  return count;
}

describe('the pace of starts', () => {
  it('starts `rate` per second while there is room, and none while there is not or once stopping', () => {
    let room = true;
    let stopping = false;
    const starts = pace(
      40,
      () => room,
      () => stopping,
    );
    vi.advanceTimersByTime(1_000);
    // Due at 0, 25, …, 1,000 ms: 41 starts in the first second's ticks, then 40 a second.
    expect(starts.started).toBe(41);
    vi.advanceTimersByTime(1_000);
    expect(starts.started).toBe(81);
    // No room: the starts due meanwhile are skipped, not queued.
    room = false;
    vi.advanceTimersByTime(1_000);
    expect(starts.started).toBe(81);
    room = true;
    vi.advanceTimersByTime(500);
    expect(starts.started).toBe(101);
    stopping = true;
    vi.advanceTimersByTime(1_000);
    expect(starts.started).toBe(101);
  });

  it('ticks every 50 ms at most (more often at high rates), and never past the room it is given', () => {
    const starts = pace(2);
    vi.advanceTimersByTime(49);
    expect(starts.started).toBe(0);
    vi.advanceTimersByTime(1);
    expect(starts.started).toBe(1);
    vi.advanceTimersByTime(1_950);
    expect(starts.started).toBe(5);
    clearInterval(timer);

    // 1,000 a second: a tick every millisecond, bounded by the room (3 in flight at most).
    const inFlight = pace(1_000, (started) => started < 3);
    vi.advanceTimersByTime(1);
    expect(inFlight.started).toBe(2);
    vi.advanceTimersByTime(5_000);
    expect(inFlight.started).toBe(3);
  });
});
