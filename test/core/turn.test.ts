import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addressed,
  broadcast,
  ConversationOrchestrator,
  type ConversationState,
  type Message,
  maxDispatches,
  type Responder,
  roundRobin,
  type TurnContext,
} from '../../src/index.ts';

const named = (name: string): Responder<string[], string> => ({ name, respond: () => undefined });
const responders = ['a', 'b', 'c'].map(named);
const state = {} as ConversationState<string[], string>;
const context: TurnContext = {
  signal: new AbortController().signal,
  reportUsage: () => {},
};
const msg = (sender: string, content = '', recipients?: string[]): Message<string> =>
  recipients === undefined ? { sender, content } : { sender, content, recipients };
const names = (selection: unknown) =>
  (selection as (Responder<string[], string> | string)[]).map((r) =>
    typeof r === 'string' ? r : r.name,
  );

describe('turn policies', () => {
  it('roundRobin() cycles through the responders, per conversation', () => {
    const policy = roundRobin<string[], string>();
    const first = policy.start(responders);
    expect([1, 2, 3, 4].map(() => names(first(msg('u'), state, responders, context)))).toEqual([
      ['a'],
      ['b'],
      ['c'],
      ['a'],
    ]);
    const second = policy.start(responders);
    expect(names(second(msg('u'), state, responders, context))).toEqual(['a']);
  });

  it('broadcast() selects everyone but the sender', () => {
    const select = broadcast<string[], string>().start(responders);
    expect(names(select(msg('b'), state, responders, context))).toEqual(['a', 'c']);
    expect(names(select(msg('user'), state, responders, context))).toEqual(['a', 'b', 'c']);
  });

  it('addressed() uses recipients, else @mentions, else nobody', () => {
    const select = addressed<string[], string>().start(responders);
    expect(names(select(msg('a', 'hi', ['c', 'b']), state, responders, context))).toEqual([
      'c',
      'b',
    ]);
    expect(names(select(msg('a', 'ask @b and @c, not @cc'), state, responders, context))).toEqual([
      'b',
      'c',
    ]);
    expect(names(select(msg('a', 'nobody here'), state, responders, context))).toEqual([]);
    const strict = addressed<string[], string>({ mentions: false }).start(responders);
    expect(names(strict(msg('a', '@b'), state, responders, context))).toEqual([]);
  });

  it('accepts an async user function that picks the next speaker by name', async () => {
    const spoke: string[] = [];
    const o = new ConversationOrchestrator<string[], string>({
      name: 'llm-picks',
      responders: ['alice', 'bob'].map((name) => ({
        name,
        respond: () => {
          spoke.push(name);
          return { sender: name, content: `${name} spoke` };
        },
      })),
      // Stands in for an LLM choosing who speaks next.
      turnPolicy: async (message) => [message.sender === 'alice' ? 'bob' : 'alice'],
      projection: { initial: () => [], fold: (s, m) => [...s, m.content] },
      termination: maxDispatches(4),
    });
    const result = await o.run({ sender: 'user', content: 'start' });
    expect(spoke).toEqual(['alice', 'bob', 'alice', 'bob']);
    expect(result.state.projection).toEqual([
      'alice spoke',
      'bob spoke',
      'alice spoke',
      'bob spoke',
    ]);
  });

  it('reports a turn policy that answers something other than an array, sync or async, alike', async () => {
    for (const turnPolicy of [() => 'alice' as never, async () => 'alice' as never]) {
      const o = new ConversationOrchestrator<string[], string>({
        name: 'bad-turn',
        responders: [named('alice')],
        turnPolicy,
        projection: { initial: () => [], fold: (s) => s },
        termination: maxDispatches(1),
      });
      await expect(o.run({ sender: 'user', content: '' })).rejects.toThrow(
        'The turn policy failed: Expected the turn policy to return an array of responders or names, got `"alice"` (string)',
      );
    }
  });

  it('broadcast in a conversation: each message fans out to the others', async () => {
    const o = new ConversationOrchestrator<string[], string>({
      name: 'fanout',
      responders: ['a', 'b', 'c'].map((name) => ({
        name,
        respond: (m) =>
          m.sender === 'user' ? { sender: name, content: `${name}<-${m.sender}` } : undefined,
      })),
      turnPolicy: broadcast(),
      projection: { initial: () => [], fold: (s, m) => [...s, m.content] },
      termination: maxDispatches(100),
    });
    const result = await o.run({ sender: 'user', content: '' });
    expect(result.state.projection).toEqual(['a<-user', 'b<-user', 'c<-user']);
    // 3 answers to the user, then each of the 3 messages is answered (with nothing) by 2 others.
    expect(result.dispatchCount).toBe(9);
  });
});

