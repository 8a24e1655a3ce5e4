import { describe, expect, it } from 'vitest';
import {
  ConversationAbortedError,
  type ConversationError,
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationUsage,
  DispatchDeadlineError,
  type Message,
  maxDispatches,
  PolicyError,
  QueueOverflowError,
  type Responder,
  ResponderError,
  roundRobin,
  type Usage,
  type UsageTotals,
} from '../../src/index.ts';

type Reports = readonly Usage[];

/** A responder that reports the given usages (one list per invocation, cycling) and answers. */
function reporting(name: string, perInvocation: readonly Reports[], async = false) {
  let invocation = 0;
  const responder: Responder<number, number> = {
    name,
    respond: (m, _s, context) => {
      const reports = perInvocation[invocation++ % perInvocation.length] ?? [];
      for (const usage of reports) context.reportUsage(usage);
      const answer = { sender: name, content: m.content + 1 };
      return async ? Promise.resolve(answer) : answer;
    },
  };
  return responder;
}

interface Seen {
  usages: { index: number; usage: Usage; dispatchNumber: number }[];
  dispatches: { n: number; usage: UsageTotals | undefined; state: UsageTotals }[];
}

function recorder(seen: Seen): ConversationObserver<number, number> {
  return {
    startConversation: () => ({
      onUsage: (index, usage, dispatchNumber) => seen.usages.push({ index, usage, dispatchNumber }),
      onDispatch: (info) =>
        seen.dispatches.push({ n: info.dispatchCount, usage: info.usage, state: info.state.usage }),
    }),
  };
}

function orchestrator(
  responders: Responder<number, number>[],
  extra: Partial<ConstructorParameters<typeof ConversationOrchestrator<number, number>>[0]> = {},
) {
  const seen: Seen = { usages: [], dispatches: [] };
  const o = new ConversationOrchestrator<number, number>({
    name: 'usage',
    responders,
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (_s, m) => m.content },
    termination: maxDispatches(4),
    observers: [recorder(seen)],
    ...extra,
  });
  return { o, seen };
}

const input: Message<number> = { sender: 'user', content: 0 };

/** What the recorder saw of dispatch `n`: its [input, output] tokens, the state's after it. */
const dispatched = (
  n: number,
  [inputTokens, outputTokens]: readonly [number, number],
  [stateInput, stateOutput]: readonly [number, number],
) => ({
  n,
  usage: { inputTokens, outputTokens },
  state: { inputTokens: stateInput, outputTokens: stateOutput },
});

/** `usage` is `totals` split `byResponder`, and the state the run reached carries `totals`. */
function expectTotals(
  { usage, state }: { usage: ConversationUsage; state: { usage?: UsageTotals } },
  totals: UsageTotals,
  byResponder: Record<string, UsageTotals>,
): void {
  expect(usage).toEqual({ ...totals, byResponder });
  expect(state.usage).toEqual(totals);
}

