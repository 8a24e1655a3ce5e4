import { spawnSync } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type ConversationState,
  type ConversationStore,
  createMemoryStore,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  type Responder,
  type ResponderContext,
  roundRobin,
  suspend,
} from '../../src/index.ts';
import {
  createConversationRecorder,
  type RecordedConversation,
  type RecordingSink,
} from '../../src/replay/index.ts';
import { lineRuleProblem } from '../../src/replay/line-rules.ts';
import { desksOrchestrator, spread } from '../helpers/desks.ts';
import { schemaErrors } from '../helpers/recording-schema.ts';

function lines(): {
  sink: (line: string) => void;
  read: () => RecordedConversation[];
  raw: string[];
} {
  const raw: string[] = [];
  return {
    sink: (line) => {
      raw.push(line);
    },
    read: () => raw.map((l) => JSON.parse(l) as RecordedConversation),
    raw,
  };
}

/**
 * `counter`: alice and bob in turn answer the number plus one (or as `respond` says), the state
 * is the sum, `n` dispatches; `extra` overrides any of that.
 */
function counter(
  observers: unknown[],
  n = 4,
  respond: (
    m: Message<number>,
    state: ConversationState<number, number>,
    context: ResponderContext,
    name: string,
  ) => Message<number> = (m, _s, _c, name) => ({ sender: name, content: m.content + 1 }),
  extra: Partial<OrchestratorOptions<number, number>> = {},
) {
  return new ConversationOrchestrator<number, number>({
    name: 'counter',
    responders: ['alice', 'bob'].map((name) => ({
      name,
      respond: (m: Message<number>, state, context) => respond(m, state, context, name),
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (total, m) => total + m.content },
    termination: maxDispatches(n),
    observers: observers as never,
    ...extra,
  });
}

type OneResponse = Responder<number, number>['respond'];

/** `a` answering its dispatch count. */
const countsDispatches: OneResponse = (_m, s) => ({ sender: 'a', content: s.dispatchCount });

/** `a` asking (suspending) at dispatch `at` unless answering the person, else counting. */
const asksAt =
  (at: number): OneResponse =>
  (m, s, context) =>
    s.dispatchCount === at && m.sender !== 'person'
      ? suspend({ question: 'go on?' })
      : countsDispatches(m, s, context);

/** A durable conversation `name` on `store`: one responder `a`, `steps` dispatches counted. */
function durableOne(
  name: string,
  store: ConversationStore,
  observers: unknown[],
  steps: number,
  respond: OneResponse = countsDispatches,
) {
  return new ConversationOrchestrator<number, number>({
    name,
    store,
    observers: observers as never,
    responders: [{ name: 'a', respond }],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (n) => n + 1 },
    termination: maxDispatches(steps),
  });
}

describe('createConversationRecorder', () => {
  it('writes one line per conversation, when it ends, with the ending and every dispatch', async () => {
    const out = lines();
    const recorder = createConversationRecorder<number, number>({
      sink: out.sink,
      record: (state) => ({ total: state.projection }),
    });
    const orchestrator = counter([recorder]);
    const result = await orchestrator.run(
      { sender: 'user', content: 0 },
      { conversationId: 'c-1' },
    );
    expect(out.raw).toHaveLength(1);
    expect(out.raw[0]?.endsWith('}\n')).toBe(true);
    expect(out.raw[0]?.indexOf('\n')).toBe((out.raw[0]?.length ?? 0) - 1);
    const [line] = out.read();
    expect(line).toMatchObject({
      version: 1,
      conversationId: 'c-1',
      orchestrator: 'counter',
      ending: { reason: 'max_dispatches', policy: 'max_dispatches', dispatchCount: 4 },
    });
    expect(line?.ending.elapsedMs).toBe(result.elapsedMs);
    expect(typeof line?.startTimeMs).toBe('number');
    expect(Math.abs((line?.startTimeMs ?? 0) - Date.now())).toBeLessThan(60_000);
    expect(line?.truncated).toBeUndefined();
    expect(line?.dispatches.map(({ elapsedMs: _, ...d }) => d)).toEqual([
      { n: 1, responder: 'alice', queueDepth: 1, record: { total: 1 } },
      { n: 2, responder: 'bob', queueDepth: 1, record: { total: 3 } },
      { n: 3, responder: 'alice', queueDepth: 1, record: { total: 6 } },
      // The terminating decision explains itself: maxDispatches counted 4.
      { n: 4, responder: 'bob', queueDepth: 1, record: { total: 10 }, observed: 4 },
    ]);
    const elapsed = line?.dispatches.map((d) => d.elapsedMs) ?? [];
    expect([...elapsed].sort((a, b) => a - b)).toEqual(elapsed);
    expect(schemaErrors(line)).toEqual([]);
    expect(recorder.stats()).toEqual({
      conversations: 1,
      written: 1,
      dropped: { queueFull: 0, sinkFailed: 0, closed: 0 },
      truncated: 0,
      recordErrors: 0,
      segments: 0,
    });
  });

  it('writes only whole conversations of a durable orchestrator: a suspension resumed elsewhere is not written, one resumed here is one line', async () => {
    const store = createMemoryStore();
    const make = (recorder: unknown) => durableOne('asks', store, [recorder], 4, asksAt(1));
    // Suspended under one recorder, resumed under another (as in another process): neither
    // holds the whole conversation, so neither writes it.
    const here = lines();
    const recorder = createConversationRecorder({ sink: here.sink });
    const elsewhere = lines();
    const other = createConversationRecorder({ sink: elsewhere.sink });
    await make(recorder).run({ sender: 'user', content: 0 }, { conversationId: 'split' });
    await make(other).resume('split', { input: { sender: 'person', content: 1 } });
    // Suspended and resumed under one recorder: written whole, as one line.
    const asks = make(recorder);
    await asks.run({ sender: 'user', content: 0 }, { conversationId: 'whole' });
    await asks.resume('whole', { input: { sender: 'person', content: 1 } });
    // A conversation that never suspends is written whole.
    const plain = durableOne('plain', store, [recorder], 3);
    await plain.run({ sender: 'user', content: 0 }, { conversationId: 'one-segment' });
    await recorder.close();
    await other.close();
    expect(here.read().map((l) => [l.conversationId, l.ending.dispatchCount])).toEqual([
      ['whole', 4],
      ['one-segment', 3],
    ]);
    const whole = here.read()[0] as RecordedConversation;
    expect(whole.dispatches.map((d) => d.n)).toEqual([1, 2, 3, 4]);
    expect(schemaErrors(whole)).toEqual([]);
    expect(lineRuleProblem(whole)).toBeUndefined();
    expect(elsewhere.read()).toEqual([]);
    // 'split': its suspended segment let go at close() here, its resumed one not written there.
    expect(recorder.stats()).toMatchObject({ conversations: 2, written: 2, segments: 1 });
    expect(other.stats()).toMatchObject({ conversations: 0, written: 0, segments: 1 });
  });

  it('writes a durable conversation handed back by an abort and ended by cancel() in this process as one line, ending aborted, with the dispatches the store holds', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink });
    const store = createMemoryStore();
    let calls = 0;
    let entered: () => void = () => {};
    const third = new Promise<void>((r) => {
      entered = r;
    });
    const orchestrator = durableOne('left', store, [recorder], 10, (m, s, context) => {
      if (++calls < 3) return countsDispatches(m, s, context);
      entered();
      // The third call waits until the run is aborted (the trader leaves).
      return new Promise((_, reject) =>
        context.signal.addEventListener('abort', () => reject(context.signal.reason), {
          once: true,
        }),
      );
    });
    const trader = new AbortController();
    const run = orchestrator.run(
      { sender: 'user', content: 0 },
      { conversationId: 'abandoned', signal: trader.signal },
    );
    await third;
    trader.abort(new Error('the trader left'));
    await expect(run).rejects.toThrow();
    // Handed back, not ended: nothing written yet.
    expect(out.read()).toEqual([]);
    expect((await store.get('abandoned'))?.status).toBe('running');
    expect(await orchestrator.cancel('abandoned', { reason: 'the trader left' })).toBe(true);
    await recorder.close();
    const [line, ...rest] = out.read();
    expect(rest).toEqual([]);
    expect(line?.conversationId).toBe('abandoned');
    expect(line?.ending).toMatchObject({
      reason: 'aborted',
      error: 'ConversationAbortedError',
      dispatchCount: 2,
    });
    expect(line?.dispatches.map((d) => d.n)).toEqual([1, 2]);
    expect(schemaErrors(line)).toEqual([]);
    expect(lineRuleProblem(line as RecordedConversation)).toBeUndefined();
    expect(recorder.stats()).toMatchObject({ conversations: 1, written: 1, segments: 0 });
  });

  it('lets go of the oldest conversation held between segments past maxHeldChars (its later segment is not written)', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink, maxHeldChars: 300 });
    const store = createMemoryStore();
    const asks = durableOne('asks', store, [recorder], 4, asksAt(2));
    // Each suspended conversation holds three fragments (~210 characters): the second lets go
    // of the first.
    await asks.run({ sender: 'user', content: 0 }, { conversationId: 'first' });
    await asks.run({ sender: 'user', content: 0 }, { conversationId: 'second' });
    await asks.resume('first', { input: { sender: 'person', content: 1 } });
    await asks.resume('second', { input: { sender: 'person', content: 1 } });
    await recorder.close();
    expect(out.read().map((l) => [l.conversationId, l.dispatches.length])).toEqual([['second', 4]]);
    expect(recorder.stats()).toMatchObject({ conversations: 1, segments: 2 });
  });

  it('records a failed conversation with its error class and the dispatches before it', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink });
    const orchestrator = counter([recorder], 10, (m) => {
      if (m.content >= 2) throw new Error('feed broke');
      return { sender: 'alice', content: m.content + 1 };
    });
    await expect(orchestrator.run({ sender: 'user', content: 0 })).rejects.toThrow('feed broke');
    const [line] = out.read();
    expect(line?.ending).toMatchObject({
      reason: 'error',
      dispatchCount: 2,
      error: 'ResponderError',
    });
    expect(line?.dispatches.map((d) => d.n)).toEqual([1, 2]);
    expect(line?.dispatches.map((d) => d.sender)).toEqual([undefined, 'alice']);
    expect(schemaErrors(line)).toEqual([]);
  });

  it('caps the dispatches kept per conversation and marks the line truncated', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink, maxDispatches: 3 });
    await counter([recorder], 50).run({ sender: 'user', content: 0 });
    const [line] = out.read();
    expect(line?.truncated).toBe(true);
    expect(line?.ending.dispatchCount).toBe(50);
    expect(line?.dispatches.map((d) => d.n)).toEqual([1, 2, 3]);
    expect(schemaErrors(line)).toEqual([]);
    expect(recorder.stats().truncated).toBe(1);
  });

  it('records the desks with their decision, valid against the schema, many at once', async () => {
    const out = lines();
    const recorder = createConversationRecorder({
      sink: out.sink,
      record: (state: { projection: { quotes: Record<string, number> } }) => ({
        spread: spread(state.projection),
      }),
    });
    const orchestrator = desksOrchestrator({ observers: [recorder as never] });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        orchestrator.run({ sender: 'user', content: 0 }, { conversationId: `d-${i}` }),
      ),
    );
    const recorded = out.read();
    expect(recorded.map((l) => l.conversationId).sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `d-${i}`).sort(),
    );
    for (const line of recorded) {
      expect(schemaErrors(line)).toEqual([]);
      expect(line.ending).toMatchObject({ reason: 'converged', policy: 'converged' });
      expect(line.dispatches).toHaveLength(line.ending.dispatchCount);
    }
  });
});

