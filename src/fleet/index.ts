export { type FleetConnection, RedisUnreachableError } from './connection.ts';
export { UnknownOrchestratorError } from './errors.ts';
export { ForeignPayloadError, PAYLOAD_FORMAT, type SegmentPayload } from './payload.ts';
export {
  type ConversationQueue,
  type ConversationQueueOptions,
  createConversationQueue,
  type ResumeOptions,
  type ResumeOutcome,
  type StartOptions,
} from './queue.ts';
export type { FleetOrchestrator, SegmentOutcome } from './segment.ts';
export { runSegment, type SegmentContext } from './segment.ts';
export {
  type CloseOptions,
  type ConversationWorker,
  type ConversationWorkerOptions,
  type ConversationWorkerStats,
  createConversationWorker,
  type FleetEvent,
  type SegmentRateLimit,
} from './worker.ts';
