/**
 * The identity property of issue 21: replaying a recording against the policy that produced it
 * reproduces every recorded ending exactly (the dispatch, the reason, the deciding policy), for
 * policies that read only recorded data. Random conversations run through the real orchestrator
 * and the real recorder; random policies compose every built-in termination policy.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  allOf,
  anyOf,
  ConversationOrchestrator,
  converged,
  type Message,
  maxDispatches,
  roundRobin,
  stopWhen,
  type TerminationPolicy,
  type TurnPolicy,
  timeout,
  tokenBudget,
} from '../../src/index.ts';
import {
  createConversationRecorder,
  type RecordedConversation,
  replay,
  replayConversation,
} from '../../src/replay/index.ts';
import { schemaErrors } from '../helpers/recording-schema.ts';

interface Desk {
  readonly x: number;
  readonly folded: number;
}

type Leaf =
  | { kind: 'max'; n: number }
  | { kind: 'timeout'; ms: number }
  | { kind: 'converged'; tolerance: number; consecutive: number; target: number }
  | { kind: 'sender'; depth: number }
  | { kind: 'folded'; at: number }
  | { kind: 'tokens'; total: number }
  | { kind: 'output'; at: number };
type PolicySpec = Leaf | { kind: 'any' | 'all'; members: PolicySpec[] };

const leaf: fc.Arbitrary<Leaf> = fc.oneof(
  fc.record({ kind: fc.constant('max' as const), n: fc.integer({ min: 1, max: 40 }) }),
  fc.record({
    kind: fc.constant('timeout' as const),
    ms: fc.double({ min: 0.001, max: 2, noNaN: true }),
  }),
  fc.record({
    kind: fc.constant('converged' as const),
    tolerance: fc.double({ min: 0, max: 30, noNaN: true }),
    consecutive: fc.integer({ min: 1, max: 4 }),
    target: fc.integer({ min: 0, max: 60 }),
  }),
  fc.record({ kind: fc.constant('sender' as const), depth: fc.integer({ min: 0, max: 4 }) }),
  fc.record({ kind: fc.constant('folded' as const), at: fc.integer({ min: 1, max: 50 }) }),
  fc.record({ kind: fc.constant('tokens' as const), total: fc.integer({ min: 1, max: 3_000 }) }),
  fc.record({ kind: fc.constant('output' as const), at: fc.integer({ min: 1, max: 400 }) }),
);
const policySpec: fc.Arbitrary<PolicySpec> = fc.oneof(
  leaf,
  fc.record({
    kind: fc.constantFrom('any' as const, 'all' as const),
    members: fc.array(leaf, { minLength: 1, maxLength: 3 }),
  }),
);

/** The policy a conversation runs with: the spec, capped so that no run goes on forever. */
function build(spec: PolicySpec): TerminationPolicy<Desk, unknown> {
  return anyOf(member(spec), maxDispatches(300));
}

function member(spec: PolicySpec): TerminationPolicy<Desk, unknown> {
  switch (spec.kind) {
    case 'max':
      return maxDispatches(spec.n);
    case 'timeout':
      return timeout(spec.ms);
    case 'converged':
      return converged<Desk, unknown>({
        measure: (s) => s.projection.x,
        tolerance: spec.tolerance,
        consecutive: spec.consecutive,
        target: spec.target,
      });
    case 'sender':
      return stopWhen<Desk, unknown>(
        (s) => s.lastMessage.sender === 'echo' && s.queueDepth >= spec.depth,
        'echoed',
      );
    case 'folded':
      return stopWhen<Desk, unknown>((s) => s.projection.folded >= spec.at, 'folded_enough');
    case 'tokens':
      return tokenBudget({ total: spec.total });
    case 'output':
      return stopWhen<Desk, unknown>((s) => s.usage.outputTokens >= spec.at, 'output_spent');
    case 'any':
      return anyOf(...spec.members.map(member));
    case 'all':
      return allOf(...spec.members.map(member));
  }
}

/** Per invocation, the contents a responder answers (0-2 messages); `fail` at invocation k. */
const script = fc.record({
  answers: fc.array(fc.array(fc.integer({ min: 0, max: 100 }), { maxLength: 2 }), {
    minLength: 1,
    maxLength: 12,
  }),
  echoEvery: fc.integer({ min: 2, max: 7 }),
  failAt: fc.option(fc.integer({ min: 1, max: 60 }), { nil: undefined }),
  onFailure: fc.constantFrom('stop' as const, 'skip' as const),
  /** Tokens per invocation (input, output), cycled; 0 reports nothing. The failing one reports too. */
  tokens: fc.array(fc.tuple(fc.nat(200), fc.nat(50)), { minLength: 1, maxLength: 5 }),
  /** Tokens the turn policy reports every `turnEvery`-th message (0: never). */
  turnEvery: fc.integer({ min: 0, max: 4 }),
});
type Script = typeof script extends fc.Arbitrary<infer T> ? T : never;

/** Round robin whose every `every`-th selection reports tokens of its own (a model picking the speaker). */
function reportingTurns(every: number): TurnPolicy<Desk, unknown> {
  return {
    name: 'reporting_round_robin',
    start: (responders) => {
      let turn = 0;
      return (_message, _state, _responders, context) => {
        turn++;
        if (turn % every === 0) context.reportUsage({ inputTokens: 7, outputTokens: 3 });
        return [responders[turn % responders.length] as (typeof responders)[number]];
      };
    },
  };
}