describe('a record(state) that misbehaves costs its field, not the line', () => {
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const deep: Record<string, unknown> = {};
  let cursor = deep;
  for (let i = 0; i < 10_000; i++) {
    const next = {};
    cursor.next = next;
    cursor = next;
  }
  const throwingGetter = {
    get boom() {
      throw new Error('getter exploded');
    },
  };
  const cases: [string, unknown, RegExp][] = [
    ['a cyclic object', cyclic, /cyclic/],
    ['a BigInt', { n: 10n }, /BigInt/],
    ['a revoked Proxy', revoked.proxy, /threw/],
    ['a getter that throws', throwingGetter, /getter exploded/],
    ['a 9 MB string', 'x'.repeat(9 * 1024 * 1024), /longer than 16384 characters/],
    [
      'a 30,000-key map',
      Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`k${i}`, i])),
      /longer than/,
    ],
    ['an object nested 10,000 deep', deep, /nested deeper than 64/],
    // JSON.stringify writes these as null, which a candidate reads as 0 (null < 0.5 is true).
    ['NaN', Number.NaN, /^not JSON: NaN is not JSON \(JSON.stringify would write null\)$/],
    ['Infinity', Number.POSITIVE_INFINITY, /^not JSON: Infinity is not JSON/],
    ['-Infinity', Number.NEGATIVE_INFINITY, /^not JSON: -Infinity is not JSON/],
    ['an object holding NaN', { spread: Number.NaN }, /^not JSON: NaN is not JSON/],
    ['an array holding Infinity', [1, Number.POSITIVE_INFINITY], /^not JSON: Infinity is not/],
  ];
  for (const [what, value, reason] of cases) {
    it(`records the line without the field when record returns ${what}`, async () => {
      const out = lines();
      const recorder = createConversationRecorder<number, number>({
        sink: out.sink,
        // The second dispatch's value misbehaves; the others are recorded.
        record: (state) => (state.dispatchCount === 2 ? value : state.projection),
      });
      const started = performance.now();
      await counter([recorder], 3).run({ sender: 'user', content: 0 });
      expect(performance.now() - started).toBeLessThan(1_000);
      const [line] = out.read();
      expect(line?.dispatches.map((d) => d.record)).toEqual([1, undefined, 6]);
      expect(line?.dispatches[1]?.recordError).toMatch(reason);
      expect(schemaErrors(line)).toEqual([]);
      expect(recorder.stats().recordErrors).toBe(1);
    });
  }

  it('records the line without the field when record throws, even a value that cannot be printed', async () => {
    const out = lines();
    const recorder = createConversationRecorder<number, number>({
      sink: out.sink,
      record: (state) => {
        if (state.dispatchCount === 1) throw revoked.proxy;
        if (state.dispatchCount === 2) throw new RangeError('no projection today');
        return state.projection;
      },
    });
    await counter([recorder], 3).run({ sender: 'user', content: 0 });
    const [line] = out.read();
    expect(line?.dispatches.map((d) => d.recordError)).toEqual([
      'record(state) threw: a value that cannot be printed',
      'record(state) threw: RangeError: no projection today',
      undefined,
    ]);
    expect(line?.dispatches[2]?.record).toBe(6);
  });

  it('writes what JSON.stringify writes for ordinary values (toJSON, undefined, nested arrays)', async () => {
    const value = {
      when: new Date(0),
      gone: undefined,
      fn: () => 1,
      list: [1, undefined, { deep: [true, null, 'é"\n'] }],
      boxed: new Number(3),
      text: 'ok',
    };
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink, record: () => value });
    await counter([recorder], 1).run({ sender: 'user', content: 0 });
    expect(out.raw[0]).toContain(`"record":${JSON.stringify(value)}}`);
  });
});