describe('addressed(): a mention is @ and a whole responder name', () => {
  const people = ['bob', 'bob.smith', 'carol'].map(named);
  const select = addressed<string[], string>().start(people);
  const mentioned = (content: string) =>
    names(select(msg('user', content), state, people, context));

  it.each<[string, string[]]>([
    ['hi @bob.smith', ['bob.smith']],
    ['mail it to carol@bob.example.com', []],
    ['hi @bob, and @carol.', ['bob', 'carol']],
    ['@bob: please', ['bob']],
    ['ask @bob...', ['bob']],
    ['ask @bob.\nthen @carol', ['bob', 'carol']],
    ['(@carol) and @bob!', ['bob', 'carol']],
    ['@bobby and @bob-2 and @Bob and @bob_', []],
    ['@bob.smith.', ['bob.smith']],
    ['@bob.smithson', []],
    ['@@bob', ['bob']],
    ['@carol @carol @carol', ['carol']],
  ])('%j selects %j', (content, expected) => {
    expect(mentioned(content)).toEqual(expected);
  });

  it('prefers the longest name that fits at one @', () => {
    const dotted = ['bob', 'bob.'].map(named);
    const choose = addressed<string[], string>().start(dotted);
    expect(names(choose(msg('u', 'hey @bob. there'), state, dotted, context))).toEqual(['bob.']);
    expect(names(choose(msg('u', 'hey @bob there'), state, dotted, context))).toEqual(['bob']);
  });

  it('finds a 64-character name before a run of sentence dots, and no name in a longer one', () => {
    const long = [named('x'.repeat(64))];
    const choose = addressed<string[], string>().start(long);
    const pick = (content: string) => names(choose(msg('u', content), state, long, context));
    expect(pick(`@${'x'.repeat(64)}${'.'.repeat(100)} ok`)).toEqual(['x'.repeat(64)]);
    expect(pick(`@${'x'.repeat(65)}`)).toEqual([]);
    expect(pick(`@${'x'.repeat(64)}${'.'.repeat(100)}y`)).toEqual([]);
  });

  it('invokes only the whole name mentioned, in a conversation', async () => {
    const invoked: string[] = [];
    const o = new ConversationOrchestrator<string[], string>({
      name: 'mentions',
      responders: ['bob', 'bob.smith', 'carol'].map((name) => ({
        name,
        respond: () => {
          invoked.push(name);
          return undefined;
        },
      })),
      turnPolicy: addressed(),
      projection: { initial: () => [], fold: (s) => s },
      termination: maxDispatches(10),
    });
    await o.run({ sender: 'user', content: 'hi @bob.smith' });
    await o.run({ sender: 'user', content: 'mail it to carol@bob.example.com' });
    expect(invoked).toEqual(['bob.smith']);
  });

  /**
   * The definition, written out literally as a second implementation: every `@` not preceded by
   * a name character; of the responder names the text continues with there, those followed by
   * the end or a run of `.`/`:` then a non-name character (or the end); the longest of them.
   */
  function byDefinition(content: string, responderNames: readonly string[]): string[] {
    const nameCharacter = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_.:-]/.test(c);
    const found = new Set<string>();
    for (let i = 0; i < content.length; i++) {
      if (content[i] !== '@' || nameCharacter(content[i - 1])) continue;
      const fits = responderNames.filter((name) => {
        if (!content.startsWith(name, i + 1)) return false;
        let j = i + 1 + name.length;
        while (content[j] === '.' || content[j] === ':') j++;
        return !nameCharacter(content[j]);
      });
      const longest = fits.sort((a, b) => b.length - a.length)[0];
      if (longest !== undefined) found.add(longest);
    }
    return responderNames.filter((name) => found.has(name));
  }

  const nameChar = fc.constantFrom(...'abAB09_.:-'.split(''));
  const responderName = fc
    .tuple(fc.constantFrom(...'abAB0_'.split('')), fc.array(nameChar, { maxLength: 6 }))
    .map(([first, rest]) => first + rest.join(''));

  it('selects what the definition says, for generated names and texts', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(responderName, { minLength: 1, maxLength: 5 }).chain((list) =>
          fc.tuple(
            fc.constant(list),
            fc
              .array(
                fc.oneof(
                  // A mention of a responder, of a longer or shorter name, or text around it.
                  fc.constantFrom(...list).map((n) => `@${n}`),
                  fc.constantFrom(...list).map((n) => `x@${n}`),
                  fc.constantFrom(...list).map((n) => `@${n.slice(0, -1)}`),
                  fc
                    .array(fc.constantFrom(...'ab.:-@ ,!('.split('')), { maxLength: 4 })
                    .map((c) => c.join('')),
                ),
                { maxLength: 8 },
              )
              .map((parts) => parts.join('')),
          ),
        ),
        ([list, content]) => {
          const rs = list.map(named);
          const choose = addressed<string[], string>().start(rs);
          expect(names(choose(msg('user', content), state, rs, context))).toEqual(
            byDefinition(content, list),
          );
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('never selects a responder for an address in an email, whatever the names', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(responderName, { minLength: 1, maxLength: 5 }),
        fc.stringMatching(/^[a-z0-9_.-]{1,8}$/),
        (list, local) => {
          const rs = list.map(named);
          const choose = addressed<string[], string>().start(rs);
          const content = list.map((n) => `write to ${local}@${n}.example.com`).join(' or ');
          expect(names(choose(msg('user', content), state, rs, context))).toEqual([]);
        },
      ),
    );
  });
});