describe('usage reported by responders', () => {
  it('sums several reports per dispatch into state.usage, result.usage and each dispatch', async () => {
    const { o, seen } = orchestrator([
      reporting('a', [
        [
          { inputTokens: 10, outputTokens: 2 },
          { inputTokens: 5, model: 'gpt-4o' },
        ],
      ]),
      reporting('b', [[{ outputTokens: 7 }]], true),
    ]);
    const result = await o.run(input);
    expectTotals(
      result,
      { inputTokens: 30, outputTokens: 18 },
      { a: { inputTokens: 30, outputTokens: 4 }, b: { inputTokens: 0, outputTokens: 14 } },
    );
    expect(seen.dispatches).toEqual([
      dispatched(1, [15, 2], [15, 2]),
      dispatched(2, [0, 7], [15, 9]),
      dispatched(3, [15, 2], [30, 11]),
      dispatched(4, [0, 7], [30, 18]),
    ]);
    expect(seen.usages.map((u) => [u.index, u.dispatchNumber, u.usage])).toEqual([
      [0, 1, { inputTokens: 10, outputTokens: 2 }],
      [0, 1, { inputTokens: 5, model: 'gpt-4o' }],
      [1, 2, { outputTokens: 7 }],
      [0, 3, { inputTokens: 10, outputTokens: 2 }],
      [0, 3, { inputTokens: 5, model: 'gpt-4o' }],
      [1, 4, { outputTokens: 7 }],
    ]);
  });

  it('keeps the optional kinds out of the totals until a report has them', async () => {
    const { o } = orchestrator([
      reporting('a', [[{ inputTokens: 1 }], [{ inputTokens: 2, cacheReadInputTokens: 0 }]]),
      reporting('b', [[{ outputTokens: 3, reasoningOutputTokens: 2 }]]),
    ]);
    const result = await o.run(input);
    expect(result.usage).toEqual({
      inputTokens: 3,
      outputTokens: 6,
      cacheReadInputTokens: 0,
      reasoningOutputTokens: 4,
      byResponder: {
        a: { inputTokens: 3, outputTokens: 0, cacheReadInputTokens: 0 },
        b: { inputTokens: 0, outputTokens: 6, reasoningOutputTokens: 4 },
      },
    });
    expect(Object.keys(result.usage.byResponder.a ?? {})).not.toContain('reasoningOutputTokens');
  });

  it('is zeros with no responder entry and no turnPolicy when nothing reports', async () => {
    const { o, seen } = orchestrator([reporting('a', [[]]), reporting('b', [[]])]);
    const result = await o.run(input);
    expectTotals(result, { inputTokens: 0, outputTokens: 0 }, {});
    expect('turnPolicy' in result.usage).toBe(false);
    expect(seen.dispatches.map((d) => d.usage)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(seen.usages).toEqual([]);
  });

  it('counts the tokens of an invocation that fails, on the error and its state', async () => {
    const failing: Responder<number, number> = {
      name: 'b',
      respond: (_m, _s, context) => {
        context.reportUsage({ inputTokens: 100, outputTokens: 1 });
        throw new Error('model timeout');
      },
    };
    const { o, seen } = orchestrator([reporting('a', [[{ inputTokens: 3 }]]), failing]);
    const error = (await o.run(input).catch((e) => e)) as ResponderError<number>;
    expect(error).toBeInstanceOf(ResponderError);
    expectTotals(
      error,
      { inputTokens: 103, outputTokens: 1 },
      { a: { inputTokens: 3, outputTokens: 0 }, b: { inputTokens: 100, outputTokens: 1 } },
    );
    expect(seen.usages.map((u) => [u.index, u.dispatchNumber])).toEqual([
      [0, 1],
      [1, 2],
    ]);
  });

  it("counts a skipped invocation's tokens in the totals, not in a later dispatch's usage", async () => {
    let calls = 0;
    const flaky: Responder<number, number> = {
      name: 'b',
      respond: async (m, _s, context) => {
        context.reportUsage({ inputTokens: 50 });
        if (calls++ === 0) throw new Error('first call fails');
        return { sender: 'b', content: m.content + 1 };
      },
    };
    const { o, seen } = orchestrator([reporting('a', [[{ inputTokens: 1 }]]), flaky], {
      onResponderError: 'skip',
      // a answers the input, b fails (skipped), then the queue holds a's answer for b again.
      turnPolicy: (_m, _s, rs) => rs,
    });
    const result = await o.run(input);
    expect(result.usage.inputTokens).toBe(
      seen.usages.reduce((t, u) => t + (u.usage.inputTokens ?? 0), 0),
    );
    expect(result.usage.byResponder.b?.inputTokens).toBe(50 * calls);
    // The first dispatch after the skipped one is a's, carrying only a's own tokens.
    expect(seen.dispatches[0]?.usage).toEqual({ inputTokens: 1, outputTokens: 0 });
    expect(seen.dispatches[1]?.usage).toEqual({ inputTokens: 1, outputTokens: 0 });
    expect(seen.dispatches[1]?.state.inputTokens).toBe(52);
    expect(seen.dispatches[2]?.usage).toEqual({ inputTokens: 50, outputTokens: 0 });
  });

  it("keeps a failed invocation's tokens out of the dispatch of the same responder's retry", async () => {
    let calls = 0;
    const flaky: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, context) => {
        context.reportUsage({ inputTokens: calls === 0 ? 100 : 1 });
        if (calls++ === 0) throw new Error('first call fails');
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const { o, seen } = orchestrator([flaky], {
      onResponderError: 'skip',
      // The input is answered twice: the first (failing) invocation and its retry share number 1.
      turnPolicy: (m, _s, rs) => (m.sender === 'user' ? [rs[0], rs[0]] : rs) as typeof rs,
      termination: maxDispatches(1),
    });
    const result = await o.run(input);
    expect(seen.usages.map((u) => [u.dispatchNumber, u.usage.inputTokens])).toEqual([
      [1, 100],
      [1, 1],
    ]);
    expect(seen.dispatches[0]?.usage).toEqual({ inputTokens: 1, outputTokens: 0 });
    expect(result.usage.inputTokens).toBe(101);
  });

  it('counts an invocation that answers nothing', async () => {
    const silent: Responder<number, number> = {
      name: 'a',
      respond: (_m, _s, context) => {
        context.reportUsage({ outputTokens: 9 });
        return undefined;
      },
    };
    const { o, seen } = orchestrator([silent]);
    const result = await o.run(input);
    expect(result.decision.reason).toBe('queue_exhausted');
    expect(result.usage).toEqual({
      inputTokens: 0,
      outputTokens: 9,
      byResponder: { a: { inputTokens: 0, outputTokens: 9 } },
    });
    expect(seen.dispatches).toEqual([dispatched(1, [0, 9], [0, 9])]);
  });

  it('ignores a report made after the run settled: no hook, no total changes, no throw', async () => {
    let report: ((usage: Usage) => void) | undefined;
    const keeper: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, context) => {
        report = context.reportUsage;
        context.reportUsage({ inputTokens: 1 });
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const { o, seen } = orchestrator([keeper], { termination: maxDispatches(1) });
    const result = await o.run(input);
    const before = seen.usages.length;
    expect(() => report?.({ inputTokens: 1_000 })).not.toThrow();
    expect(() => report?.({ inputTokens: -1 })).not.toThrow();
    expect(seen.usages.length).toBe(before);
    expect(result.usage.inputTokens).toBe(1);
    expect(result.state.usage.inputTokens).toBe(1);
  });

  it("counts a report made after the invocation ended for its responder, in no other dispatch's usage", async () => {
    let late: ((usage: Usage) => void) | undefined;
    const a: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, { reportUsage }) => {
        late = reportUsage;
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const b: Responder<number, number> = {
      name: 'b',
      respond: (m) => {
        late?.({ inputTokens: 4 });
        return { sender: 'b', content: m.content + 1 };
      },
    };
    const { o, seen } = orchestrator([a, b], { termination: maxDispatches(2) });
    const result = await o.run(input);
    expect(result.usage.byResponder).toEqual({ a: { inputTokens: 4, outputTokens: 0 } });
    expect(seen.dispatches.map((d) => d.usage)).toEqual([undefined, undefined]);
    expect(seen.usages).toEqual([{ index: 0, usage: { inputTokens: 4 }, dispatchNumber: 1 }]);
  });

  it('works destructured and reads each field of a report once', async () => {
    let reads = 0;
    const a: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, { reportUsage }) => {
        reportUsage({
          get inputTokens() {
            reads++;
            return 5;
          },
        });
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const { o } = orchestrator([a], { termination: maxDispatches(1) });
    const result = await o.run(input);
    expect(result.usage.inputTokens).toBe(5);
    expect(reads).toBe(1);
  });

  it('never shares totals between concurrent conversations', async () => {
    const o = new ConversationOrchestrator<number, number>({
      name: 'concurrent',
      responders: ['a', 'b'].map((name) => ({
        name,
        respond: async (m: Message<number>, state, context) => {
          // Each conversation spends its own id's worth of tokens per dispatch.
          context.reportUsage({ inputTokens: Number(state.conversationId.slice(1)) });
          await new Promise((r) => setTimeout(r, 0));
          return { sender: name, content: m.content + 1 };
        },
      })),
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (_s, m) => m.content },
      termination: maxDispatches(6),
    });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => o.run(input, { conversationId: `c${i}` })),
    );
    for (const [i, result] of results.entries()) {
      expect(result.usage).toEqual({
        inputTokens: 6 * i,
        outputTokens: 0,
        byResponder: {
          a: { inputTokens: 3 * i, outputTokens: 0 },
          b: { inputTokens: 3 * i, outputTokens: 0 },
        },
      });
    }
  });
});

