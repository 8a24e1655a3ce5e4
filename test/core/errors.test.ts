/**
 * One error base: every error class the package exports is an `OrchestratorError` with a stable
 * `code` of its own, so callers branch on the code rather than on message text.
 */
import { describe, expect, it } from 'vitest';
import {
  ForeignPayloadError,
  RedisUnreachableError,
  UnknownOrchestratorError,
} from '../../src/fleet/index.ts';
import * as core from '../../src/index.ts';
import { CandidateTimeoutError } from '../../src/replay/command.ts';
import { RecordingFormatError } from '../../src/replay/index.ts';
import { UsageError } from '../../src/replay/load-policy.ts';
import { NewerSchemaError } from '../../src/stores/postgres/schema.ts';

const state = {
  conversationId: 'c1',
  dispatchCount: 0,
  projection: undefined,
  messages: [],
} as never;

const errors: [string, Error][] = [
  ['ERR_ORCHESTRATOR_CONFIG', new core.OrchestratorConfigError('x')],
  ['ERR_CONVERSATION', new core.ConversationError('x', 'error', state, 0)],
  ['ERR_RESPONDER', new core.ResponderError('x', 'a', state, 0)],
  ['ERR_POLICY', new core.PolicyError('turn', state, 0, new Error('x'))],
  ['ERR_CONVERSATION_ABORTED', new core.ConversationAbortedError(state, 0)],
  ['ERR_DISPATCH_DEADLINE', new core.DispatchDeadlineError('a', 10, state, 0)],
  ['ERR_QUEUE_OVERFLOW', new core.QueueOverflowError(1, state, 0)],
  ['ERR_CONVERSATION_LEASE', new core.ConversationLeaseError('x', state, 0)],
  ['ERR_CHECKPOINT', new core.CheckpointError('x', state, 0)],
  ['ERR_CONVERSATION_EXISTS', new core.ConversationExistsError('c1')],
  ['ERR_CONVERSATION_NOT_FOUND', new core.ConversationNotFoundError('c1')],
  ['ERR_UNSTORABLE_VALUE', new core.UnstorableValueError('projection', 'a BigInt')],
  ['ERR_REDIS_UNREACHABLE', new RedisUnreachableError('redis://h:1', 5, 'no answer')],
  ['ERR_UNKNOWN_ORCHESTRATOR', new UnknownOrchestratorError('n', ['a'])],
  ['ERR_FOREIGN_PAYLOAD', new ForeignPayloadError('x')],
  ['ERR_REPLAY_USAGE', new UsageError('x')],
  ['ERR_CANDIDATE_TIMEOUT', new CandidateTimeoutError('x')],
  ['ERR_RECORDING_FORMAT', new RecordingFormatError('f', 1, 'x')],
  ['ERR_NEWER_SCHEMA', new NewerSchemaError('t', 9)],
];

describe('the error base class', () => {
  it.each(errors)(
    '%s: an OrchestratorError with its own code and its class name',
    (code, error) => {
      expect(error).toBeInstanceOf(core.OrchestratorError);
      expect(error).toBeInstanceOf(Error);
      expect((error as core.OrchestratorError).code).toBe(code);
      expect(error.name).toBe(error.constructor.name);
    },
  );

  it('gives every class a code no other class has', () => {
    const codes = errors.map(([code]) => code);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('keeps the two TypeErrors TypeErrors, and subclasses apart', () => {
    expect(new core.OrchestratorConfigError('x')).toBeInstanceOf(TypeError);
    expect(new core.UnstorableValueError('p', 'a BigInt')).toBeInstanceOf(TypeError);
    // instanceof a subclass is still the prototype chain, not the brand.
    expect(new core.ConversationExistsError('c')).not.toBeInstanceOf(core.ConversationError);
    expect(new core.OrchestratorConfigError('x')).not.toBeInstanceOf(core.ConversationError);
    expect(new core.ResponderError('x', 'a', state, 0)).toBeInstanceOf(core.ConversationError);
  });

  it('is not fooled by other errors', () => {
    expect(new Error('x')).not.toBeInstanceOf(core.OrchestratorError);
    expect(new TypeError('x')).not.toBeInstanceOf(core.OrchestratorError);
    expect(Object.assign(new Error('x'), { code: 'ERR_RESPONDER' })).not.toBeInstanceOf(
      core.OrchestratorError,
    );
    expect(null).not.toBeInstanceOf(core.OrchestratorError);
  });

  it('recognizes the errors of a second copy of the package by its registered mark', () => {
    const foreign = Object.create(
      Object.defineProperty({}, Symbol.for('conversation-orchestrator.error'), { value: true }),
    );
    expect(foreign).toBeInstanceOf(core.OrchestratorError);
  });
});
