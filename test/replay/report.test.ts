/**
 * What the report says about conversations a candidate could not measure, and where the HTML
 * chart puts conversations that ended without a decision or where the candidate failed.
 */
import { describe, expect, it } from 'vitest';
import { anyOf, converged, maxDispatches, type TerminationPolicy } from '../../src/index.ts';
import {
  formatReport,
  type RecordedConversation,
  renderReportHtml,
  replay,
} from '../../src/replay/index.ts';

type Spread = { spread: number };

function conversation(
  id: string,
  spreads: number[],
  ending: { reason: string; policy?: string; error?: string } = {
    reason: 'converged',
    policy: 'converged',
  },
): RecordedConversation {
  return {
    version: 1,
    conversationId: id,
    orchestrator: 'desks',
    startTimeMs: 0,
    ending: { ...ending, dispatchCount: spreads.length, elapsedMs: spreads.length },
    dispatches: spreads.map((spread, i) => ({
      n: i + 1,
      elapsedMs: i + 1,
      responder: 'a',
      queueDepth: 1,
      record: { spread },
    })),
  };
}

const recordings = [
  conversation('calm', [4, 2, 1, 0.01]),
  conversation('slow', [9, 8, 7, 6, 5, 0.01]),
  conversation('broken', [9, 8, 7], { reason: 'error', error: 'ResponderError' }),
];

const misspelled = anyOf(
  converged<Spread, undefined>({
    // `sprd` for `spread`: undefined on every dispatch.
    measure: (s) => (s.projection as unknown as { sprd: number }).sprd,
    tolerance: 0.05,
  }),
  maxDispatches(400),
) as TerminationPolicy<unknown, undefined>;
const spelled = anyOf(
  converged<Spread, undefined>({ measure: (s) => s.projection.spread, tolerance: 0.05 }),
  maxDispatches(400),
) as TerminationPolicy<unknown, undefined>;

describe('a candidate that measures a field the recording does not have', () => {
  it('counts those conversations and names the field, in the report (and so the JSON)', async () => {
    const report = await replay(recordings, misspelled);
    expect(report.unmeasured).toEqual({ count: 3, fields: ['projection.sprd'] });
    expect([report.earlier, report.same, report.later]).toEqual([0, 1, 2]);
    expect(JSON.parse(JSON.stringify(report)).unmeasured).toEqual({
      count: 3,
      fields: ['projection.sprd'],
    });
  });

  it('warns in the summary and on the HTML page', async () => {
    const report = await replay(recordings, misspelled);
    const warning =
      'on 3 of 3 conversations (100.0%) the candidate read a field the recording does not have at every dispatch (projection.sprd): what it measured was undefined throughout, so its verdict on them says nothing. A misspelled field, or one record(state) did not keep?';
    expect(formatReport(report)).toContain(`\nwarning: ${warning}\n`);
    expect(renderReportHtml(report)).toContain(
      `<p class="warning" id="unmeasured"><strong>Warning:</strong> ${warning}</p>`,
    );
  });

  it('says nothing when the field is there', async () => {
    const report = await replay(recordings, spelled);
    expect(report.unmeasured).toEqual({ count: 0, fields: [] });
    expect(formatReport(report)).not.toContain('warning:');
    expect(renderReportHtml(report)).not.toContain('id="unmeasured"');
  });

  it('does not count a conversation where the missing field was read on some dispatches only', async () => {
    const sometimes = {
      name: 'sometimes',
      start: () => (s: { dispatchCount: number; projection: Record<string, number> }) => ({
        terminate: false,
        reason: 'continue',
        observed: s.dispatchCount === 1 ? s.projection.other : s.projection.spread,
      }),
    } as unknown as TerminationPolicy<unknown, undefined>;
    const report = await replay([recordings[0] as RecordedConversation], sometimes);
    expect(report.unmeasured).toEqual({ count: 0, fields: [] });
  });
});

/** The circles and crosses of the chart, by their placement, with their coordinates. */
function marks(html: string): { placement: string; comparison: string; x: number; y: number }[] {
  const found: { placement: string; comparison: string; x: number; y: number }[] = [];
  for (const m of html.matchAll(
    /<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*data-comparison="(\w+)" data-placement="(\w+)"/g,
  )) {
    found.push({
      x: Number(m[1]),
      y: Number(m[2]),
      comparison: m[3] as string,
      placement: m[4] as string,
    });
  }
  for (const m of html.matchAll(
    /<path d="M([\d.]+) ([\d.]+)l6 6m0 -6l-6 6"[^>]*data-comparison="(\w+)" data-placement="(\w+)"/g,
  )) {
    found.push({
      x: Number(m[1]) + 3,
      y: Number(m[2]) + 3,
      comparison: m[3] as string,
      placement: m[4] as string,
    });
  }
  return found;
}

describe('the HTML chart places every conversation truthfully', () => {
  it('draws an ending that comes anyway (an error) on the diagonal, not on the "ran past" line, and a failed candidate on a line of its own', async () => {
    const failing = {
      name: 'fails_on_slow',
      start: () => (s: { conversationId: string; dispatchCount: number }) => {
        if (s.conversationId === 'slow') throw new Error('no');
        return { terminate: s.dispatchCount >= 9, reason: 'enough' };
      },
    } as unknown as TerminationPolicy<unknown, undefined>;
    const report = await replay(recordings, failing);
    const html = renderReportHtml(report);
    const diagonal =
      /<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)" class="diagonal"\/>/
        .exec(html)
        ?.slice(1)
        .map(Number) as [number, number, number, number];
    const top =
      Number(
        /<text x="[\d.]+" y="([\d.]+)" class="label">ran past where the recorded policy stopped</.exec(
          html,
        )?.[1],
      ) + 4;
    const bottom =
      Number(/<text x="[\d.]+" y="([\d.]+)" class="label">the candidate failed</.exec(html)?.[1]) -
      16;
    const byPlacement = Object.fromEntries(marks(html).map((m) => [m.placement, m]));
    expect(Object.keys(byPlacement).sort()).toEqual(['ended_anyway', 'failed', 'ran_past']);
    // calm: the recorded policy stopped it, the candidate ran past: the top line, later.
    expect(byPlacement.ran_past).toMatchObject({ comparison: 'later', y: top });
    // broken: ended by an error, as it would have with the candidate: on the diagonal, same.
    const anyway = byPlacement.ended_anyway as { x: number; y: number; comparison: string };
    expect(anyway.comparison).toBe('same');
    const [x1, y1, x2, y2] = diagonal;
    const onDiagonal = y1 + ((anyway.x - x1) * (y2 - y1)) / (x2 - x1);
    expect(Math.abs(anyway.y - onDiagonal)).toBeLessThan(0.1);
    expect(anyway.y).not.toBe(top);
    // slow: the candidate failed: the bottom line, unknown.
    expect(byPlacement.failed).toMatchObject({ comparison: 'unknown', y: bottom });
    expect(html).toContain('rings on the diagonal are conversations that ended without a decision');
    expect(html).not.toContain('points on the top line ran past the recording.');
  });
});
