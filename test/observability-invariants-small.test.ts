// Kept events + conversation.dispatch_events.dropped = dispatchCount on every
// ending, with small maxDispatchEvents (1, 2, 3, 4, 5) the ring cursor handles at its edges, on
// each onDispatch variant (keep only, with a registry, with extras), and the SDK drops nothing.
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConversationError,
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  roundRobin,
} from '../src/index.ts';
import { createConversationTelemetry } from '../src/observability/index.ts';
import {
  captureDiag,
  dispatchCounts,
  memoryTracing,
  range,
  restoreTracing,
  spansNamed,
} from './helpers/tracing.ts';

afterEach(restoreTracing);

type Options = Partial<OrchestratorOptions<number, number>>;
const step = (m: Message<number>) => ({ sender: 'r', content: m.content + 1 });

const endings: Record<string, (n: number, c: AbortController) => Options> = {
  terminated: (n) => ({ termination: maxDispatches(Math.max(1, n)) }),
  'responder error': (n) => ({
    responders: [
      {
        name: 'r',
        respond: (m) => {
          if (m.content === n) throw new Error('down');
          return step(m);
        },
      },
    ],
    termination: maxDispatches(1e9),
  }),
  aborted: (n, c) => ({
    responders: [
      {
        name: 'r',
        respond: (m) => {
          if (m.content === n) c.abort();
          return step(m);
        },
      },
    ],
    termination: maxDispatches(1e9),
  }),
  deadline: (n) => ({
    responders: [
      { name: 'r', respond: (m) => (m.content === n ? new Promise<never>(() => {}) : step(m)) },
    ],
    dispatchTimeoutMs: 10,
    termination: maxDispatches(1e9),
  }),
};

function expectedKept(dispatches: number, capacity: number, room: number): number[] {
  const head = Math.ceil(capacity / 2);
  const kept =
    dispatches <= capacity
      ? range(1, dispatches)
      : [...range(1, head), ...range(dispatches - (capacity - head) + 1, dispatches)];
  if (kept.length <= room) return kept;
  const first = Math.ceil(room / 2);
  return [...kept.slice(0, first), ...kept.slice(kept.length - (room - first))];
}

const variants = {
  keep: {},
  registry: { registry: 'new' },
  extras: { stateAttributes: (s: { dispatchCount: number }) => ({ at: s.dispatchCount }) },
} as const;

describe.each([1, 2, 3, 4, 5])('maxDispatchEvents %i', (cap) => {
  for (const [ending, make] of Object.entries(endings)) {
    for (const [variant, extra] of Object.entries(variants)) {
      it(`${ending}, ${variant}, every length 0..${2 * cap + 3}`, async () => {
        for (let n = ending === 'terminated' ? 1 : 0; n <= 2 * cap + 3; n++) {
          restoreTracing();
          const diagnostics = captureDiag();
          const { exporter, tracer } = memoryTracing({ eventCountLimit: cap });
          const telemetry = createConversationTelemetry<number, number>({
            tracer,
            maxDispatchEvents: cap,
            ...('registry' in extra ? { registry: new Registry() } : {}),
            ...('stateAttributes' in extra ? { stateAttributes: extra.stateAttributes } : {}),
          });
          const c = new AbortController();
          const o = new ConversationOrchestrator<number, number>({
            name: 'small',
            responders: [{ name: 'r', respond: step }],
            turnPolicy: roundRobin(),
            projection: { initial: () => 0, fold: (s, m) => s + m.content },
            termination: maxDispatches(5),
            ...make(n, c),
            observers: [telemetry],
          });
          let dispatchCount: number;
          let failed = false;
          try {
            dispatchCount = (await o.run({ sender: 'u', content: 0 }, { signal: c.signal }))
              .dispatchCount;
          } catch (e) {
            expect(e).toBeInstanceOf(ConversationError);
            dispatchCount = (e as ConversationError).dispatchCount;
            failed = (e as ConversationError).reason !== 'aborted';
          }
          expect(dispatchCount).toBe(n);
          const [span] = spansNamed(exporter, 'invoke_workflow small');
          const kept = dispatchCounts(span);
          expect({ n, kept }).toEqual({ n, kept: expectedKept(n, cap, failed ? cap - 1 : cap) });
          if ('stateAttributes' in extra)
            for (const e of span?.events.filter((x) => x.name === 'conversation.dispatch') ?? [])
              expect(e.attributes?.at).toBe(e.attributes?.['conversation.dispatch.count']);
          expect(
            kept.length + (span?.attributes['conversation.dispatch_events.dropped'] as number),
          ).toBe(dispatchCount);
          expect(span?.droppedEventsCount).toBe(0);
          expect(diagnostics).toEqual([]);
        }
      });
    }
  }
});
