/**
 * The job payload: what a producer puts on the queue and a worker accepts. One format, one checker:
 * a job that does not parse is not ours (another app sharing the queue, a hand-made job, a newer
 * version) and is refused without touching any conversation.
 */

import {
  CONVERSATION_ID_EXPECTED,
  isBoundedName,
  isConversationId,
} from '../core/shared/validate.ts';
import { OrchestratorError } from '../core/spi/errors.ts';

/** Marks a job as ours, with the payload's format version. */
export const PAYLOAD_FORMAT = 'conversation-orchestrator/segment@1';

/**
 * One segment of a conversation to run:
 * - `start`: run a new conversation with `input` (a stalled start resumes what it committed);
 * - `resume`: give a suspended conversation a person's answer (`input`), for the suspension whose
 *   checkpoint has commit sequence `suspension`;
 * - `continue`: go on from the last checkpoint (a conversation handed back by a draining worker).
 */
export interface SegmentPayload {
  /** `PAYLOAD_FORMAT`: marks the job as ours, with the format's version. */
  readonly format: typeof PAYLOAD_FORMAT;
  /** What the segment does (see above). */
  readonly kind: 'start' | 'resume' | 'continue';
  /** The name of the orchestrator that runs the conversation. */
  readonly orchestrator: string;
  /** The conversation's id. */
  readonly conversationId: string;
  /** The run's input (`start`) or the person's answer (`resume`). */
  readonly input?: unknown;
  /** The commit sequence of the suspended checkpoint a `resume` answers. */
  readonly suspension?: number;
  /** The producer's W3C trace context (`traceparent`, `tracestate`), when it had one. */
  readonly trace?: Readonly<Record<string, string>>;
  /** A `start`'s claim on its id (the producer's token): tells its job from another's. */
  readonly claim?: string;
}

const KINDS = new Set(['start', 'resume', 'continue']);

/** A payload the worker refuses, with what was wrong. */
export class ForeignPayloadError extends OrchestratorError {
  /** The class's name, for logs. */
  override readonly name = 'ForeignPayloadError';
  override readonly code: string = 'ERR_FOREIGN_PAYLOAD';
}

/** Checks a job's data; throws a `ForeignPayloadError` saying what is wrong when it is not ours. */
export function parsePayload(data: unknown): SegmentPayload {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new ForeignPayloadError(`Expected the job data to be an object, got ${typeOf(data)}`);
  }
  const d = data as Record<string, unknown>;
  if (d.format !== PAYLOAD_FORMAT) {
    throw new ForeignPayloadError(
      `Expected the job data's \`format\` to be '${PAYLOAD_FORMAT}', got ${show(d.format)}`,
    );
  }
  if (typeof d.kind !== 'string' || !KINDS.has(d.kind)) {
    throw new ForeignPayloadError(
      `Expected \`kind\` to be 'start', 'resume' or 'continue', got ${show(d.kind)}`,
    );
  }
  if (!isBoundedName(d.orchestrator)) {
    throw new ForeignPayloadError(
      `Expected \`orchestrator\` to be an orchestrator name, got ${show(d.orchestrator)}`,
    );
  }
  if (!isConversationId(d.conversationId)) {
    throw new ForeignPayloadError(
      `Expected \`conversationId\` to be ${CONVERSATION_ID_EXPECTED}, got ${show(d.conversationId)}`,
    );
  }
  // The run's input and a person's answer are messages (`{ sender: string, content }`), as the
  // producer checks: anything else would be refused by the core at every retry.
  const input = d.input;
  if (
    (d.kind === 'start' || input !== undefined) &&
    (typeof input !== 'object' ||
      input === null ||
      Array.isArray(input) ||
      typeof (input as { sender?: unknown }).sender !== 'string')
  ) {
    throw new ForeignPayloadError(
      `Expected \`input\` to be a message { sender: string, content }${d.kind === 'start' ? '' : ' or absent'}, got ${show(input)}`,
    );
  }
  if (
    d.suspension !== undefined &&
    (typeof d.suspension !== 'number' || !Number.isSafeInteger(d.suspension) || d.suspension < 1)
  ) {
    throw new ForeignPayloadError(
      `Expected \`suspension\` to be a positive integer, got ${show(d.suspension)}`,
    );
  }
  if (d.trace !== undefined) {
    const t = d.trace;
    if (
      typeof t !== 'object' ||
      t === null ||
      Object.values(t).some((v) => typeof v !== 'string' || v.length > 512)
    ) {
      throw new ForeignPayloadError('Expected `trace` to be a map of W3C trace context strings');
    }
  }
  return d as unknown as SegmentPayload;
}

/**
 * BullMQ job ids may not contain `:` (nor be an integer), conversation ids may: `:` becomes `%`
 * (never in a conversation id), so the mapping stays one to one and readable.
 */
export function jobIdOf(kind: 'start' | 'resume', conversationId: string, suspension?: number) {
  const id = conversationId.replace(/:/g, '%');
  return suspension === undefined ? `${kind}.${id}` : `${kind}.${id}.${suspension}`;
}

function typeOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 80));
  if (value === undefined) return 'undefined';
  return `${JSON.stringify(value)?.slice(0, 80) ?? String(value)} (${typeOf(value)})`;
}
