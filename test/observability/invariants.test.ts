/**
 * Nothing is lost, on every path: on every ending, kept dispatch events +
 * `conversation.dispatch_events.dropped` = the dispatch count the result or error reports, the SDK
 * itself drops no event, and no SDK diagnostic is logged.
 */
import type { InMemorySpanExporter, ReadableSpan } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CONTINUE,
  ConversationError,
  type ConversationObserver,
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import {
  captureDiag,
  dispatchCounts,
  memoryTracing,
  range,
  restoreTracing,
  spansNamed,
} from '../helpers/tracing.ts';

afterEach(restoreTracing);

type Options = Partial<OrchestratorOptions<number, number>>;

const step = (m: Message<number>) => ({ sender: 'r', content: m.content + 1 });

/** How each ending is produced, for a conversation whose ending comes after `n` dispatches. */
const endings: Record<string, (n: number, signal: AbortController) => Options> = {
  terminated: (n) => ({ termination: maxDispatches(n) }),
  queue_exhausted: (n) => ({
    // The n-th answer is nothing: still a dispatch, and then the queue is dry.
    responders: [{ name: 'r', respond: (m) => (m.content < n - 1 ? step(m) : undefined) }],
    termination: maxDispatches(1e9),
  }),
  'responder error': (n) => ({
    responders: [
      {
        name: 'r',
        respond: (m) => {
          if (m.content === n) throw new Error('model down');
          return step(m);
        },
      },
    ],
    termination: maxDispatches(1e9),
  }),
  aborted: (n, controller) => ({
    termination: maxDispatches(1e9),
    listener: (_s, _d, count) => {
      if (count === n) controller.abort();
    },
  }),
  deadline: (n) => ({
    responders: [
      {
        name: 'r',
        respond: (m) => (m.content === n ? new Promise<never>(() => {}) : step(m)),
      },
    ],
    dispatchTimeoutMs: 20,
    termination: maxDispatches(1e9),
  }),
};

/** The dispatch counts kept on a span: all, or the first and last halves of the room left. */
function expectedKept(dispatches: number, room: number): number[] {
  if (dispatches <= room) return range(1, dispatches);
  const first = Math.ceil(room / 2);
  return [...range(1, first), ...range(dispatches - (room - first) + 1, dispatches)];
}

async function runWith(options: Options, controller: AbortController) {
  const o = new ConversationOrchestrator<number, number>({
    name: 'lossless',
    responders: [{ name: 'r', respond: step }],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination: maxDispatches(5),
    ...options,
  });
  try {
    const result = await o.run({ sender: 'user', content: 0 }, { signal: controller.signal });
    return { dispatchCount: result.dispatchCount, failed: false };
  } catch (error) {
    expect(error).toBeInstanceOf(ConversationError);
    const e = error as ConversationError;
    return { dispatchCount: e.dispatchCount, failed: e.reason !== 'aborted' };
  }
}

/**
 * Runs the conversation `make` ends after `n` dispatches with `telemetry`, and checks that nothing
 * was lost: every reported dispatch is kept or counted as dropped (a failure's exception event is
 * written after the dispatch events, so one less is kept), the SDK dropped nothing, and no SDK
 * diagnostic was logged. Answers the conversation span.
 */
async function expectLossless(
  make: (n: number, controller: AbortController) => Options,
  n: number,
  telemetry: ConversationObserver<number, number>,
  exporter: InMemorySpanExporter,
  cap: number,
  diagnostics: string[],
): Promise<ReadableSpan | undefined> {
  const controller = new AbortController();
  const { dispatchCount, failed } = await runWith(
    { ...make(n, controller), observers: [telemetry] },
    controller,
  );
  expect(dispatchCount).toBe(n);
  const [span] = spansNamed(exporter, 'invoke_workflow lossless');
  const kept = dispatchCounts(span);
  expect({ n, kept }).toEqual({ n, kept: expectedKept(n, failed ? cap - 1 : cap) });
  expect(kept.length + (span?.attributes['conversation.dispatch_events.dropped'] as number)).toBe(
    dispatchCount,
  );
  expect(span?.events.filter((e) => e.name === 'exception')).toHaveLength(failed ? 1 : 0);
  expect(span?.droppedEventsCount).toBe(0);
  expect(diagnostics).toEqual([]);
  return span;
}