async function record(policy: TerminationPolicy<Desk, unknown>, scripts: readonly Script[]) {
  const lines: string[] = [];
  const recorder = createConversationRecorder<Desk, unknown>({
    sink: (line) => {
      lines.push(line);
    },
    record: (state) => state.projection,
  });
  for (const [i, s] of scripts.entries()) {
    let invocation = 0;
    const orchestrator = new ConversationOrchestrator<Desk, unknown>({
      name: 'identity',
      responders: ['a', 'b'].map((name) => ({
        name,
        respond: (message: Message<unknown>, _state, context) => {
          invocation++;
          const [input, output] = s.tokens[(invocation - 1) % s.tokens.length] ?? [0, 0];
          if (input + output > 0) context.reportUsage({ inputTokens: input, outputTokens: output });
          if (invocation === s.failAt) throw new Error('scripted failure');
          const values = s.answers[(invocation - 1) % s.answers.length] ?? [];
          // Every echoEvery-th invocation answers as another sender.
          const sender = invocation % s.echoEvery === 0 ? 'echo' : name;
          void message;
          return values.map((content) => ({ sender, content }));
        },
      })),
      turnPolicy: s.turnEvery === 0 ? roundRobin() : reportingTurns(s.turnEvery),
      projection: {
        initial: () => ({ x: 50, folded: 0 }),
        fold: (d, m) => ({ x: (d.x + (m.content as number)) / 2, folded: d.folded + 1 }),
      },
      termination: policy,
      maxQueueLength: 200,
      onResponderError: s.onFailure,
      observers: [recorder],
    });
    await orchestrator
      .run({ sender: 'user', content: 0 }, { conversationId: `c${i}` })
      .catch(() => undefined);
  }
  await recorder.close();
  return lines.map((l) => JSON.parse(l) as RecordedConversation);
}

function expectIdentity(line: RecordedConversation, policy: TerminationPolicy<Desk, unknown>) {
  const replayed = replayConversation(line, policy as TerminationPolicy<unknown, undefined>);
  const { ending } = line;
  const decided = ending.error === undefined && ending.reason !== 'queue_exhausted';
  if (decided) {
    expect(replayed.candidate).toEqual({
      outcome: 'stopped',
      dispatchCount: ending.dispatchCount,
      reason: ending.reason,
      ...(ending.policy === undefined ? {} : { policy: ending.policy }),
      ...(ending.observed === undefined ? {} : { observed: ending.observed }),
      ...(ending.limit === undefined ? {} : { limit: ending.limit }),
      elapsedMs: line.dispatches.at(-1)?.elapsedMs,
    });
  } else expect(replayed.candidate).toEqual({ outcome: 'ran_past' });
  expect(replayed.comparison).toBe('same');
  expect(replayed.saved).toEqual({ dispatches: 0, tokens: 0, timeMs: 0 });
}

describe('replaying a recording against the policy that produced it', () => {
  it('reproduces every recorded ending exactly (random conversations, random policies)', async () => {
    await fc.assert(
      fc.asyncProperty(
        policySpec,
        fc.array(script, { minLength: 1, maxLength: 6 }),
        async (spec, scripts) => {
          const lines = await record(build(spec), scripts);
          expect(lines).toHaveLength(scripts.length);
          for (const line of lines) {
            expect(schemaErrors(line)).toEqual([]);
            expectIdentity(line, build(spec));
          }
          const report = await replay(lines, build(spec) as TerminationPolicy<unknown, undefined>);
          expect([report.same, report.earlier, report.later, report.unknown]).toEqual([
            lines.length,
            0,
            0,
            0,
          ]);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('covers every kind of ending in those runs (the property is not vacuous)', async () => {
    const reasons = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        policySpec,
        fc.array(script, { minLength: 1, maxLength: 6 }),
        async (spec, scripts) => {
          for (const line of await record(build(spec), scripts)) reasons.add(line.ending.reason);
        },
      ),
      { numRuns: 150, seed: 21 },
    );
    for (const reason of [
      'max_dispatches',
      'timeout',
      'converged',
      'echoed',
      'folded_enough',
      'queue_exhausted',
      'error',
    ]) {
      expect(reasons).toContain(reason);
    }
  });

  it('fails when the replay loses what the policy read (a control: the check can fail)', async () => {
    const policy = converged<Desk, unknown>({
      measure: (s) => s.projection.x,
      tolerance: 5,
      target: 50,
    });
    const [line] = await record(policy, [
      {
        answers: [[50]],
        echoEvery: 7,
        failAt: undefined,
        onFailure: 'stop',
        tokens: [[0, 0]],
        turnEvery: 0,
      },
    ]);
    expect(line?.ending.reason).toBe('converged');
    const stripped = {
      ...(line as RecordedConversation),
      dispatches: line?.dispatches.map(({ record: _, ...d }) => d) ?? [],
    };
    expect(() => expectIdentity(stripped, policy)).toThrow();
    expectIdentity(line as RecordedConversation, policy);
  });
});
