/**
 * What a conversation records as it starts, set up once by `ObservedConversation`'s constructor:
 * its span's attributes, and its start in the metrics.
 */
import type { Attributes } from '@opentelemetry/api';
import type { ConversationStart } from '../core/spi/observer.ts';
import { messageContent } from './guard.ts';
import type { OrchestratorRecord, ResponderSlots } from './metric-records.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import { addSegmentAttributes, type SegmentStart } from './segment.ts';
import {
  ATTR_CONVERSATION_INPUT_CONTENT,
  ATTR_CONVERSATION_RESPONDERS,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_WORKFLOW_NAME,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
} from './semconv.ts';
import type { Settings } from './utils.ts';

/** The conversation span's attributes at its start. */
export function conversationAttributes<S, C>(
  settings: Settings<S, C>,
  start: ConversationStart<C>,
  segment: SegmentStart,
  kept: boolean,
): Attributes {
  const attributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_WORKFLOW,
    [ATTR_GEN_AI_WORKFLOW_NAME]: start.orchestrator,
    [ATTR_GEN_AI_CONVERSATION_ID]: start.conversationId,
    // The core's array, stable per orchestrator: the SDK keeps it as given.
    [ATTR_CONVERSATION_RESPONDERS]: start.responders as string[],
  };
  if (settings.captureContent) {
    attributes[ATTR_CONVERSATION_INPUT_CONTENT] = messageContent(
      start.input,
      settings.maxContentLength,
      settings.reports.content,
    );
  }
  if (segment.store !== undefined) addSegmentAttributes(attributes, segment, kept);
  return attributes;
}

/**
 * The orchestrator's records for a conversation, its start counted: a first segment starts the
 * conversation, a later one only this process's part of it.
 */
export function startMetrics(
  metrics: OrchestratorMetrics,
  start: ConversationStart<unknown>,
  segment: SegmentStart,
): { readonly record: OrchestratorRecord; readonly slots: ResponderSlots } {
  const record = metrics.orchestrator(start.orchestrator);
  const slots = metrics.slots(record, start.responders);
  if (segment.store !== undefined) metrics.durable();
  const { resumed } = segment;
  if (resumed === undefined) metrics.conversationStarted(record);
  else {
    metrics.segmentStarted(record);
    // A cancel resumes nothing: it is counted where endings are (reason `aborted`).
    if (resumed.cause !== 'cancel') metrics.resumed(record, resumed.cause);
  }
  return { record, slots };
}