describe('a sink that misbehaves drops whole conversations, counted, and never slows the loop', () => {
  it('drops conversations past maxQueuedBytes when the sink never drains, and close() still returns', async () => {
    const warnings: string[] = [];
    const stuck = new Writable({ highWaterMark: 1024, write: () => {} });
    const recorder = createConversationRecorder({
      sink: stuck,
      maxQueuedBytes: 4096,
      logger: { warn: (m) => warnings.push(m) },
      reportIntervalMs: 1,
    });
    const orchestrator = counter([recorder], 20);
    const started = performance.now();
    for (let i = 0; i < 50; i++) await orchestrator.run({ sender: 'user', content: 0 });
    expect(performance.now() - started).toBeLessThan(2_000);
    const { dropped, conversations } = recorder.stats();
    expect(conversations).toBe(50);
    expect(dropped.queueFull).toBeGreaterThan(30);
    expect(
      warnings.some((w) => /dropped 1 conversation: the queue to the sink is full/.test(w)),
    ).toBe(true);
    const stats = await recorder.close({ timeoutMs: 50 });
    expect(stats.written).toBe(0);
    expect(stats.dropped.queueFull + stats.dropped.closed).toBe(50);
  });

  it('survives a full disk (/dev/full): the stream error is caught, every later line counted as dropped', async () => {
    const warnings: string[] = [];
    const stream = createWriteStream('/dev/full');
    const recorder = createConversationRecorder({
      sink: stream,
      logger: { warn: (m) => warnings.push(m) },
      reportIntervalMs: 1,
    });
    const orchestrator = counter([recorder], 5);
    for (let i = 0; i < 5; i++) {
      await orchestrator.run({ sender: 'user', content: 0 });
      await new Promise((r) => setTimeout(r, 10));
    }
    const stats = await recorder.close({ timeoutMs: 1_000 });
    expect(stats.written).toBe(0);
    expect(stats.dropped.sinkFailed).toBe(5);
    expect(warnings.join('\n')).toMatch(/ENOSPC/);
  });

  it('counts a function sink that throws or rejects, and keeps using it', async () => {
    let calls = 0;
    const good: string[] = [];
    const sink: RecordingSink = (line) => {
      calls++;
      if (calls === 1) throw new Error('disk says no');
      if (calls === 2) return Promise.reject(new Error('later no'));
      good.push(line);
      return Promise.resolve();
    };
    const recorder = createConversationRecorder({ sink, logger: { warn: () => {} } });
    const orchestrator = counter([recorder], 2);
    for (let i = 0; i < 4; i++) await orchestrator.run({ sender: 'user', content: 0 });
    const stats = await recorder.close();
    expect(stats.dropped.sinkFailed).toBe(2);
    expect(stats.written).toBe(2);
    expect(good).toHaveLength(2);
  });

  it('writes whole lines to a slow file stream and close() waits for them', async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const path = join(mkdtempSync(join(tmpdir(), 'recorder-')), 'r.ndjson');
    const stream = createWriteStream(path, { highWaterMark: 256 });
    const recorder = createConversationRecorder<number, number>({
      sink: stream,
      record: (s) => ({ total: s.projection, pad: 'p'.repeat(100) }),
    });
    const orchestrator = counter([recorder], 10);
    await Promise.all(
      Array.from({ length: 200 }, () => orchestrator.run({ sender: 'user', content: 0 })),
    );
    const stats = await recorder.close();
    expect(stats.written).toBe(200);
    await new Promise<void>((resolve) => stream.end(resolve));
    const text = readFileSync(path, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    const parsed = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as RecordedConversation);
    expect(parsed).toHaveLength(200);
    for (const line of parsed) expect(schemaErrors(line)).toEqual([]);
  });

  it('drops what ends after close(), counted as closed', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink });
    await recorder.close();
    await counter([recorder], 2).run({ sender: 'user', content: 0 });
    expect(out.raw).toEqual([]);
    expect(recorder.stats().dropped.closed).toBe(1);
  });

  it('leaves the run exactly as it is without a recorder', async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink, record: () => 1n });
    const a = await counter([recorder], 7).run(
      { sender: 'user', content: 0 },
      { conversationId: 'x' },
    );
    const b = await counter([], 7).run({ sender: 'user', content: 0 }, { conversationId: 'x' });
    expect({ ...a, elapsedMs: 0 }).toEqual({ ...b, elapsedMs: 0 });
  });
});

