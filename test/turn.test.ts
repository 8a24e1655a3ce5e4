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
} from '../src/index.ts';

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
