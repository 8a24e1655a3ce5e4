/**
 * The check of a decoded checkpoint `state` before the core builds anything from it
 * (`checkedState`): the format version and the shape of every field resume reads back.
 */
import { describeValue } from '../spi/errors.ts';
import type { CheckpointState, FreshState } from './checkpoint.ts';

/** A stored checkpoint's state is not one this version can resume: what was wrong. */
function badState(field: string, expected: string, value: unknown): never {
  throw new TypeError(`expected \`${field}\` to be ${expected}, got ${describeValue(value)}`);
}

/** Whether `value` is a message as a checkpoint or an entry stores one (a `sender` string). */
export function isStoredMessage(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { sender?: unknown }).sender === 'string'
  );
}

/** What a stored message must be, as the errors of a checkpoint or an entry say it. */
export const MESSAGE = 'a message ({ sender: string, content })';

function storedMessages(field: string, value: unknown): void {
  if (!Array.isArray(value)) badState(field, `an array of messages`, value);
  value.forEach((m: unknown, i) => {
    if (!isStoredMessage(m)) badState(`${field}[${i}]`, MESSAGE, m);
  });
}

function storedCount(field: string, value: unknown, least: number): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least) {
    badState(field, least === 0 ? 'a non-negative integer' : 'a positive integer', value);
  }
}

function storedObject(field: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    badState(field, 'an object', value);
  }
  return value as Record<string, unknown>;
}

/** Token counts: the first two always stored, the others only once reported. */
const TOTALS = [
  ['inputTokens', true],
  ['outputTokens', true],
  ['cacheReadInputTokens', false],
  ['reasoningOutputTokens', false],
] as const;

function storedTotals(field: string, value: unknown): void {
  const totals = storedObject(field, value);
  for (const [key, always] of TOTALS) {
    const n = totals[key];
    if (n === undefined && !always) continue;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
      badState(`${field}.${key}`, 'a non-negative integer', n);
    }
  }
}

/**
 * A decoded checkpoint `state`, checked before anything is built from it: the format version
 * (`v: 1`) and the shape of every field the core reads back (`responders`: how many the
 * orchestrator has, for the indexes of the responders still to answer). Throws a TypeError
 * saying which field, what was expected and what came; the caller names the conversation.
 */
export function checkedState<S, C>(
  value: unknown,
  responders: number,
): CheckpointState<S, C> | FreshState<C> {
  const state = storedObject('state', value);
  if (state.v !== 1) badState('v', '1 (the checkpoint format this version writes)', state.v);
  if (!isStoredMessage(state.input)) badState('input', MESSAGE, state.input);
  if (state.attempt !== undefined) storedCount('attempt', state.attempt, 1);
  if (state.segment !== undefined) storedCount('segment', state.segment, 1);
  if (state.interrupted !== undefined && state.interrupted !== 'abort') {
    badState('interrupted', "'abort' or absent", state.interrupted);
  }
  if (state.observers !== undefined) storedObject('observers', state.observers);
  if (state.fresh !== undefined) {
    if (state.fresh !== true) badState('fresh', 'true or absent', state.fresh);
    return state as unknown as FreshState<C>;
  }
  if (!isStoredMessage(state.lastMessage)) badState('lastMessage', MESSAGE, state.lastMessage);
  storedMessages('queue', state.queue);
  if (state.history !== undefined) storedMessages('history', state.history);
  if (state.answering !== undefined) {
    const answering = storedObject('answering', state.answering);
    if (!isStoredMessage(answering.message))
      badState('answering.message', MESSAGE, answering.message);
    const next = answering.next;
    if (!Array.isArray(next)) badState('answering.next', 'an array of responder indexes', next);
    next.forEach((i: unknown, at) => {
      if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= responders) {
        badState(`answering.next[${at}]`, `a responder index (0 to ${responders - 1})`, i);
      }
    });
  }
  storedCount('dispatchCount', state.dispatchCount, 0);
  storedCount('invocations', state.invocations, 0);
  storedCount('attempt', state.attempt, 1);
  storedCount('segment', state.segment, 1);
  const elapsedMs = state.elapsedMs;
  if (typeof elapsedMs !== 'number' || !Number.isFinite(elapsedMs) || elapsedMs < 0) {
    badState('elapsedMs', 'a non-negative finite number', elapsedMs);
  }
  if (state.usage !== undefined) {
    const usage = storedObject('usage', state.usage);
    storedTotals('usage.total', usage.total);
    const byResponder = usage.byResponder;
    if (!Array.isArray(byResponder))
      badState('usage.byResponder', 'an array of totals or nulls', byResponder);
    byResponder.forEach((totals: unknown, i) => {
      if (totals !== null) storedTotals(`usage.byResponder[${i}]`, totals);
    });
    if (usage.turnPolicy !== undefined) storedTotals('usage.turnPolicy', usage.turnPolicy);
  }
  if (state.observers !== undefined) storedObject('observers', state.observers);
  if (state.suspended !== undefined) {
    const suspended = storedObject('suspended', state.suspended);
    if (typeof suspended.responder !== 'string')
      badState('suspended.responder', 'a string', suspended.responder);
  }
  return state as unknown as CheckpointState<S, C>;
}
