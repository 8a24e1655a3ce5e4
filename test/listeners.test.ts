import { describe, expect, it } from 'vitest';
import { type ConversationListener, composeListeners } from '../src/index.ts';
import { counterOrchestrator } from './helpers/desks.ts';

describe('composeListeners', () => {
  it('calls every listener in order, once per dispatch', async () => {
    const calls: string[] = [];
    const listener = composeListeners<number, number>(
      (_s, _d, n) => {
        calls.push(`first ${n}`);
      },
      (_s, _d, n) => {
        calls.push(`second ${n}`);
      },
    );
    await counterOrchestrator({ listener }).run({ sender: 'user', content: 0 });
    expect(calls.slice(0, 4)).toEqual(['first 1', 'second 1', 'first 2', 'second 2']);
    expect(calls).toHaveLength(20);
  });

  it('keeps calling the others when one throws, and reports every failure', async () => {
    const errors: unknown[] = [];
    let after = 0;
    const throwing: ConversationListener<number, number> = () => {
      throw new Error('sync');
    };
    const rejecting: ConversationListener<number, number> = async () => {
      throw new Error('async');
    };
    const result = await counterOrchestrator({
      listener: composeListeners(throwing, rejecting, () => {
        after++;
      }),
      onListenerError: (e) => errors.push(e),
    }).run({ sender: 'user', content: 0 });
    await new Promise((r) => setTimeout(r, 10));
    expect(result.state.projection).toBe(55);
    expect(after).toBe(10);
    expect(errors).toHaveLength(10);
    const first = errors[0] as AggregateError;
    expect(first).toBeInstanceOf(AggregateError);
    expect(first.errors.map((e: Error) => e.message)).toEqual(['sync', 'async']);
  });

  it('rejects a non-function clearly', () => {
    expect(() => composeListeners(42 as never)).toThrow(
      'Expected listener 0 to be a function, got number',
    );
  });
});