describe('createConversationRecorder options', () => {
  it.each([
    [
      { sink: 42 },
      'Expected `createConversationRecorder({ sink })` to be a Writable or a function taking a line, got `42` (number)',
    ],
    [
      { sink: () => {}, record: 'projection' },
      'Expected `createConversationRecorder({ record })` to be a function',
    ],
    [
      { sink: () => {}, maxDispatches: 0 },
      'Expected `createConversationRecorder({ maxDispatches })` to be a positive integer, got `0` (number)',
    ],
    [
      { sink: () => {}, maxQueuedBytes: -1 },
      'Expected `createConversationRecorder({ maxQueuedBytes })` to be a positive integer',
    ],
    [
      { sink: () => {}, logger: {} },
      'Expected `createConversationRecorder({ logger })` to be an object with a warn(message) method',
    ],
  ])('refuses %j', (options, message) => {
    expect(() => createConversationRecorder(options as never)).toThrow(message);
  });
});

describe('the recording schema', () => {
  const good: RecordedConversation = {
    version: 1,
    conversationId: 'c',
    orchestrator: 'o',
    startTimeMs: 1,
    ending: { reason: 'converged', dispatchCount: 1, elapsedMs: 0.5 },
    dispatches: [{ n: 1, elapsedMs: 0.5, responder: 'a', queueDepth: 0 }],
  };
  it('accepts a minimal line', () => {
    expect(schemaErrors(good)).toEqual([]);
  });
  it.each([
    ['another version', { ...good, version: 2 }, '/version must be equal to constant'],
    ['no ending', { ...good, ending: undefined }, "/ must have required property 'ending'"],
    [
      'a dispatch numbered 0',
      { ...good, dispatches: [{ ...good.dispatches[0], n: 0 }] },
      '/dispatches/0/n must be >= 1',
    ],
    [
      'fractional tokens',
      { ...good, usage: { inputTokens: 1.5, outputTokens: 0 } },
      '/usage/inputTokens must be integer',
    ],
    ['an unknown field', { ...good, extra: 1 }, '/ must NOT have additional properties'],
  ])('refuses a line with %s', (_what, line, error) => {
    expect(schemaErrors(JSON.parse(JSON.stringify(line)))).toContain(error);
  });
});

