import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  anyOf,
  converged,
  maxDispatches,
  type TerminationPolicy,
  timeout,
} from '../../src/index.ts';
import {
  type RecordedConversation,
  type RecordedDispatch,
  RecordingFormatError,
  type ReplayedState,
  readRecordings,
  replay,
  replayConversation,
} from '../../src/replay/index.ts';

/** A recorded conversation whose dispatch n has `record: { spread: spreads[n-1] }`. */
function recording(
  id: string,
  spreads: readonly number[],
  ending: {
    [K in keyof RecordedConversation['ending']]?: RecordedConversation['ending'][K] | undefined;
  } = {},
  extra: Partial<RecordedConversation> = {},
): RecordedConversation {
  const dispatches: RecordedDispatch[] = spreads.map((spread, i) => ({
    n: i + 1,
    elapsedMs: 10 * (i + 1),
    responder: i % 2 === 0 ? 'a' : 'b',
    queueDepth: 1,
    tokens: { inputTokens: 100, outputTokens: 10 },
    record: { spread },
  }));
  // Through JSON, as a recording is read: fields given as undefined are left out.
  return JSON.parse(
    JSON.stringify({
      version: 1,
      conversationId: id,
      orchestrator: 'desks',
      startTimeMs: 1_700_000_000_000,
      ending: {
        reason: 'converged',
        policy: 'converged',
        dispatchCount: spreads.length,
        elapsedMs: 10 * spreads.length,
        ...ending,
      },
      usage: { inputTokens: 100 * spreads.length, outputTokens: 10 * spreads.length },
      dispatches,
      ...extra,
    }),
  ) as RecordedConversation;
}

type Spread = { spread: number };
const within = (tolerance: number, consecutive = 1): TerminationPolicy<Spread, undefined> =>
  converged<Spread, undefined>({ measure: (s) => s.projection.spread, tolerance, consecutive });

/** A policy that never stops, handing each state and elapsed time it is shown to `seen`. */
function spy(
  seen: (state: ReplayedState, elapsedMs: number) => void,
): TerminationPolicy<unknown, undefined> {
  return {
    name: 'spy',
    start: () => (state, elapsedMs) => {
      seen(state as ReplayedState, elapsedMs);
      return { terminate: false, reason: 'continue' };
    },
  };
}

/** The state replayConversation shows at dispatch `dispatchCount` of conversation c1 (no history). */
function shownState(
  dispatchCount: number,
  spread: number,
  sender: string,
  queueDepth: number,
  usage: ReplayedState['usage'],
): ReplayedState<unknown> {
  return {
    conversationId: 'c1',
    projection: { spread },
    lastMessage: { sender, content: undefined },
    queueDepth,
    dispatchCount,
    history: [],
    usage,
  };
}

