import { describe, expect, it } from 'vitest';
import { type ConversationListener, composeListeners, maxDispatches } from '../../src/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

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
    // The throw at once, the rejection when the promises settled: each dispatch, both.
    const messages = errors.map((e) => (e as Error).message);
    expect(messages.filter((m) => m === 'sync')).toHaveLength(10);
    expect(messages.filter((m) => m === 'async')).toHaveLength(10);
    expect(messages).toHaveLength(20);
  });

  it('reports every synchronous throw at once while another listener’s promise never settles', async () => {
    const errors: string[] = [];
    const neverSettles: ConversationListener<number, number> = () => new Promise(() => {});
    const syncThrow: ConversationListener<number, number> = (_s, _d, n) => {
      throw new Error(`sync ${n}`);
    };
    await counterOrchestrator({
      listener: composeListeners(neverSettles, syncThrow),
      onListenerError: (e) => errors.push((e as Error).message),
      termination: maxDispatches(3),
    }).run({ sender: 'user', content: 0 });
    expect(errors).toEqual(['sync 1', 'sync 2', 'sync 3']);
  });

  it('reports several synchronous throws of one call as one AggregateError, in order', async () => {
    const errors: unknown[] = [];
    const throwing =
      (label: string): ConversationListener<number, number> =>
      () => {
        throw new Error(label);
      };
    await counterOrchestrator({
      listener: composeListeners(() => new Promise(() => {}), throwing('x'), throwing('y')),
      onListenerError: (e) => errors.push(e),
      termination: maxDispatches(1),
    }).run({ sender: 'user', content: 0 });
    expect(errors).toHaveLength(1);
    expect((errors[0] as AggregateError).errors.map((e: Error) => e.message)).toEqual(['x', 'y']);
  });

  it('hands reportError to each listener, for work it hands off', async () => {
    const errors: string[] = [];
    await counterOrchestrator({
      listener: composeListeners((_s, _d, n, _ms, reportError) => {
        setTimeout(() => reportError?.(new Error(`flush ${n} failed`)), 1);
      }),
      onListenerError: (e) => errors.push((e as Error).message),
      termination: maxDispatches(2),
    }).run({ sender: 'user', content: 0 });
    await new Promise((r) => setTimeout(r, 20));
    expect(errors).toEqual(['flush 1 failed', 'flush 2 failed']);
  });

  it('rejects a non-function clearly', () => {
    expect(() => composeListeners(42 as never)).toThrow(
      'Expected listener 0 to be a function, got number',
    );
  });
});
