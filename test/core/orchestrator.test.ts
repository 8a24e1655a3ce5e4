import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import {
  ConversationAbortedError,
  ConversationError,
  ConversationOrchestrator,
  type ConversationState,
  DispatchDeadlineError,
  type Message,
  maxDispatches,
  OrchestratorConfigError,
  PolicyError,
  QueueOverflowError,
  ResponderError,
  roundRobin,
  type TerminationDecision,
} from '../../src/index.ts';
import { counterOrchestrator, type Desks, desksOrchestrator, spread } from '../helpers/desks.ts';

describe('ConversationOrchestrator.run', () => {
  it('runs the desks until they converge and resolves with the result', async () => {
    const result = await desksOrchestrator().run(
      { sender: 'user', content: 0 },
      { conversationId: 'c-1' },
    );
    expect(result.conversationId).toBe('c-1');
    expect(result.decision).toEqual({
      terminate: true,
      reason: 'converged',
      policy: 'converged',
      observed: spread(result.state.projection),
      limit: 0.01,
    });
    expect(result.dispatchCount).toBe(24);
    expect(result.state.dispatchCount).toBe(24);
    expect(spread(result.state.projection)).toBeLessThanOrEqual(0.01);
    expect(result.elapsedMs).toBeGreaterThan(0);
  });

  it('stops after the dispatch whose decision says terminate', async () => {
    const calls: [number, TerminationDecision][] = [];
    const result = await counterOrchestrator({
      termination: maxDispatches(4),
      listener: (_s, d, n) => {
        calls.push([n, d]);
      },
    }).run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(4);
    expect(calls.map(([n]) => n)).toEqual([1, 2, 3, 4]);
    expect(calls.map(([, d]) => d.terminate)).toEqual([false, false, false, true]);
    // 1 + 2 + 3 + 4: each responder answers the previous message's content + 1.
    expect(result.state.projection).toBe(10);
  });

  it('calls the listener with the state, the decision, the count and a non-decreasing elapsed', async () => {
    const seen: { projection: number; count: number; elapsed: number; last: unknown }[] = [];
    await counterOrchestrator({
      listener: (s, _d, n, e) => {
        seen.push({ projection: s.projection, count: n, elapsed: e, last: s.lastMessage.sender });
      },
    }).run({ sender: 'user', content: 0 });
    expect(seen.map((x) => x.count)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(seen.map((x) => x.last)).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'a']);
    expect(seen.map((x) => x.projection)).toEqual([1, 3, 6, 10, 15, 21, 28, 36, 45, 55]);
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i]?.elapsed).toBeGreaterThanOrEqual(seen[i - 1]?.elapsed ?? 0);
    }
  });

  it('ends with queue_exhausted when nobody answers any more', async () => {
    const o = new ConversationOrchestrator<number, number>({
      name: 'short',
      responders: [
        {
          name: 'a',
          respond: (m) => (m.content < 3 ? { sender: 'a', content: m.content + 1 } : undefined),
        },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s, m) => s + m.content },
      termination: maxDispatches(100),
    });
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.decision).toEqual({ terminate: true, reason: 'queue_exhausted' });
    // Dispatches answering 0, 1, 2 produce messages; the one answering 3 returns nothing.
    expect(result.dispatchCount).toBe(4);
    expect(result.state.projection).toBe(6);
    expect(result.state.queueDepth).toBe(0);
  });

  it('folds several messages of one answer in order and queues them all', async () => {
    const folded: string[] = [];
    const o = new ConversationOrchestrator<string[], string>({
      name: 'multi',
      responders: [
        {
          name: 'splitter',
          respond: (m) =>
            m.sender === 'user'
              ? [
                  { sender: 'splitter', content: 'x' },
                  { sender: 'splitter', content: 'y' },
                ]
              : null,
        },
      ],
      turnPolicy: roundRobin(),
      projection: {
        initial: () => [],
        fold: (s, m) => {
          folded.push(m.content);
          return [...s, m.content];
        },
      },
      termination: maxDispatches(10),
    });
    const result = await o.run({ sender: 'user', content: 'go' });
    expect(folded).toEqual(['x', 'y']);
    expect(result.state.projection).toEqual(['x', 'y']);
    expect(result.dispatchCount).toBe(3);
  });

  it('runs many conversations concurrently without sharing state', async () => {
    const o = desksOrchestrator();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        o.run({ sender: 'user', content: 0 }, { conversationId: `c${i}` }),
      ),
    );
    expect(results.map((r) => r.conversationId)).toEqual(
      Array.from({ length: 50 }, (_, i) => `c${i}`),
    );
    expect(new Set(results.map((r) => r.dispatchCount))).toEqual(new Set([24]));
  });

  it('keeps a bounded history only when asked', async () => {
    const off = await counterOrchestrator().run({ sender: 'user', content: 0 });
    expect(off.state.history).toEqual([]);
    const on = await counterOrchestrator({ historySize: 3 }).run({ sender: 'user', content: 0 });
    expect(on.state.history.map((m) => m.content)).toEqual([8, 9, 10]);
  });

  it('generates a conversation id when none is given', async () => {
    const result = await counterOrchestrator().run({ sender: 'user', content: 0 });
    expect(result.conversationId).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('failures keep the state reached', () => {
  const failingAt = (n: number) =>
    counterOrchestrator({
      responders: ['a', 'b', 'c'].map((name) => ({
        name,
        respond: (m: Message<number>) => {
          if (m.content + 1 === n) throw new Error(`boom at ${n}`);
          return { sender: name, content: m.content + 1 };
        },
      })),
    });

  it('rejects with a ResponderError carrying the state and the dispatch count', async () => {
    const error = await failingAt(4)
      .run({ sender: 'user', content: 0 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponderError);
    expect(error).toBeInstanceOf(ConversationError);
    const e = error as ResponderError<number>;
    expect(e.message).toBe('Responder `a` failed: boom at 4');
    expect(e.responder).toBe('a');
    expect(e.reason).toBe('error');
    expect(e.dispatchCount).toBe(3);
    expect(e.state.projection).toBe(6);
    expect((e.cause as Error).message).toBe('boom at 4');
  });

  it("skips a failed invocation when onResponderError is 'skip'", async () => {
    const o = new ConversationOrchestrator<number, number>({
      name: 'skip',
      responders: [
        { name: 'flaky', respond: () => Promise.reject(new Error('down')) },
        { name: 'ok', respond: (m) => ({ sender: 'ok', content: m.content + 1 }) },
      ],
      turnPolicy: (_m, _s, responders) => responders,
      projection: { initial: () => 0, fold: (s, m) => s + m.content },
      termination: maxDispatches(3),
      onResponderError: 'skip',
    });
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(3);
    expect(result.state.projection).toBe(6);
  });

  it('rejects with a ConversationAbortedError when the caller aborts, and the responder signal fires', async () => {
    const controller = new AbortController();
    let responderSignal: AbortSignal | undefined;
    const o = new ConversationOrchestrator<number, number>({
      name: 'abortable',
      responders: [
        {
          name: 'slow',
          respond: (m, _s, ctx) => {
            if (m.content === 2) {
              responderSignal = ctx.signal;
              setTimeout(() => controller.abort(new Error('user left')), 5);
              return new Promise(() => {}); // never answers
            }
            return { sender: 'slow', content: m.content + 1 };
          },
        },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s, m) => s + m.content },
      termination: maxDispatches(100),
    });
    const error = await o
      .run({ sender: 'user', content: 0 }, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    const e = error as ConversationAbortedError<number>;
    expect(e.reason).toBe('aborted');
    expect(e.dispatchCount).toBe(2);
    expect(e.state.projection).toBe(3);
    expect(responderSignal?.aborted).toBe(true);
    expect((responderSignal?.reason as Error | undefined)?.message).toBe('user left');
  });

  it('hands a responder that reads its signal after the abort an aborted signal', async () => {
    const controller = new AbortController();
    let seen: boolean | undefined;
    const o = counterOrchestrator({
      responders: [
        {
          name: 'late',
          respond: async (
            _m: Message<number>,
            _s: ConversationState<number, number>,
            ctx: { signal: AbortSignal },
          ) => {
            controller.abort(new Error('gone'));
            await new Promise((r) => setTimeout(r, 5));
            seen = ctx.signal.aborted;
            return { sender: 'late', content: 1 };
          },
        },
      ],
    });
    await expect(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    ).rejects.toBeInstanceOf(ConversationAbortedError);
    await new Promise((r) => setTimeout(r, 10));
    expect(seen).toBe(true);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const error = await counterOrchestrator()
      .run({ sender: 'user', content: 0 }, { signal: AbortSignal.abort() })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect((error as ConversationAbortedError).dispatchCount).toBe(0);
  });

  it('stops a conversation of synchronous responders when the signal aborts', async () => {
    const controller = new AbortController();
    const o = counterOrchestrator({ termination: maxDispatches(1e12), yieldIntervalMs: 1 });
    setTimeout(() => controller.abort(), 20);
    const error = (await o
      .run({ sender: 'user', content: 0 }, { signal: controller.signal })
      .catch((e) => e)) as ConversationAbortedError<number> | undefined;
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect(error?.dispatchCount).toBeGreaterThan(0);
    const n = error?.dispatchCount ?? 0;
    expect(error?.state.projection).toBe((n * (n + 1)) / 2);
  });

  it('rejects with a DispatchDeadlineError when a responder runs past dispatchTimeoutMs', async () => {
    let signal: AbortSignal | undefined;
    const o = counterOrchestrator({
      dispatchTimeoutMs: 20,
      responders: [
        {
          name: 'fast',
          respond: (m: Message<number>) => ({ sender: 'fast', content: m.content + 1 }),
        },
        {
          name: 'hung',
          respond: (
            _m: Message<number>,
            _s: ConversationState<number, number>,
            ctx: { signal: AbortSignal },
          ) => {
            signal = ctx.signal;
            return new Promise<never>(() => {});
          },
        },
      ],
    });
    const error = await o.run({ sender: 'user', content: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DispatchDeadlineError);
    const e = error as DispatchDeadlineError<number>;
    expect(e.message).toBe('Responder `hung` did not answer within the 20 ms dispatch deadline');
    expect(e.reason).toBe('deadline');
    expect(e.dispatchCount).toBe(1);
    expect(e.state.projection).toBe(1);
    expect(signal?.aborted).toBe(true);
  });

  it('blames the turn policy, not the last responder, when an async turn policy hangs', async () => {
    let turns = 0;
    const o = counterOrchestrator({
      dispatchTimeoutMs: 20,
      // Answers the first turn, then never again (an LLM picking the next speaker, stuck).
      turnPolicy: (_m, _s, responders) =>
        turns++ === 0 ? [responders[0] as never] : new Promise(() => {}),
    });
    const error = (await o
      .run({ sender: 'user', content: 0 })
      .catch((e) => e)) as DispatchDeadlineError<number>;
    expect(error).toBeInstanceOf(DispatchDeadlineError);
    expect(error.message).toBe('The turn policy did not answer within the 20 ms dispatch deadline');
    expect(error.responder).toBeUndefined();
    expect(error.dispatchCount).toBe(1);
  });

  it('rejects with a QueueOverflowError when the queue passes maxQueueLength', async () => {
    const o = counterOrchestrator({
      maxQueueLength: 5,
      responders: [
        {
          name: 'fan',
          respond: (m: Message<number>) => [
            { sender: 'fan', content: m.content + 1 },
            { sender: 'fan', content: m.content + 1 },
          ],
        },
      ],
      termination: maxDispatches(1000),
    });
    const error = await o.run({ sender: 'user', content: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueOverflowError);
    expect((error as QueueOverflowError).reason).toBe('queue_overflow');
    expect((error as QueueOverflowError<number>).state.queueDepth).toBe(5);
  });

  it('reports a responder answering with a non-message clearly', async () => {
    const o = counterOrchestrator({ responders: [{ name: 'bad', respond: () => 42 as never }] });
    const error = await o.run({ sender: 'user', content: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponderError);
    expect((error as Error).message).toBe(
      'Expected responder `bad` to return a message ({ sender: string, content }), an array of messages or nothing, got `42` (number)',
    );
  });

  it('reports a turn policy naming an unknown responder', async () => {
    const o = counterOrchestrator({ turnPolicy: () => ['zed'] });
    const error = await o.run({ sender: 'user', content: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).stage).toBe('turn');
    expect((error as Error).message).toBe(
      'The turn policy failed: The turn policy selected `"zed"` (string), which is not a responder of `counter` (known: a, b, c)',
    );
  });

  it('wraps a failing fold in a PolicyError that keeps what was folded before', async () => {
    const o = counterOrchestrator({
      projection: {
        initial: () => 0,
        fold: (s: number, m: Message<number>) => {
          if (m.content === 3) throw new Error('bad fold');
          return s + m.content;
        },
      },
    });
    const error = (await o
      .run({ sender: 'user', content: 0 })
      .catch((e) => e)) as PolicyError<number>;
    expect(error.stage).toBe('projection');
    expect(error.dispatchCount).toBe(2);
    expect(error.state.projection).toBe(3);
  });
});

describe('listener errors never change the result', () => {
  it('sends a throwing listener to onListenerError and finishes the run', async () => {
    const errors: unknown[] = [];
    const result = await counterOrchestrator({
      listener: (_s, _d, n) => {
        if (n % 2 === 0) throw new Error(`listener ${n}`);
      },
      onListenerError: (e) => errors.push((e as Error).message),
    }).run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(10);
    expect(result.state.projection).toBe(55);
    expect(errors).toEqual(['listener 2', 'listener 4', 'listener 6', 'listener 8', 'listener 10']);
  });

  it('sends a rejecting async listener to onListenerError, never to an unhandled rejection', async () => {
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    const errors: string[] = [];
    const result = await counterOrchestrator({
      listener: async (_s, _d, n) => {
        if (n === 3) throw new Error('async listener');
      },
      onListenerError: (e) => errors.push((e as Error).message),
    }).run({ sender: 'user', content: 0 });
    await new Promise((r) => setTimeout(r, 10));
    process.off('unhandledRejection', unhandled);
    expect(result.state.projection).toBe(55);
    expect(errors).toEqual(['async listener']);
    expect(unhandled).not.toHaveBeenCalled();
  });

  it('warns by default, at most once a minute per orchestrator, counting what it held back', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message.split('\n')[0]}`);
    process.on('warning', onWarning);
    try {
      const o = counterOrchestrator({
        listener: () => {
          throw new Error('always');
        },
      });
      await o.run({ sender: 'user', content: 0 });
      await vi.waitFor(() => expect(warnings).toHaveLength(1));
      expect(warnings[0]).toBe(
        'ConversationListenerWarning: A listener of orchestrator `counter` failed: Error: always',
      );
      // A second orchestrator has a reporter of its own.
      await counterOrchestrator({
        name: 'other',
        listener: () => {
          throw new Error('again');
        },
      }).run({ sender: 'user', content: 0 });
      await vi.waitFor(() => expect(warnings).toHaveLength(2));
      expect(warnings[1]).toContain('orchestrator `other` failed: Error: again');
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('the event loop keeps turning', () => {
  it('lets a timer fire during a long conversation of synchronous responders', async () => {
    const ticks: number[] = [];
    let dispatches = 0;
    const timer = setInterval(() => ticks.push(dispatches), 2);
    await counterOrchestrator({
      termination: maxDispatches(300_000),
      listener: (_s, _d, n) => {
        dispatches = n;
      },
    }).run({ sender: 'user', content: 0 });
    clearInterval(timer);
    // The timer saw the conversation in progress, not only before and after it.
    expect(ticks.some((n) => n > 0 && n < 300_000)).toBe(true);
  });
});

/** Options that are all right: each case below spoils one. */
const base = () => ({
  name: 'ok',
  responders: [{ name: 'a', respond: () => undefined }],
  turnPolicy: roundRobin<Desks>(),
  projection: { initial: () => ({ quotes: {} }), fold: (s: Desks) => s },
  termination: maxDispatches<Desks>(1),
});

describe('construction errors say what was expected and what came', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'name',
      { name: '' },
      'Expected `name` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `""` (string)',
    ],
    [
      'responders',
      { responders: [] },
      'Expected `responders` to be a non-empty array of responders, got `[]` (array)',
    ],
    [
      'duplicate responder',
      {
        responders: [
          { name: 'a', respond: () => undefined },
          { name: 'a', respond: () => undefined },
        ],
      },
      'Expected `responders[1].name` to be a name not used by another responder, got `"a"` (string)',
    ],
    [
      'respond',
      { responders: [{ name: 'a' }] },
      'Expected `responders[0].respond` to be a function, got `undefined` (undefined)',
    ],
    [
      'turnPolicy',
      { turnPolicy: 'round-robin' },
      'Expected `turnPolicy` to be a turn policy (roundRobin(), broadcast(), addressed()) or a function, got `"round-robin"` (string)',
    ],
    [
      'projection',
      { projection: {} },
      'Expected `projection` to be an object with `initial(input)` and `fold(state, message)` functions, got `{}` (object)',
    ],
    [
      'maxQueueLength',
      { maxQueueLength: -1 },
      'Expected `maxQueueLength` to be a positive integer, got `-1` (number)',
    ],
    [
      'dispatchTimeoutMs',
      { dispatchTimeoutMs: 0 },
      'Expected `dispatchTimeoutMs` to be a positive finite number, got `0` (number)',
    ],
    [
      'historySize',
      { historySize: 1.5 },
      'Expected `historySize` to be a non-negative integer, got `1.5` (number)',
    ],
    [
      'onResponderError',
      { onResponderError: 'retry' },
      "Expected `onResponderError` to be 'stop', 'skip' or a function, got `\"retry\"` (string)",
    ],
    ['listener', { listener: 'log' }, 'Expected `listener` to be a function, got `"log"` (string)'],
    [
      'name starting with a dot',
      { name: '.desks' },
      'Expected `name` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `".desks"` (string)',
    ],
    [
      'name of 65 characters',
      { name: 'a'.repeat(65) },
      `Expected \`name\` to be a name of 1-64 characters (ASCII letters, digits, \`_\`, \`.\`, \`:\` or \`-\`) starting with a letter, a digit or \`_\`, got \`"${'a'.repeat(65)}"\` (string)`,
    ],
    [
      'provider with a NUL',
      { responders: [{ name: 'a', provider: 'open\0ai', respond: () => undefined }] },
      'Expected `responders[0].provider` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"open\\u0000ai"` (string)',
    ],
    [
      'whitespace-only provider',
      { responders: [{ name: 'a', provider: '   ', respond: () => undefined }] },
      'Expected `responders[0].provider` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"   "` (string)',
    ],
    [
      'provider with a newline',
      { responders: [{ name: 'a', provider: 'openai\n', respond: () => undefined }] },
      'Expected `responders[0].provider` to be a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"openai\\n"` (string)',
    ],
  ];
  it.each(cases)('rejects a bad %s', (_label, override, message) => {
    expect(() => new ConversationOrchestrator({ ...base(), ...override } as never)).toThrow(
      new OrchestratorConfigError(message),
    );
  });

  it('accepts names and providers that follow the rule, first character included', () => {
    for (const name of ['a', '_x', '9lives', 'desks.prod:eu-1', 'x'.repeat(64)]) {
      expect(() => new ConversationOrchestrator({ ...base(), name })).not.toThrow();
    }
    const responders = [{ name: 'a', provider: 'aws.bedrock', respond: () => undefined }];
    expect(() => new ConversationOrchestrator({ ...base(), responders })).not.toThrow();
  });

  const idExpected =
    'an id of 1-128 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`';
  it.each<[string, unknown, string]>([
    ['empty', '', '`""` (string)'],
    ['5 MB long', 'x'.repeat(5_000_000), `\`"${'x'.repeat(76)}...\` (string)`],
    ['129 characters', 'c'.repeat(129), `\`"${'c'.repeat(76)}...\` (string)`],
    ['with a newline', 'conv\n1', '`"conv\\n1"` (string)'],
    ['with a NUL', 'conv\u00001', '`"conv\\u00001"` (string)'],
    ['with markup', '<script>', '`"<script>"` (string)'],
    ['starting with a dash', '-c', '`"-c"` (string)'],
    ['not a string', 42, '`42` (number)'],
  ])('rejects a conversationId %s when run, before anything starts', async (_label, id, shown) => {
    let started = 0;
    const o = new ConversationOrchestrator({
      ...base(),
      observers: [{ startConversation: () => void started++ }],
    });
    const error = await o
      .run({ sender: 'user', content: 0 }, { conversationId: id as string })
      .catch((e) => e);
    expect(error).toEqual(
      new OrchestratorConfigError(`Expected \`conversationId\` to be ${idExpected}, got ${shown}`),
    );
    expect(error).toBeInstanceOf(OrchestratorConfigError);
    expect(started).toBe(0);
  });

  it('accepts a UUID, a 128-character id and ids with `.`, `:` and `_`', async () => {
    const o = new ConversationOrchestrator(base());
    for (const id of [randomUUID(), 'i'.repeat(128), '_tenant.7:conv-1']) {
      const result = await o.run({ sender: 'user', content: 0 }, { conversationId: id });
      expect(result.conversationId).toBe(id);
    }
  });

  it('rejects a bad input message when run', async () => {
    const o = new ConversationOrchestrator(base());
    await expect(o.run('hello' as never)).rejects.toThrow(
      'Expected `input` to be a message ({ sender: string, content }), got `"hello"` (string)',
    );
  });
});

describe('options that cannot be read give an OrchestratorConfigError naming the option', () => {
  const revoked = <T extends object>(target: T): T => {
    const { proxy, revoke } = Proxy.revocable(target, {});
    revoke();
    return proxy;
  };
  const throwingGetter = <T extends object>(target: T, key: string): T =>
    Object.defineProperty(target, key, {
      enumerable: true,
      get() {
        throw new Error('getter');
      },
    });
  /** What `new ConversationOrchestrator(options)` throws: its class and message. */
  const thrown = (options: unknown): [string, string] => {
    try {
      new ConversationOrchestrator(options as never);
    } catch (error) {
      return [(error as Error).constructor.name, (error as Error).message];
    }
    return ['nothing', ''];
  };
  const options = [
    'name',
    'responders',
    'turnPolicy',
    'projection',
    'termination',
    'listener',
    'observers',
    'dispatchTimeoutMs',
    'maxQueueLength',
    'historySize',
    'onResponderError',
    'onListenerError',
    'yieldIntervalMs',
  ];

  it('names the options object itself when it is a revoked Proxy', () => {
    expect(thrown(revoked(base()))).toEqual([
      'OrchestratorConfigError',
      'Expected `options` to be an object whose options can be read, got `(a revoked Proxy)` (object)',
    ]);
  });

  it.each(options)('names `%s` when its getter throws', (option) => {
    expect(thrown(throwingGetter(base(), option))).toEqual([
      'OrchestratorConfigError',
      `Expected \`${option}\` to be readable, reading it threw: getter`,
    ]);
  });

  it('names the option an options Proxy was asked for when its get trap throws', () => {
    const trap = new Proxy(base(), {
      get(target, key) {
        if (key === 'termination') throw new Error('trap');
        return Reflect.get(target, key);
      },
    });
    expect(thrown(trap)).toEqual([
      'OrchestratorConfigError',
      'Expected `termination` to be readable, reading it threw: trap',
    ]);
  });

  it.each<[string, () => Record<string, unknown>, string]>([
    [
      'responders',
      () => ({ responders: revoked([{ name: 'a', respond: () => undefined }]) }),
      'Expected `responders` to be a non-empty array of responders, got `(a revoked Proxy)` (object)',
    ],
    [
      'responders[0]',
      () => ({ responders: [revoked({ name: 'a', respond: () => undefined })] }),
      'Expected `responders[0]` to be an object { name, respond } that can be read, got `(a revoked Proxy)` (object)',
    ],
    [
      'turnPolicy',
      () => ({ turnPolicy: revoked(roundRobin()) }),
      'Expected `turnPolicy` to be a turn policy (roundRobin(), broadcast(), addressed()) or a function, got `(a revoked Proxy)` (object)',
    ],
    [
      'projection',
      () => ({ projection: revoked({ initial: () => 0, fold: () => 0 }) }),
      'Expected `projection` to be an object with `initial(input)` and `fold(state, message)` functions, got `(a revoked Proxy)` (object)',
    ],
    [
      'termination',
      () => ({ termination: revoked(maxDispatches(1)) }),
      'Expected `termination` to be a termination policy (maxDispatches(), converged(), anyOf() ...), got `(a revoked Proxy)` (object)',
    ],
    [
      'observers',
      () => ({ observers: revoked([]) }),
      'Expected `observers` to be an array of observers, got `(a revoked Proxy)` (object)',
    ],
    [
      'observers[0]',
      () => ({ observers: [revoked({ startConversation: () => undefined })] }),
      'Expected `observers[0]` to be an object with a `startConversation` function, got `(a revoked Proxy)` (object)',
    ],
  ])('names `%s` when it is a revoked Proxy', (_option, override, message) => {
    expect(thrown({ ...base(), ...override() })).toEqual(['OrchestratorConfigError', message]);
  });

  it.each<[string, () => Record<string, unknown>]>([
    [
      'responders[0]',
      () => ({
        responders: new Proxy([{ name: 'a', respond: () => undefined }], {
          get(target, key) {
            if (key === '0') throw new Error('getter');
            return Reflect.get(target, key);
          },
        }),
      }),
    ],
    [
      'responders[0].name',
      () => ({ responders: [throwingGetter({ respond: () => undefined }, 'name')] }),
    ],
    ['responders[0].respond', () => ({ responders: [throwingGetter({ name: 'a' }, 'respond')] })],
    [
      'responders[0].provider',
      () => ({ responders: [throwingGetter({ name: 'a', respond: () => undefined }, 'provider')] }),
    ],
    ['turnPolicy.start', () => ({ turnPolicy: throwingGetter({}, 'start') })],
    ['projection.initial', () => ({ projection: throwingGetter({ fold: () => 0 }, 'initial') })],
    ['projection.fold', () => ({ projection: throwingGetter({ initial: () => 0 }, 'fold') })],
    ['termination.start', () => ({ termination: throwingGetter({}, 'start') })],
    [
      'observers[0].startConversation',
      () => ({ observers: [throwingGetter({}, 'startConversation')] }),
    ],
  ])('names `%s` when its read throws', (option, override) => {
    expect(thrown({ ...base(), ...override() })).toEqual([
      'OrchestratorConfigError',
      `Expected \`${option}\` to be readable, reading it threw: getter`,
    ]);
  });

  it('reads every option once, and keeps what it read', async () => {
    const reads = new Map<string, number>();
    const counted: Record<string, unknown> = {};
    const values: Record<string, unknown> = {
      ...base(),
      listener: () => {},
      observers: [],
      dispatchTimeoutMs: 1_000,
      maxQueueLength: 10,
      historySize: 2,
      onResponderError: 'stop',
      onListenerError: () => {},
      yieldIntervalMs: 5,
    };
    for (const option of options) {
      let first = true;
      Object.defineProperty(counted, option, {
        enumerable: true,
        get() {
          reads.set(option, (reads.get(option) ?? 0) + 1);
          // A second read would get a value the validation never saw.
          const value = first ? values[option] : 'changed';
          first = false;
          return value;
        },
      });
    }
    const o = new ConversationOrchestrator(counted as never);
    expect(Object.fromEntries(reads)).toEqual(Object.fromEntries(options.map((k) => [k, 1])));
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(1);
    expect(result.state.history).toHaveLength(1);
  });
});