describe.each([
  { limits: 'default limits', maxDispatchEvents: undefined, eventCountLimit: undefined, cap: 128 },
  { limits: 'raised limits (256)', maxDispatchEvents: 256, eventCountLimit: 256, cap: 256 },
])(
  'every ending keeps or counts every dispatch, with $limits',
  ({ maxDispatchEvents, eventCountLimit, cap }) => {
    const lengths = [3, cap - 1, cap, cap + 1, 2 * cap + 44];
    for (const [ending, make] of Object.entries(endings)) {
      it.each(lengths)(`${ending} after %i dispatches`, async (n) => {
        const diagnostics = captureDiag();
        const { exporter, tracer } = memoryTracing(
          eventCountLimit === undefined ? undefined : { eventCountLimit },
        );
        const telemetry = createConversationTelemetry<number, number>({
          tracer,
          ...(maxDispatchEvents === undefined ? {} : { maxDispatchEvents }),
        });
        await expectLossless(make, n, telemetry, exporter, cap, diagnostics);
      });
    }

    it.each([3, cap + 72])('a termination policy that throws after %i dispatches', async (n) => {
      const diagnostics = captureDiag();
      const { exporter, tracer } = memoryTracing(
        eventCountLimit === undefined ? undefined : { eventCountLimit },
      );
      const controller = new AbortController();
      const { dispatchCount, failed } = await runWith(
        {
          termination: {
            name: 'flaky',
            start: () => (state) => {
              if (state.dispatchCount === n + 1) throw new Error('policy bug');
              return CONTINUE;
            },
          },
          observers: [
            createConversationTelemetry<number, number>({
              tracer,
              ...(maxDispatchEvents === undefined ? {} : { maxDispatchEvents }),
            }),
          ],
        },
        controller,
      );
      // The dispatch whose check threw is not counted: the error reports the n before it.
      expect(failed).toBe(true);
      expect(dispatchCount).toBe(n);
      const [span] = spansNamed(exporter, 'invoke_workflow lossless');
      const kept = dispatchCounts(span);
      expect(kept).toEqual(expectedKept(n, cap - 1));
      expect(
        kept.length + (span?.attributes['conversation.dispatch_events.dropped'] as number),
      ).toBe(dispatchCount);
      expect(span?.attributes['error.type']).toBe('PolicyError');
      expect(span?.droppedEventsCount).toBe(0);
      expect(diagnostics).toEqual([]);
    });
  },
);

describe('endings before the first dispatch', () => {
  it.each([
    ['an already aborted signal', 'aborted', 0] as const,
    ['a projection whose initial() throws', 'error', 1] as const,
  ])('%s: an empty span, nothing dropped, the SDK quiet', async (_label, reason, exceptions) => {
    const diagnostics = captureDiag();
    const { exporter, tracer } = memoryTracing();
    const controller = new AbortController();
    if (reason === 'aborted') controller.abort();
    const { dispatchCount } = await runWith(
      {
        observers: [createConversationTelemetry<number, number>({ tracer })],
        ...(reason === 'error'
          ? {
              projection: {
                initial: () => {
                  throw new Error('no state');
                },
                fold: (s: number) => s,
              },
            }
          : {}),
      },
      controller,
    );
    expect(dispatchCount).toBe(0);
    const [span] = spansNamed(exporter, 'invoke_workflow lossless');
    expect(span?.attributes['conversation.end.reason']).toBe(reason);
    expect(dispatchCounts(span)).toEqual([]);
    expect(span?.attributes['conversation.dispatch_events.dropped']).toBe(0);
    expect(span?.events.filter((e) => e.name === 'exception')).toHaveLength(exceptions);
    expect(diagnostics).toEqual([]);
  });
});

/** The plugin's three ways of keeping a dispatch (its onDispatch variants). */
const keeping = {
  'span events only': {},
  'with a registry': { registry: true },
  'with state attributes': { stateAttributes: true },
} as const;

describe.each([1, 2, 3, 4, 5])(
  'with maxDispatchEvents %i (the kept-dispatch ring at its edges)',
  (cap) => {
    for (const [ending, make] of Object.entries(endings)) {
      for (const [how, extra] of Object.entries(keeping)) {
        it(`${ending}, ${how}, at every length up to ${2 * cap + 3}`, async () => {
          for (let n = 1; n <= 2 * cap + 3; n++) {
            restoreTracing();
            const diagnostics = captureDiag();
            const { exporter, tracer } = memoryTracing({ eventCountLimit: cap });
            const telemetry = createConversationTelemetry<number, number>({
              tracer,
              maxDispatchEvents: cap,
              ...('registry' in extra ? { registry: new Registry() } : {}),
              ...('stateAttributes' in extra
                ? { stateAttributes: (s: { dispatchCount: number }) => ({ at: s.dispatchCount }) }
                : {}),
            });
            const span = await expectLossless(make, n, telemetry, exporter, cap, diagnostics);
            if ('stateAttributes' in extra) {
              for (const event of span?.events ?? []) {
                if (event.name !== 'conversation.dispatch') continue;
                expect(event.attributes?.at).toBe(
                  event.attributes?.['conversation.dispatch.count'],
                );
              }
            }
          }
        });
      }
    }
  },
);