describe('replayConversation', () => {
  it('rebuilds the state each dispatch would have shown the policy, as documented', () => {
    const seen: { state: ReplayedState<unknown>; elapsedMs: number }[] = [];
    const r = recording('c1', [5, 3]);
    const line: RecordedConversation = {
      ...r,
      dispatches: [
        { ...(r.dispatches[0] as RecordedDispatch), sender: 'desk_a' },
        {
          ...(r.dispatches[1] as RecordedDispatch),
          queueDepth: 4,
          tokens: { inputTokens: 7, outputTokens: 1, cacheReadInputTokens: 3 },
        },
      ],
    };
    replayConversation(
      line,
      spy((state, elapsedMs) => seen.push({ state, elapsedMs })),
    );
    expect(seen).toEqual([
      {
        elapsedMs: 10,
        state: shownState(1, 5, 'desk_a', 1, { inputTokens: 100, outputTokens: 10 }),
      },
      {
        elapsedMs: 20,
        state: shownState(2, 3, 'b', 4, {
          inputTokens: 107,
          outputTokens: 11,
          cacheReadInputTokens: 3,
        }),
      },
    ]);
  });

  it('takes a dispatch’s recorded usage totals over the running sum (tokens reported in between)', () => {
    const totals: unknown[] = [];
    const r = recording('c', [1, 1, 1]);
    const dispatches = r.dispatches.map((d, i) =>
      i === 1 ? { ...d, usage: { inputTokens: 500, outputTokens: 50 } } : d,
    );
    replayConversation(
      { ...r, dispatches },
      spy((state) => totals.push(state.usage)),
    );
    expect(totals).toEqual([
      { inputTokens: 100, outputTokens: 10 },
      { inputTokens: 500, outputTokens: 50 },
      { inputTokens: 600, outputTokens: 60 },
    ]);
  });

  it('says where a candidate stops earlier and what that saves', () => {
    const r = replayConversation(recording('c', [9, 5, 0.5, 0.2, 0.001]), within(1));
    expect(r.candidate).toEqual({
      outcome: 'stopped',
      dispatchCount: 3,
      reason: 'converged',
      policy: 'converged',
      elapsedMs: 30,
      observed: 0.5,
      limit: 1,
    });
    expect(r.comparison).toBe('earlier');
    expect(r.saved).toEqual({ dispatches: 2, tokens: 220, timeMs: 20 });
  });

  it('reports a candidate that never stops as later when the recorded policy stopped, the same when the loop ended it', () => {
    const never = within(0);
    expect(replayConversation(recording('c', [1, 1]), never).comparison).toBe('later');
    expect(
      replayConversation(
        recording('c', [1, 1], { reason: 'queue_exhausted', policy: undefined }),
        never,
      ).comparison,
    ).toBe('same');
    expect(
      replayConversation(
        recording('c', [1, 1], { reason: 'error', error: 'ResponderError' }),
        never,
      ).candidate,
    ).toEqual({ outcome: 'ran_past' });
    expect(
      replayConversation(recording('c', [1, 1], { dispatchCount: 9 }, { truncated: true }), never)
        .comparison,
    ).toBe('unknown');
  });

  it('reports a candidate that throws or answers what is not a decision as failed, at that dispatch', () => {
    const throws: TerminationPolicy<unknown, undefined> = {
      name: 'throws',
      start: () => (state) => {
        if (state.dispatchCount === 2) throw new Error('no spread');
        return { terminate: false, reason: 'continue' };
      },
    };
    expect(replayConversation(recording('c', [1, 1, 1]), throws).candidate).toEqual({
      outcome: 'failed',
      dispatchCount: 2,
      error: 'Error: no spread',
    });
    const bad = { name: 'bad', start: () => () => true } as unknown as TerminationPolicy<
      unknown,
      undefined
    >;
    const r = replayConversation(recording('c', [1]), bad);
    expect(r.candidate).toMatchObject({ outcome: 'failed', dispatchCount: 1 });
    expect(r.comparison).toBe('unknown');
  });
});