describe('the recorder and token usage', () => {
  it("records each dispatch's tokens, the totals at the end, and state.usage where others reported in between", async () => {
    const out = lines();
    const recorder = createConversationRecorder({ sink: out.sink });
    let invocation = 0;
    // Both answer every message; the second invocation reports its tokens, then fails, skipped.
    const orchestrator = counter(
      [recorder],
      3,
      (m, _s, context, name) => {
        invocation++;
        context.reportUsage({ inputTokens: 100 * invocation, outputTokens: invocation });
        if (invocation === 2) throw new Error('skipped');
        return { sender: name, content: m.content + 1 };
      },
      { name: 'usage', turnPolicy: (_m, _s, responders) => responders, onResponderError: 'skip' },
    );
    const result = await orchestrator.run({ sender: 'user', content: 0 });
    const [line] = out.read();
    expect(line?.dispatches.map(({ n, tokens, usage }) => ({ n, tokens, usage }))).toEqual([
      { n: 1, tokens: { inputTokens: 100, outputTokens: 1 }, usage: undefined },
      // Invocation 2 failed and was skipped: its tokens are in state.usage, not in a dispatch's.
      {
        n: 2,
        tokens: { inputTokens: 300, outputTokens: 3 },
        usage: { inputTokens: 600, outputTokens: 6 },
      },
      { n: 3, tokens: { inputTokens: 400, outputTokens: 4 }, usage: undefined },
    ]);
    expect(line?.usage).toEqual({ inputTokens: 1000, outputTokens: 10 });
    expect(result.usage).toMatchObject({ inputTokens: 1000, outputTokens: 10 });
    expect(schemaErrors(line)).toEqual([]);
  });
});