describe('bad usage values are refused, naming what came, and change no total', () => {
  const cases: [string, unknown, string][] = [
    [
      'a negative count',
      { inputTokens: -1 },
      'Expected `usage.inputTokens` to be a non-negative integer, got `-1` (number)',
    ],
    [
      'NaN',
      { outputTokens: Number.NaN },
      'Expected `usage.outputTokens` to be a non-negative integer, got `NaN` (number)',
    ],
    [
      'a fraction',
      { cacheReadInputTokens: 1.5 },
      'Expected `usage.cacheReadInputTokens` to be a non-negative integer, got `1.5` (number)',
    ],
    [
      'Infinity',
      { reasoningOutputTokens: Number.POSITIVE_INFINITY },
      'Expected `usage.reasoningOutputTokens` to be a non-negative integer, got `Infinity` (number)',
    ],
    [
      'a string count',
      { inputTokens: '10' },
      'Expected `usage.inputTokens` to be a non-negative integer, got `"10"` (string)',
    ],
    [
      'a bad model name',
      { inputTokens: 1, model: 'gpt 4\n' },
      'Expected `usage.model` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"gpt 4\\n"` (string)',
    ],
    [
      'an empty model name',
      { model: '' },
      'Expected `usage.model` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `""` (string)',
    ],
    [
      'a number',
      12,
      'Expected `usage` to be an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? }, got `12` (number)',
    ],
    [
      'null',
      null,
      'Expected `usage` to be an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? }, got `null` (null)',
    ],
    [
      'an array',
      [1],
      'Expected `usage` to be an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? }, got `[1]` (array)',
    ],
    [
      'a throwing getter',
      Object.defineProperty({}, 'inputTokens', {
        get() {
          throw new Error('boom');
        },
      }),
      'Expected `usage` to be an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? } whose fields can be read, reading it threw: boom',
    ],
    [
      'a revoked Proxy',
      (() => {
        const { proxy, revoke } = Proxy.revocable({ inputTokens: 1 }, {});
        revoke();
        return proxy;
      })(),
      'Expected `usage` to be an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? }, got `(a revoked Proxy)` (object)',
    ],
  ];
  it.each(cases)('refuses %s', async (_label, bad, message) => {
    let thrown: unknown;
    const a: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, context) => {
        context.reportUsage({ inputTokens: 2, outputTokens: 3 });
        try {
          context.reportUsage(bad as Usage);
        } catch (error) {
          thrown = error;
        }
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const { o, seen } = orchestrator([a], { termination: maxDispatches(1) });
    const result = await o.run(input);
    expect(thrown).toBeInstanceOf(TypeError);
    expect((thrown as Error).message).toBe(message);
    expect(result.usage).toEqual({
      inputTokens: 2,
      outputTokens: 3,
      byResponder: { a: { inputTokens: 2, outputTokens: 3 } },
    });
    expect(seen.usages).toHaveLength(1);
  });

  it('refuses a report that would take a total past 2^53 - 1, changing nothing', async () => {
    let thrown: unknown;
    const a: Responder<number, number> = {
      name: 'a',
      respond: (m, _s, context) => {
        context.reportUsage({ outputTokens: Number.MAX_SAFE_INTEGER - 1, inputTokens: 1 });
        try {
          context.reportUsage({ inputTokens: 1, outputTokens: 2 });
        } catch (error) {
          thrown = error;
        }
        return { sender: 'a', content: m.content + 1 };
      },
    };
    const { o } = orchestrator([a], { termination: maxDispatches(1) });
    const result = await o.run(input);
    expect(thrown).toBeInstanceOf(RangeError);
    expect((thrown as Error).message).toMatch(
      /^Expected `usage` to keep the conversation's token totals at most 9007199254740991, got/,
    );
    expect(result.usage.inputTokens).toBe(1);
    expect(result.usage.outputTokens).toBe(Number.MAX_SAFE_INTEGER - 1);
  });

  it('fails the run with the TypeError as cause when the responder does not catch it', async () => {
    const a: Responder<number, number> = {
      name: 'a',
      respond: (_m, _s, context) => {
        context.reportUsage({ inputTokens: -5 });
        return undefined;
      },
    };
    const { o } = orchestrator([a]);
    const error = (await o.run(input).catch((e) => e)) as ResponderError<number>;
    expect(error).toBeInstanceOf(ResponderError);
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(error.usage).toEqual({ inputTokens: 0, outputTokens: 0, byResponder: {} });
  });
});