describe('replay', () => {
  const recordings = [
    recording('calm', [4, 2, 0.5, 0.1, 0.005]), // recorded converged at 5 (tolerance 0.01)
    recording('slow', [9, 8, 7, 6, 5, 4, 3, 2, 1, 0.009]), // converged at 10
    recording('capped', [9, 9, 9], { reason: 'max_dispatches', policy: 'max_dispatches' }),
    recording('exhausted', [3, 3], { reason: 'queue_exhausted', policy: undefined }),
  ];

  it('sums up a looser tolerance: earlier, same, later or unknown, savings and the lists', async () => {
    const report = await replay(recordings, anyOf(within(1), maxDispatches(3)));
    expect(report).toMatchObject({
      policy: 'any_of(converged,max_dispatches)',
      conversations: 4,
      earlier: 2,
      same: 2,
      later: 0,
      unknown: 0,
      truncated: 0,
      skippedLines: 0,
      dispatchesWithoutRecord: 0,
    });
    // calm stops at 3 (0.5 <= 1): saves 2; slow stops at 3 by max_dispatches: saves 7.
    expect(report.dispatches).toEqual({ recorded: 20, saved: 9, share: 9 / 20 });
    expect(report.tokens).toEqual({ recorded: 2200, saved: 990, share: 990 / 2200 });
    expect(report.timeMs).toEqual({ recorded: 200, saved: 90, share: 90 / 200 });
    expect(report.risk).toEqual({
      count: 1,
      conversations: [
        {
          conversationId: 'slow',
          orchestrator: 'desks',
          recorded: { dispatchCount: 10, reason: 'converged' },
          candidate: {
            outcome: 'stopped',
            dispatchCount: 3,
            reason: 'max_dispatches',
            policy: 'max_dispatches',
            elapsedMs: 30,
            observed: 3,
            limit: 3,
          },
        },
      ],
    });
    expect(report.convergedEarlier.count).toBe(1);
    expect(report.convergedEarlier.conversations[0]?.conversationId).toBe('calm');
    expect(
      report.chart.map((p) => [p.conversationId, p.recorded, p.candidate, p.comparison]),
    ).toEqual([
      ['calm', 5, 3, 'earlier'],
      ['slow', 10, 3, 'earlier'],
      ['capped', 3, 3, 'same'],
      ['exhausted', 2, null, 'same'],
    ]);
  });

  it('reads a path, an array of lines and an async iterable alike', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'replay-'));
    const path = join(dir, 'r.ndjson');
    writeFileSync(path, `${recordings.map((r) => JSON.stringify(r)).join('\n')}\n`);
    async function* lines() {
      for (const r of recordings) yield JSON.stringify(r);
    }
    const policy = within(1);
    const fromArray = await replay(recordings, policy);
    expect(await replay(path, policy)).toEqual(fromArray);
    expect(await replay(lines(), policy)).toEqual(fromArray);
    expect(
      await replay(
        recordings.map((r) => JSON.stringify(r)),
        policy,
      ),
    ).toEqual(fromArray);
  });

  it('stops at a line cut short with its file and line number, or counts and skips it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'replay-'));
    const path = join(dir, 'cut.ndjson');
    const whole = recordings.map((r) => JSON.stringify(r));
    writeFileSync(path, `${whole[0]}\n${whole[1]}\n${(whole[2] as string).slice(0, 40)}`);
    const error = await replay(path, within(1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordingFormatError);
    expect((error as RecordingFormatError).message).toMatch(
      new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:3: not JSON`),
    );
    expect((error as RecordingFormatError).line).toBe(3);
    const skipped: string[] = [];
    const report = await replay(path, within(1), {
      skipBad: true,
      onBadLine: (e) => skipped.push(`${e.line}`),
    });
    expect(report.conversations).toBe(2);
    expect(report.skippedLines).toBe(1);
    expect(skipped).toEqual(['3']);
  });

  it('refuses a line that is JSON but not a recorded conversation, saying what is wrong', async () => {
    const first = recordings[0] as RecordedConversation;
    const bad = {
      ...first,
      ending: { ...first.ending, dispatchCount: 1 },
      dispatches: [{ n: 2, elapsedMs: 1, responder: 'a', queueDepth: 0 }],
    };
    await expect(
      replay([recordings[0] as RecordedConversation, bad as never], within(1)),
    ).rejects.toThrow('<input>:2: not a recorded conversation: dispatches[0].n is 2, expected 1');
    await expect(replay([{ ...recordings[0], version: 2 } as never], within(1))).rejects.toThrow(
      'version is 2, expected 1',
    );
  });

  it('refuses a candidate that is not a termination policy', async () => {
    await expect(replay(recordings, within as never)).rejects.toThrow(
      'Expected `replay(recordings, termination)` to be a termination policy ({ name, start() })',
    );
  });

  it('lists at most maxListed conversations and counts the rest', async () => {
    const many = Array.from({ length: 30 }, (_, i) => recording(`r${i}`, [5, 5, 5, 0.001]));
    const report = await replay(many, maxDispatches(1), { maxListed: 5, chartSize: 10 });
    expect(report.risk.count).toBe(30);
    expect(report.risk.conversations).toHaveLength(5);
    expect(report.chart).toHaveLength(10);
    // The sample is seeded: the same input charts the same conversations.
    const again = await replay(many, maxDispatches(1), { maxListed: 5, chartSize: 10 });
    expect(again.chart).toEqual(report.chart);
  });

  it('replays a timeout against the recorded, unrounded elapsed times', async () => {
    const report = await replay(recordings, timeout(25));
    expect(report.chart.map((p) => p.candidate)).toEqual([3, 3, 3, null]);
  });
});

describe('readRecordings', () => {
  it('names a missing file', async () => {
    const read = async () => {
      for await (const _ of readRecordings('/nonexistent/r.ndjson')) {
        // nothing
      }
    };
    await expect(read()).rejects.toThrow(/ENOENT.*\/nonexistent\/r\.ndjson/);
  });
});
