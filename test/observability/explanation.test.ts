/**
 * Issue 21, section 1, telemetry: each dispatch event carries what the deciding policy measured
 * and its limit (the convergence curve, dispatch by dispatch), and the conversation span ends
 * with the deciding policy, its measure and its limit.
 */
import { trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  type TerminationDecision,
  type TerminationPolicy,
  tokenBudget,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** Measures the spread (halving each dispatch from 8) against a tolerance of 1. */
const spreadBelow: TerminationPolicy<number, number> = {
  name: 'spread_below',
  start: () => (state) => {
    const observed = 8 / 2 ** state.dispatchCount;
    return observed <= 1
      ? { terminate: true, reason: 'converged', policy: 'spread_below', observed, limit: 1 }
      : { terminate: false, reason: 'continue', observed, limit: 1 };
  },
};

function orchestrator(
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  termination: TerminationPolicy<number, number>,
  extra: Partial<ConstructorParameters<typeof ConversationOrchestrator<number, number>>[0]> = {},
) {
  return new ConversationOrchestrator<number, number>({
    name: 'explained',
    responders: ['a', 'b'].map((name) => ({
      name,
      respond: (m: Message<number>, _s, context) => {
        context.reportUsage({ inputTokens: 100, outputTokens: 10 });
        return { sender: name, content: m.content + 1 };
      },
    })),
    turnPolicy: (_m, _s, responders) => [responders[0] as never],
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination,
    observers: [telemetry],
    ...extra,
  });
}

/** The conversation span of a traced run of `orchestrator` ended by `termination`. */
async function explainedSpan(termination: TerminationPolicy<number, number>) {
  const { exporter, tracer } = memoryTracing();
  await orchestrator(createConversationTelemetry({ tracer }), termination).run({
    sender: 'user',
    content: 0,
  });
  const [span] = spansNamed(exporter, 'invoke_workflow explained');
  return span;
}

/** The end attributes of a conversation span ended `reason` by `policy`. */
const endedBy = (reason: string, policy: string, observed: number, limit: number) => ({
  'conversation.end.reason': reason,
  'conversation.end.policy': policy,
  'conversation.end.observed': observed,
  'conversation.end.limit': limit,
});

const explanations = (span: ReadableSpan | undefined) =>
  (span?.events ?? [])
    .filter((e) => e.name === 'conversation.dispatch')
    .map((e) => [
      e.attributes?.['conversation.decision.observed'],
      e.attributes?.['conversation.decision.limit'],
    ]);

describe('decisions explain themselves on the trace', () => {
  it('gives each dispatch event the decision’s observed and limit: the convergence curve', async () => {
    const span = await explainedSpan(spreadBelow);
    expect(explanations(span)).toEqual([
      [4, 1],
      [2, 1],
      [1, 1],
    ]);
    expect(span?.attributes).toMatchObject(endedBy('converged', 'spread_below', 1, 1));
  });

  it('ends a token budget’s conversation with the policy, the tokens used and the limit', async () => {
    const span = await explainedSpan(tokenBudget({ total: 300 }));
    expect(span?.attributes).toMatchObject(endedBy('token_budget', 'token_budget', 330, 300));
  });

  it('adds nothing where the decision says nothing (and no policy to an ending without one)', async () => {
    let n = 0;
    const silent: TerminationPolicy<number, number> = {
      name: 'silent',
      start: () => () => ({ terminate: ++n === 2, reason: n === 2 ? 'done' : 'continue' }),
    };
    const span = await explainedSpan(silent);
    expect(explanations(span)).toEqual([
      [undefined, undefined],
      [undefined, undefined],
    ]);
    for (const key of ['policy', 'observed', 'limit']) {
      expect(span?.attributes).not.toHaveProperty(`conversation.end.${key}`);
    }
  });

  it('keeps the events of a decision whose observed getter throws', async () => {
    let n = 0;
    const hostile: TerminationPolicy<number, number> = {
      name: 'hostile',
      start: () => () => {
        const decision: TerminationDecision = { terminate: ++n === 3, reason: 'stop_here' };
        let reads = 0;
        // Readable while the core checks it, throwing once the telemetry writes the events.
        return Object.defineProperty(decision, 'observed', {
          enumerable: true,
          get() {
            if (++reads > 1) throw new Error('gone');
            return 1;
          },
        });
      },
    };
    const span = await explainedSpan(hostile);
    expect(span?.attributes['conversation.end.reason']).toBe('stop_here');
    expect(explanations(span)).toHaveLength(3);
  });

  it('gives the plain listener’s events the observed and limit too', async () => {
    const { exporter, tracer } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>({ tracer });
    const o = orchestrator(telemetry, spreadBelow, {
      observers: [],
      listener: telemetry.listener('explained'),
    });
    await tracer.startActiveSpan('around', async (span) => {
      await o.run({ sender: 'user', content: 0 });
      span.end();
    });
    expect(trace.getActiveSpan()).toBeUndefined();
    const [around] = spansNamed(exporter, 'around');
    expect(explanations(around)).toEqual([
      [4, 1],
      [2, 1],
      [1, 1],
    ]);
  });
});