describe('usage reported by the turn policy', () => {
  it('joins the totals and usage.turnPolicy, told to onUsage as responder -1', async () => {
    const { o, seen } = orchestrator([reporting('a', [[{ inputTokens: 1 }]])], {
      turnPolicy: async (_m, _s, rs, context) => {
        context.reportUsage({ inputTokens: 20, outputTokens: 1, model: 'selector' });
        return rs;
      },
      termination: maxDispatches(2),
    });
    const result = await o.run(input);
    expect(result.usage).toEqual({
      inputTokens: 42,
      outputTokens: 2,
      byResponder: { a: { inputTokens: 2, outputTokens: 0 } },
      turnPolicy: { inputTokens: 40, outputTokens: 2 },
    });
    expect(seen.usages.map((u) => [u.index, u.dispatchNumber])).toEqual([
      [-1, 1],
      [0, 1],
      [-1, 2],
      [0, 2],
    ]);
    // A dispatch's usage is its responder's alone.
    expect(seen.dispatches.map((d) => d.usage)).toEqual([
      { inputTokens: 1, outputTokens: 0 },
      { inputTokens: 1, outputTokens: 0 },
    ]);
  });

  it("gives the turn policy a signal that aborts with the run's", async () => {
    const controller = new AbortController();
    let signal: AbortSignal | undefined;
    const { o } = orchestrator([reporting('a', [[]])], {
      turnPolicy: (_m, _s, rs, context) => {
        signal = context.signal;
        controller.abort(new Error('caller gave up'));
        return rs;
      },
    });
    const error = await o.run(input, { signal: controller.signal }).catch((e) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect(signal?.aborted).toBe(true);
  });
});

describe('every ConversationError carries the usage', () => {
  const spender = (respond: Responder<number, number>['respond']): Responder<number, number> => ({
    name: 'a',
    respond: (m, s, context) => {
      context.reportUsage({ inputTokens: 7, outputTokens: 1 });
      return respond(m, s, context);
    },
  });

  it.each<[string, () => Promise<ConversationError<number>>, new (...args: never[]) => Error]>([
    [
      'an abort',
      async () => {
        const controller = new AbortController();
        const { o } = orchestrator([
          spender(() => {
            controller.abort();
            return new Promise(() => {});
          }),
        ]);
        return o.run(input, { signal: controller.signal }).catch((e) => e);
      },
      ConversationAbortedError,
    ],
    [
      'a dispatch deadline',
      async () => {
        const { o } = orchestrator([spender(() => new Promise(() => {}))], {
          dispatchTimeoutMs: 5,
        });
        return o.run(input).catch((e) => e);
      },
      DispatchDeadlineError,
    ],
    [
      'a queue overflow',
      async () => {
        const { o } = orchestrator(
          [
            spender((m) => [
              { sender: 'a', content: m.content },
              { sender: 'a', content: 1 },
            ]),
          ],
          { maxQueueLength: 1 },
        );
        return o.run(input).catch((e) => e);
      },
      QueueOverflowError,
    ],
    [
      'a termination policy that throws',
      async () => {
        const { o } = orchestrator([spender((m) => ({ sender: 'a', content: m.content }))], {
          termination: {
            name: 'broken',
            start: () => () => {
              throw new Error('policy bug');
            },
          },
        });
        return o.run(input).catch((e) => e);
      },
      PolicyError,
    ],
  ])('%s', async (_label, run, type) => {
    const error = await run();
    expect(error).toBeInstanceOf(type);
    expectTotals(
      error,
      { inputTokens: 7, outputTokens: 1 },
      { a: { inputTokens: 7, outputTokens: 1 } },
    );
  });
});