describe('close() against a sink that never acknowledges', () => {
  it('settles after timeoutMs even when nothing else keeps the process alive', () => {
    // In a child process, since the defect was the process exiting (code 13) with close() unsettled.
    const src = new URL('../../src/', import.meta.url).href;
    const script = `
      import { Writable } from 'node:stream';
      import { ConversationOrchestrator, maxDispatches, roundRobin } from '${src}index.ts';
      import { createConversationRecorder } from '${src}replay/index.ts';
      const sink = new Writable({ write() {} });
      const recorder = createConversationRecorder({ sink, logger: { warn: () => {} } });
      const o = new ConversationOrchestrator({
        name: 'c', responders: [{ name: 'a', respond: (m) => ({ sender: 'a', content: m.content + 1 }) }],
        turnPolicy: roundRobin(), projection: { initial: () => 0, fold: (_s, m) => m.content },
        termination: maxDispatches(3), observers: [recorder] });
      await o.run({ sender: 'u', content: 0 });
      const stats = await recorder.close({ timeoutMs: 200 });
      console.log(JSON.stringify(stats.dropped));`;
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect({ status: child.status, stdout: child.stdout.trim() }).toEqual({
      status: 0,
      stdout: JSON.stringify({ queueFull: 0, sinkFailed: 0, closed: 1 }),
    });
  });
});
