/**
 * The SDK's floor (issue 10): what the telemetry's output costs when written straight through the
 * OpenTelemetry SDK with nothing in between. The bare orchestrator runs the conversation with a
 * counting listener (standing in for the exact counters), and around `run()` one span with the
 * conversation span's attributes gets, at the end, the same 128 events (first 64 and last 64
 * dispatches, the same six attributes, their own timestamps) the plugin writes, then the end
 * attributes, then `end()`. No context is entered, no per-dispatch record is kept: that is the
 * irreducible cost of the same span, and the plugin is measured against it.
 */
import { type Attributes, SpanKind, type Tracer } from '@opentelemetry/api';
import type {
  ConversationObservation,
  ConversationObserver,
  ConversationOrchestrator,
  DispatchInfo,
} from '../src/index.ts';

const KEPT = 128;
const HEAD = KEPT / 2;
const NAMES = ['london', 'new_york', 'tokyo'];

export interface Floor<S> {
  /** The orchestrator's listener: counts dispatches and notes when each happened. */
  readonly listener: (state: unknown, decision: unknown, count: number, elapsedMs: number) => void;
  /**
   * The same counting through the lifecycle SPI the plugin uses (`onDispatch`): the difference
   * to `listener` is what the core charges an observer per dispatch, not the plugin's own work.
   */
  readonly observer: ConversationObserver<S, number>;
  /** One conversation, with its span written through the SDK. Answers its dispatch count. */
  run(orchestrator: ConversationOrchestrator<S, number>): Promise<number>;
}

export function sdkFloor<S>(tracer: Tracer): Floor<S> {
  let count = 0;
  // Elapsed times of the kept dispatches: the first HEAD, then a ring of the last HEAD. A span
  // event needs its time, so even the floor keeps these.
  const times = new Float64Array(KEPT);
  const note = (n: number, elapsedMs: number) => {
    count = n;
    times[n <= HEAD ? n - 1 : HEAD + ((n - HEAD - 1) % HEAD)] = elapsedMs;
  };
  const observation: ConversationObservation<S, number> = {
    onDispatch: (info: DispatchInfo<S, number>) => note(info.dispatchCount, info.elapsedMs),
  };
  return {
    listener: (_state, _decision, n, elapsedMs) => note(n, elapsedMs),
    observer: { startConversation: () => observation },
    async run(orchestrator) {
      count = 0;
      const startMs = performance.timeOrigin + performance.now();
      const span = tracer.startSpan('invoke_workflow desks', {
        kind: SpanKind.INTERNAL,
        startTime: startMs,
        attributes: {
          'gen_ai.operation.name': 'invoke_workflow',
          'gen_ai.workflow.name': 'desks',
          'gen_ai.conversation.id': 'floor',
          'conversation.responders': NAMES,
        },
      });
      const result = await orchestrator.run({ sender: 'user', content: 0 });
      const n = count;
      const kept = Math.min(n, KEPT);
      for (let i = 0; i < kept; i++) {
        const dispatch = n <= KEPT || i < HEAD ? i + 1 : n - kept + i + 1;
        const slot = dispatch <= HEAD ? dispatch - 1 : HEAD + ((dispatch - HEAD - 1) % HEAD);
        const elapsedMs = times[slot] as number;
        const last = dispatch === n;
        const attributes: Attributes = {
          'conversation.dispatch.count': dispatch,
          'gen_ai.agent.name': NAMES[(dispatch - 1) % 3],
          'conversation.dispatch.elapsed_ms': elapsedMs,
          'conversation.dispatch.duration_ms': 0.0003,
          'conversation.decision.terminate': last,
          'conversation.decision.reason': last ? result.decision.reason : 'continue',
        };
        span.addEvent('conversation.dispatch', attributes, startMs + elapsedMs);
      }
      span.setAttributes({
        'conversation.dispatch_count': n,
        'conversation.end.reason': result.decision.reason,
        'conversation.elapsed_ms': result.elapsedMs,
        'conversation.dispatch_events.dropped': n - kept,
      });
      span.end(startMs + result.elapsedMs);
      return result.dispatchCount;
    },
  };
}
